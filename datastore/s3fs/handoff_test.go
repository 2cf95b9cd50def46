package s3fs_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/metastore"
)

// TestHandoffTailMovedMeanwhile: a commit starts from the tail its
// process's Stat read a moment before (handoff.go), reading nothing more:
// the head holds the fences of the log object it ends at. When another process committed to the partition
// in between, that tail is stale: the commit must still land after the
// other's change, refuse what the other's change makes a clash, and leave
// the index at the newest state. Without the other process, the commit
// reads no head, log listing, log object or index entry again.
func TestHandoffTailMovedMeanwhile(t *testing.T) {
	api, s, c, bucket := readsStore(t)
	ctx := t.Context()
	d2, err := s3fs.Open(ctx, c, s3fs.Options{Bucket: bucket, Prefix: strings.TrimSuffix(testPrefix, "/")})
	if err != nil {
		t.Fatal(err)
	}
	other := datastore.New(d2)
	defer other.Close()
	put := func(s *datastore.Store, p, body string) error {
		_, err := s.Put(ctx, p, strings.NewReader(body), nil)
		return err
	}
	for i := range 3 {
		if err := put(s, fmt.Sprintf("data/m/1/f%d", i), "v0"); err != nil {
			t.Fatal(err)
		}
	}

	// Alone: the Stat's reads are not made again.
	if _, err := s.StatMany(ctx, []string{"data/m/1/f0"}); err != nil {
		t.Fatal(err)
	}
	api.take()
	st, err := s.Upload(ctx, "data/m/1/f0", strings.NewReader("v1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, nil, []datastore.Entry{{Put: &st}}); err != nil {
		t.Fatal(err)
	}
	if reads := api.take(); len(reads) != 0 {
		t.Fatalf("a commit right after its Stat read %v; want nothing (the head it read holds its last log object's fences)", reads)
	}

	// Another process overwrites f1 after the Stat: the commit over the
	// stale tail loses the position, reads again and lands after it.
	if _, err := s.StatMany(ctx, []string{"data/m/1/f1"}); err != nil {
		t.Fatal(err)
	}
	if err := put(other, "data/m/1/f1", "other"); err != nil {
		t.Fatal(err)
	}
	if err := put(s, "data/m/1/f1", "mine"); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*datastore.Store{s, other} {
		_, got, err := st.Get(ctx, "data/m/1/f1")
		if err != nil || string(got) != "mine" {
			t.Fatalf("f1 = %q, %v; want the later commit's", got, err)
		}
	}
	ch, _, err := other.Changes(ctx, "m/1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if last := ch[len(ch)-1]; last.Path != "data/m/1/f1" {
		t.Fatalf("the feed ends with %s; want f1, the last commit's", last.Path)
	}

	// Another process puts a file g after the Stat of g/y: the commit
	// of g/y is refused.
	if _, err := s.StatMany(ctx, []string{"data/m/1/g/y"}); err != nil {
		t.Fatal(err)
	}
	if err := put(other, "data/m/1/g", "file"); err != nil {
		t.Fatal(err)
	}
	err = put(s, "data/m/1/g/y", "below a file")
	if cl, ok := datastore.AsClash(err); !ok || !errors.Is(err, metastore.ErrConflict) || cl.Other != "data/m/1/g" {
		t.Fatalf("a put below a file another process put after the Stat: %v", err)
	}
}
