package boltstore_test

import (
	"errors"
	"testing"

	"github.com/lakemeta/lake/metastore/boltstore"
)

// TestCheckSoundStore: a healthy store is sound, its keys counted, and the
// check writes nothing.
func TestCheckSoundStore(t *testing.T) {
	path := bigStore(t)
	before := fileSum(t, path)
	rep, err := boltstore.Check(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Sound() || rep.Keys != fixtureKeys || rep.PageSize != 4096 {
		t.Fatalf("healthy store: %+v", rep)
	}
	if fileSum(t, path) != before {
		t.Fatal("check changed the file")
	}
}

// TestCheckFindsEveryDamage: each damage of issue 11's table is reported
// as problems (never a crash), and the file keeps its bytes.
func TestCheckFindsEveryDamage(t *testing.T) {
	for _, dm := range damages() {
		t.Run(dm.name, func(t *testing.T) {
			path := bigStore(t)
			dm.apply(t, path)
			before := fileSum(t, path)
			rep, err := boltstore.Check(path, 0)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Sound() || len(rep.Problems) == 0 || rep.NotStore {
				t.Fatalf("damaged file found sound: %+v", rep)
			}
			t.Logf("%d problem(s), first: %s", rep.Found, rep.Problems[0])
			if fileSum(t, path) != before {
				t.Fatal("check changed the file")
			}
		})
	}
}

// TestCheckUnorderedKeys: a damage that only bbolt's own check sees (two
// keys of a leaf swapped, every bound intact) is reported.
func TestCheckUnorderedKeys(t *testing.T) {
	path := bigStore(t)
	// Keys tbl/kNNNNN have equal lengths: swapping two of their bytes in
	// place keeps every offset valid and breaks the order.
	leaf := pagesOf(t, path, "leaf")[3]
	swapFirstKeys(t, path, leaf)
	rep, err := boltstore.Check(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sound() {
		t.Fatalf("keys out of order found sound: %+v", rep)
	}
	t.Logf("%d problem(s), first: %s", rep.Found, rep.Problems[0])
}

// TestCheckNotAStore: an empty file and another program's bbolt file are
// reported as not lake stores.
func TestCheckNotAStore(t *testing.T) {
	for name, mk := range map[string]func(*testing.T) string{"empty": emptyFile, "foreign": foreignFile} {
		rep, err := boltstore.Check(mk(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Sound() || !rep.NotStore {
			t.Fatalf("%s: %+v", name, rep)
		}
	}
}

// TestCheckBesideAWriter fails fast with ErrLocked.
func TestCheckBesideAWriter(t *testing.T) {
	path := bigStore(t)
	d, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := boltstore.Check(path, 100e6); !errors.Is(err, boltstore.ErrLocked) {
		t.Fatalf("check beside a writer: %v, want ErrLocked", err)
	}
}
