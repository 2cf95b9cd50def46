package s3fs_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/metastore"
)

// TestModelsFirstCommitListsBelowOnce (issue 31, clash.go's keysBelowOnce):
// a model's first commit is tried as a commit of one log object, finds it
// needs its directory claim and is made again, staged, from the tail the
// first try read; the staged attempt takes the listing of the index below
// the commit's files that the first try made, one LIST, not two. A file
// that another process puts below one of those files between the two
// attempts (a directory where the commit puts a file, in the same
// partition) takes the position the staged attempt's create needs: that
// create fails, the next attempt reads afresh, and the commit is refused
// as the clash, nothing of it applied.
func TestModelsFirstCommitListsBelowOnce(t *testing.T) {
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	api := &logListsAPI{API: c}
	ctx := t.Context()
	_, s := openStore(t, api, bucket, "lb")
	_, other := openStore(t, c, bucket, "lb") // another process
	commit := func(model string) error {
		var entries []datastore.Entry
		for i := range 3 {
			st, err := s.Upload(ctx, fmt.Sprintf("data/%s/f%d", model, i), strings.NewReader("mine"), nil)
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, datastore.Entry{Put: &st})
		}
		_, err := s.Commit(ctx, nil, entries)
		return err
	}
	api.match = "/f/data/m/1/"
	if err := commit("m/1"); err != nil {
		t.Fatal(err)
	}
	if n := api.takeLists(); n != 1 {
		t.Fatalf("a model's first commit listed the index below its files %d times; want once", n)
	}
	for i := range 3 {
		if _, _, err := other.Get(ctx, fmt.Sprintf("data/m/1/f%d", i)); err != nil {
			t.Fatalf("f%d: %v", i, err)
		}
	}

	api.match = "/f/data/m/2/"
	var once sync.Once
	api.beforePut = func(key string) {
		if strings.Contains(key, "/t/") { // before the staged commit's record
			once.Do(func() {
				if _, err := other.Put(ctx, "data/m/2/f1/below", strings.NewReader("theirs"), nil); err != nil {
					t.Error(err)
				}
			})
		}
	}
	err := commit("m/2")
	if cl, ok := datastore.AsClash(err); !ok || !errors.Is(err, metastore.ErrConflict) || cl.Path != "data/m/2/f1" {
		t.Fatalf("a first commit over a file put below one of its files meanwhile: %v; want the clash of data/m/2/f1", err)
	}
	for _, p := range []string{"data/m/2/f0", "data/m/2/f2"} {
		if _, _, err := other.Get(ctx, p); !errors.Is(err, metastore.ErrNotFound) {
			t.Fatalf("%s after the refused commit: %v; want not found", p, err)
		}
	}
	if _, body, err := other.Get(ctx, "data/m/2/f1/below"); err != nil || string(body) != "theirs" {
		t.Fatalf("the other process's file: %q, %v", body, err)
	}
}
