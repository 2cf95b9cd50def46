package s3fs_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/s3local"
)

// TestDropStartsFromItsCommitsHead (issue 31, drop.go's dropTail): a drop
// of a partition this process has just committed to starts from the head
// that commit wrote (handoff.go): it reads the partition's head once (its
// last pass, which finds it gone), another process's drop twice. The head is a guess the drop's
// listing checks: a head another writer rewrote since (a raw client, the
// same head under another ETag) and a commit another process landed after
// this one's (an object past the head this process knew) are both dropped
// with the rest, nothing of the partition left.
func TestDropStartsFromItsCommitsHead(t *testing.T) {
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	api := &getsAPI{API: c}
	ctx := t.Context()
	prefix := strings.TrimSuffix(testPrefix, "/")
	_, s := openStore(t, api, bucket, prefix)
	_, b := openStore(t, api, bucket, prefix) // another process
	commit := func(st *datastore.Store, model string, n int) {
		t.Helper()
		for i := range n {
			if _, err := st.Put(ctx, fmt.Sprintf("data/m/%s/f%d", model, i), strings.NewReader("x"), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	drop := func(st *datastore.Store, model string) (headReads int) {
		t.Helper()
		api.take()
		ds, err := st.DropPartition(ctx, nil, "m/"+model)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range api.take() {
			if k == testPrefix+"h/m%2F"+model {
				headReads++
			}
		}
		if page, err := b.List(ctx, "data/m/"+model+"/", 100, ""); err != nil || len(page.Files) != 0 {
			t.Fatalf("after the drop of m/%s the model lists %v, %v", model, page.Files, err)
		}
		if ds.Files == 0 {
			t.Fatalf("the drop of m/%s dropped no file: %+v", model, ds)
		}
		return headReads
	}
	commit(s, "1", 3)
	own := drop(s, "1")
	commit(s, "2", 3)
	foreign := drop(b, "2")
	if own != 1 || foreign != 2 {
		t.Fatalf("the committing process's drop read the partition's head %d times, another process's %d; want 1 and 2", own, foreign)
	}
	// The head rewritten by another writer after this process's commit.
	commit(s, "3", 3)
	rawRewrite(t, c, bucket, testPrefix+"h/m%2F3", " ")
	drop(s, "3")
	// Another process's commit after this one's.
	commit(s, "4", 3)
	commit(b, "4", 1)
	if ds, err := s.DropPartition(ctx, nil, "m/4"); err != nil || ds.Files != 3 {
		t.Fatalf("drop of m/4 after another process's commit: %+v, %v; want its 3 files", ds, err)
	}
	if page, err := b.List(ctx, "data/m/4/", 100, ""); err != nil || len(page.Files) != 0 {
		t.Fatalf("after the drop of m/4 the model lists %v, %v", page.Files, err)
	}
}
