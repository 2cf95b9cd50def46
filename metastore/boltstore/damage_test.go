package boltstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/internal/boltfile/bolttest"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
)

// Regression tests for https://github.com/lakemeta/lake/issues/11: a
// damaged file is an error, never a crash or a write.

const fixtureKeys = 3000

// bigStore writes a store of fixtureKeys keys with 1 KiB values (about
// 4 MiB) in one transaction, so that nearly every page below the
// high-water mark is in use, and returns its path.
func bigStore(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lake.db")
	d, err := boltstore.Open(path, &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	bolttest.Update(t, path, func(tx *boltfile.Tx) error {
		b := tx.Bucket([]byte("data"))
		for i := range fixtureKeys {
			if err := b.Put(fmt.Appendf(nil, "tbl/k%05d", i), []byte(strings.Repeat("v", 1024))); err != nil {
				return err
			}
		}
		return nil
	})
	return path
}

// pagesOf returns the ids of the pages of the given bbolt types ("leaf",
// "branch") in the file at path.
func pagesOf(t testing.TB, path string, types ...string) []int {
	return bolttest.Pages(t, path, types...)
}

// highWaterBytes returns the length in use of the store at path: bbolt
// grows a file ahead of its high-water mark.
func highWaterBytes(t *testing.T, path string) int64 {
	return bolttest.HighWater(t, path)
}

// overwritePage writes data over page id of a 4 KiB-page file.
func overwritePage(t testing.TB, path string, id int, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, int64(id)*4096); err != nil {
		t.Fatal(err)
	}
}

func fileSum(t testing.TB, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// damage is one way of breaking a store, applied to the file at path.
type damage struct {
	name  string
	apply func(t *testing.T, path string)
}

// damages are the rows of issue 11's table that reach past Open's cheap
// checks or are refused by them.
func damages() []damage {
	truncate := func(size int64) func(*testing.T, string) {
		return func(t *testing.T, path string) {
			if err := os.Truncate(path, size); err != nil {
				t.Fatal(err)
			}
		}
	}
	zero := func(which string, n int) func(*testing.T, string) {
		return func(t *testing.T, path string) {
			ids := pagesOf(t, path, which)
			for _, id := range ids[len(ids)/2 : len(ids)/2+n] {
				overwritePage(t, path, id, make([]byte, 4096))
			}
		}
	}
	random := func(seed uint64) func(*testing.T, string) {
		return func(t *testing.T, path string) {
			rng := rand.New(rand.NewPCG(seed, seed))
			ids := pagesOf(t, path, "leaf", "branch")
			for range 3 {
				page := make([]byte, 4096)
				for i := range page {
					page[i] = byte(rng.UintN(256))
				}
				overwritePage(t, path, ids[rng.IntN(len(ids))], page)
			}
		}
	}
	ds := []damage{
		{"truncated-8KiB", truncate(8 << 10)},
		{"truncated-16KiB", truncate(16 << 10)},
		{"truncated-2MiB", truncate(2 << 20)},
		{"truncated-one-page-below-the-high-water-mark", func(t *testing.T, path string) {
			truncate(highWaterBytes(t, path)-4096)(t, path)
		}},
		{"zeroed-meta-both", func(t *testing.T, path string) { overwritePage(t, path, 0, make([]byte, 8192)) }},
		{"zeroed-leaf-pages", zero("leaf", 4)},
		{"zeroed-branch-page", zero("branch", 1)},
	}
	for seed := uint64(1); seed <= 5; seed++ {
		ds = append(ds, damage{fmt.Sprintf("random-pages-seed%d", seed), random(seed)})
	}
	return ds
}

// TestDamagedFileIsAnErrorNeverACrashOrAWrite opens each damaged file for
// reading and for writing, lists it, reads a key and tries a write: each
// either is refused at open or fails with ErrDamaged once the damage is
// met, the process lives on, and the file keeps every byte.
func TestDamagedFileIsAnErrorNeverACrashOrAWrite(t *testing.T) {
	for _, dm := range damages() {
		for _, readOnly := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/readonly=%v", dm.name, readOnly), func(t *testing.T) {
				path := bigStore(t)
				dm.apply(t, path)
				before := fileSum(t, path)
				err := useDamaged(t, path, readOnly)
				if !errors.Is(err, boltstore.ErrDamaged) {
					t.Fatalf("damaged file: %v, want ErrDamaged", err)
				}
				if !strings.Contains(err.Error(), "lake check") {
					t.Errorf("error does not name `lake check`: %v", err)
				}
				if fileSum(t, path) != before {
					t.Fatal("the damaged file was changed")
				}
			})
		}
	}
}

// useDamaged opens path and reads all of it, then tries a write; it
// returns the first error, after checking that a poisoned store keeps
// refusing.
func useDamaged(t *testing.T, path string, readOnly bool) error {
	t.Helper()
	d, err := boltstore.Open(path, &boltstore.Options{ReadOnly: readOnly})
	if err != nil {
		return err
	}
	s := metastore.New(d)
	defer s.Close()
	ctx := context.Background()
	_, err = s.ListAll(ctx, "")
	if err == nil {
		t.Fatal("ListAll of a damaged store succeeded")
	}
	if !errors.Is(err, metastore.ErrUnavailable) {
		t.Errorf("a fault on a damaged page: %v, want ErrUnavailable", err)
	}
	// Poisoned: every call answers the same error, and nothing is written.
	if _, gerr := s.Get(ctx, "tbl/k00000"); !errors.Is(gerr, boltstore.ErrDamaged) {
		t.Errorf("Get after the fault: %v", gerr)
	}
	if !readOnly {
		if perr := s.Put(ctx, "tbl/new", []byte("x")); !errors.Is(perr, boltstore.ErrDamaged) {
			t.Errorf("Put after the fault: %v, want ErrDamaged", perr)
		}
	}
	return err
}

// TestFaultOnAFileTruncatedUnderneath: a file cut short while the store is
// open makes bbolt's map raise SIGBUS; the reading goroutines, many at
// once, get ErrDamaged and the process lives.
func TestFaultOnAFileTruncatedUnderneath(t *testing.T) {
	path := bigStore(t)
	d, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := metastore.New(d)
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Get(ctx, "tbl/k00001"); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 8<<10); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.ListAll(ctx, "")
			errs <- err
			errs <- s.Put(ctx, fmt.Sprintf("tbl/w%d", g), []byte("x"))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, boltstore.ErrDamaged) || !errors.Is(err, metastore.ErrUnavailable) {
			t.Fatalf("after the file was cut short: %v", err)
		}
	}
	if st, _ := os.Stat(path); st.Size() != 8<<10 {
		t.Fatalf("the poisoned store wrote: the file is %d bytes", st.Size())
	}
	if d.Poisoned() == nil {
		t.Fatal("Poisoned() is nil after a fault")
	}
}

// swapFirstKeys swaps the first two keys of leaf page id in place (their
// last bytes), which keeps the page's bounds and breaks its order.
func swapFirstKeys(t *testing.T, path string, id int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	if _, err := f.ReadAt(page, int64(id)*4096); err != nil {
		t.Fatal(err)
	}
	key := func(i int) []byte {
		e := 16 + i*16
		pos := int(binary.NativeEndian.Uint32(page[e+4:]))
		ksize := int(binary.NativeEndian.Uint32(page[e+8:]))
		return page[e+pos : e+pos+ksize]
	}
	a, b := key(0), key(1)
	tmp := bytes.Clone(a)
	copy(a, b)
	copy(b, tmp)
	if _, err := f.WriteAt(page, int64(id)*4096); err != nil {
		t.Fatal(err)
	}
}

// TestOneTornMetaPageIsRecovered: a crash during a commit's meta page write
// leaves that page invalid; bbolt falls back to the other one (the last
// acknowledged commit) and the next commit rewrites the torn page. lake
// does the same instead of refusing the file, and `lake check` says so.
func TestOneTornMetaPageIsRecovered(t *testing.T) {
	for _, page := range []int{0, 1} {
		t.Run(fmt.Sprint("meta-", page), func(t *testing.T) {
			path := bigStore(t)
			overwritePage(t, path, page, make([]byte, 4096))
			rep, err := boltstore.Check(path, 0)
			if err != nil || !rep.Sound() || len(rep.Notes) == 0 || !strings.Contains(rep.Notes[0], fmt.Sprintf("meta page %d", page)) {
				t.Fatalf("check: %+v, %v", rep, err)
			}
			d, err := boltstore.Open(path, &boltstore.Options{})
			if err != nil {
				t.Fatalf("open with one torn meta page: %v", err)
			}
			s := metastore.New(d)
			defer s.Close()
			// bbolt opens the last commit whose meta page is valid: the
			// fixture's, or (zeroing the newest page stands for a crash
			// inside the fixture's commit) the empty store before it.
			items, err := s.ListAll(t.Context(), "tbl/")
			if err != nil || (len(items) != fixtureKeys && len(items) != 0) {
				t.Fatalf("list: %d items, %v; want %d or 0", len(items), err, fixtureKeys)
			}
			// Two commits write both meta pages again.
			for i := range 2 {
				if err := s.Put(t.Context(), fmt.Sprint("tbl/new", i), []byte("x")); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()
			if rep, err := boltstore.Check(path, 0); err != nil || !rep.Sound() || len(rep.Notes) != 0 {
				t.Fatalf("check after two commits: %+v, %v", rep, err)
			}
		})
	}
}

// TestPageTreeCycleRefusedAtOpen: one page id in a branch element changed
// to the branch's own id (a single flipped byte can do it) would send
// bbolt's recursive search into an endless descent, a stack overflow that
// no recover catches. Open finds the cycle first and refuses the file.
func TestPageTreeCycleRefusedAtOpen(t *testing.T) {
	for _, readOnly := range []bool{true, false} {
		path := bigStore(t)
		branch := pagesOf(t, path, "branch")[0]
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		// The first element's page id: header (16) + pos (4) + ksize (4).
		id := binary.NativeEndian.AppendUint64(nil, uint64(branch))
		if _, err := f.WriteAt(id, int64(branch)*4096+16+8); err != nil {
			t.Fatal(err)
		}
		f.Close()
		before := fileSum(t, path)
		_, err = boltstore.Open(path, &boltstore.Options{ReadOnly: readOnly})
		if !errors.Is(err, boltstore.ErrDamaged) || !strings.Contains(err.Error(), "cycle") {
			t.Fatalf("open (read-only %v) of a file with a page-tree cycle: %v", readOnly, err)
		}
		if fileSum(t, path) != before {
			t.Fatal("the file was changed")
		}
		rep, err := boltstore.Check(path, 0)
		if err != nil || rep.Sound() {
			t.Fatalf("check: %+v, %v", rep, err)
		}
	}
}

// TestRepeatedChildEndsTheListing: a branch page that names the same child
// twice (one flipped byte in a page id) is no cycle, so Open accepts the
// file, but a cursor then meets keys it has passed, and a listing that
// pages on by "seek past the last key" went back on every page and grew
// until the process ran out of memory (found by FuzzDamagedStore in CI).
// The listing ends with ErrDamaged at the first key that goes back.
func TestRepeatedChildEndsTheListing(t *testing.T) {
	path := bigStore(t)
	for _, id := range pagesOf(t, path, "branch") {
		bolttest.RepeatChild(t, path, id)
	}
	before := fileSum(t, path)
	done := make(chan error, 1)
	go func() {
		d, err := boltstore.Open(path, &boltstore.Options{ReadOnly: true})
		if err == nil {
			s := metastore.New(d)
			_, err = s.ListAll(context.Background(), "")
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, boltstore.ErrDamaged) || !strings.Contains(err.Error(), "out of order") {
			t.Fatalf("listing a tree that repeats a child: %v, want ErrDamaged (keys out of order)", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("listing a tree that repeats a child did not end within a minute")
	}
	if fileSum(t, path) != before {
		t.Fatal("the file was changed")
	}
	if rep, err := boltstore.Check(path, 0); err != nil || rep.Sound() {
		t.Fatalf("check: %+v, %v", rep, err)
	}
}
