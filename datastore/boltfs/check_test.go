package boltfs_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/internal/boltfile/bolttest"
)

// TestCheckRepair (issue 28): a bolt file damaged by another writer of the
// file (bbolt opened directly, with lake's driver closed) is checked: each
// deleted or garbage record is reported by bucket and key; repair rebuilds
// the feed entry, registry entry, head and change index entry from the
// files, deletes a stale feed entry and moves a garbage record aside, and
// a second check finds nothing; every file reads, lists and pulls again.
func TestCheckRepair(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lake.db")
	open := func() *datastore.Store {
		d, err := boltfs.Open(path, &boltfs.Options{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		return datastore.New(d)
	}
	s := open()
	ctx := t.Context()
	for _, p := range []string{"data/m/1/a", "data/m/1/b", "data/m/2/c"} {
		if _, err := s.Put(ctx, p, strings.NewReader(p), nil); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	bolttest.Update(t, path, func(tx *boltfile.Tx) error {
		feed, heads, reg := tx.Bucket([]byte("datastore.feed")), tx.Bucket([]byte("datastore.heads")), tx.Bucket([]byte("datastore.registry"))
		// data/m/1/b was committed at position 2 of m/1.
		if err := feed.Delete(append([]byte("m/1\x00"), 0, 0, 0, 0, 0, 0, 0, 2)); err != nil {
			return err
		}
		if err := feed.Put(append([]byte("m/1\x00"), 0, 0, 0, 0, 0, 0, 0, 9), []byte("data/m/1/zz")); err != nil {
			return err
		}
		if err := heads.Delete([]byte("m/2")); err != nil {
			return err
		}
		if err := reg.Delete([]byte("m/2")); err != nil {
			return err
		}
		return tx.Bucket([]byte("datastore.files")).Put([]byte("data/m/1/junk"), []byte("garbage"))
	})

	s = open()
	defer s.Close()
	rep, err := s.Check(ctx, datastore.CheckOptions{Chunks: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"datastore.feed/m/1@2", "datastore.feed/\"m/1\\x00", "datastore.heads/m/2", "datastore.registry/m/2", "datastore.files/data/m/1/junk"}
	var lines []string
	for _, p := range rep.Problems {
		lines = append(lines, p.String())
	}
	all := strings.Join(lines, "\n")
	t.Log(all)
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("check did not report %s", w)
		}
	}
	rep, err = s.Check(ctx, datastore.CheckOptions{Repair: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Unrepaired(); n != 0 || len(rep.Problems) == 0 {
		t.Errorf("repair: %d problems, %d left", len(rep.Problems), n)
	}
	if rep, err = s.Check(ctx, datastore.CheckOptions{Chunks: true}); err != nil || len(rep.Problems) != 0 {
		t.Errorf("a check after the repair: %v, %v", rep.Problems, err)
	}
	for _, p := range []string{"data/m/1/a", "data/m/1/b", "data/m/2/c"} {
		if _, body, err := s.Get(ctx, p); err != nil || string(body) != p {
			t.Errorf("get %s: %q, %v", p, body, err)
		}
	}
	if ch, _, err := s.Changes(ctx, "m/1", 0, 10); err != nil || len(ch) != 2 {
		t.Errorf("pull of m/1 after the repair: %v, %v; want a and b", ch, err)
	}
	if parts, err := s.Partitions(ctx); err != nil || len(parts) != 2 {
		t.Errorf("partitions after the repair: %v, %v", parts, err)
	}
	if heads, _, err := s.ChangedPartitions(ctx, ""); err != nil || len(heads) != 2 {
		t.Errorf("changed partitions after the repair: %v, %v", heads, err)
	}
}
