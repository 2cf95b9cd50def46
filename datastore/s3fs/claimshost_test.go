package s3fs_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dstest"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/metastore"
)

// TestNewModelTakesThePullsClaimsHost (issue 31, clash.go's statOthers): a
// model's first commit checks the directories above its files in "data",
// a partition of claims only, and claims it there. Right after this
// process's ChangedPartitions read data's head with nothing after its
// watermark, the commit neither reads that head again nor lists data's
// log. The head is a guess the claim's create checks: a file another
// process puts at one of the new model's directories in data in between
// takes the position the claim's create needs, and the commit is refused
// as the clash, nothing of it applied; another process's claim of its own
// model in between costs the commit a lost race, and both models land.
func TestNewModelTakesThePullsClaimsHost(t *testing.T) {
	ctx := t.Context()
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	api := &getsAPI{API: c}
	_, s := openDatastore(t, api, bucket, "ch")
	_, other := openDatastore(t, c, bucket, "ch") // another process
	commitModels(t, s, "a/m")                     // its claim makes data a claims-only partition
	cur := dstest.ReadCursor(t, s)
	pull := func() {
		t.Helper()
		var err error
		if _, cur, err = s.ChangedPartitions(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	dataReads := func() (n int) {
		for _, k := range api.take() {
			if strings.HasSuffix(k, "/h/data") || strings.HasSuffix(k, "/l/data/") {
				n++
			}
		}
		return n
	}
	first := func(model string) error {
		t.Helper()
		var es []datastore.Entry
		for _, f := range []string{"x", "y"} {
			st, err := s.Upload(ctx, "data/"+model+"/"+f, strings.NewReader(model+f), nil)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, datastore.Entry{Put: &st})
		}
		_, err := s.Commit(ctx, nil, es)
		return err
	}

	commitModels(t, other, "a/x") // moves data's head: the next pull reads it
	pull()
	api.take()
	if err := first("t/n"); err != nil {
		t.Fatal(err)
	}
	if n := dataReads(); n != 0 {
		t.Fatalf("the first commit of t/n read data's head or listed its log %d times right after the pull read the head; want none", n)
	}

	// Another process's file at a directory of the next new model.
	commitModels(t, other, "a/y")
	pull()
	if _, err := other.Put(ctx, "data/u", strings.NewReader("theirs"), nil); err != nil {
		t.Fatal(err)
	}
	api.take()
	err := first("u/n")
	if cl, ok := datastore.AsClash(err); !ok || !errors.Is(err, metastore.ErrConflict) || cl.Other != "data/u" {
		t.Fatalf("a first commit below a file another process put since the pull: %v; want the clash with data/u", err)
	}
	if dataReads() == 0 {
		t.Fatal("the commit found the clash without reading data again: it did not start from the pull's head")
	}
	if _, _, err := other.Get(ctx, "data/u/n/x"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("data/u/n/x after the refused commit: %v; want not found", err)
	}

	// Another process's claim of its own model since the pull.
	commitModels(t, other, "a/z")
	pull()
	commitModels(t, other, "v/o")
	if err := first("v/n"); err != nil {
		t.Fatalf("a first commit after another process's claim since the pull: %v", err)
	}
	for _, p := range []string{"data/v/n/x", "data/v/n/y", "data/v/o/g", "data/t/n/x"} {
		if _, _, err := other.Get(ctx, p); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	// Both claims are in data: a file at either model's directory is refused.
	for _, p := range []string{"data/v/n", "data/v/o"} {
		if _, err := other.Put(ctx, p, strings.NewReader("over a model"), nil); !errors.Is(err, metastore.ErrConflict) {
			t.Fatalf("a put at %s, a model's directory: %v; want a clash", p, err)
		}
	}
}

// TestDropForgetsClaimsFromItsCommitsHost (issue 31, claims.go's
// claimHosts): a drop forgets the model's claim in data from the head of
// data that the model's first commit in this process wrote (its claim
// rolled in), read before the drop's last pass read the model's head
// absent, so neither is read again: no GET of data's head, and the
// model's head read once a pass. Another process's claim in data since
// that commit moves data's head: the forget's conditional replace is
// refused, data and then the model's head are read again, and the claim
// is forgotten all the same, the other's kept. A head this process holds
// that does not name the model (older than its claim, made by another
// process) is not taken for the truth: data is read, the claim forgotten.
func TestDropForgetsClaimsFromItsCommitsHost(t *testing.T) {
	ctx := t.Context()
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	api := &getsAPI{API: c}
	_, s := openDatastore(t, api, bucket, "fh")
	_, other := openDatastore(t, c, bucket, "fh") // another process
	subs := func() []string { t.Helper(); return rawSubs(t, c, bucket, "fh/h/data") }
	gets := func(seen []string, key string) (n int) {
		for _, k := range seen {
			if k == "fh/h/"+key {
				n++
			}
		}
		return n
	}
	commitModels(t, s, "a/keep", "m/1")
	api.take()
	if _, err := s.DropPartition(ctx, nil, "m/1"); err != nil {
		t.Fatal(err)
	}
	seen := api.take()
	if got := gets(seen, "data"); got != 0 {
		t.Fatalf("the drop read data's head %d times; want none, its commit wrote it", got)
	}
	if got := gets(seen, "m%2F1"); got != 2 {
		t.Fatalf("the drop read the model's head %d times; want twice, once a pass", got)
	}
	if got := subs(); !slices.Equal(got, []string{"a/keep"}) {
		t.Fatalf("data's Subs after the drop = %v; want a/keep", got)
	}

	commitModels(t, s, "m/2")
	commitModels(t, other, "o/1") // moves data's head: the head s knows is stale
	api.take()
	if _, err := s.DropPartition(ctx, nil, "m/2"); err != nil {
		t.Fatal(err)
	}
	if got := gets(api.take(), "data"); got != 1 {
		t.Fatalf("the drop over a head of data another process moved read it %d times; want once, after its replace was refused", got)
	}
	if got := subs(); !slices.Equal(got, []string{"a/keep", "o/1"}) {
		t.Fatalf("data's Subs after the drop = %v; want a/keep and o/1", got)
	}

	// A model another process made, whose claim the head this process
	// holds is older than: that head does not name it, and data is read.
	commitModels(t, s, "m/3") // this process's head of data: a/keep, m/3, o/1
	commitModels(t, other, "x/1")
	if _, err := s.DropPartition(ctx, nil, "x/1"); err != nil {
		t.Fatal(err)
	}
	if got := subs(); !slices.Equal(got, []string{"a/keep", "m/3", "o/1"}) {
		t.Fatalf("data's Subs after the drop of another process's model = %v; want a/keep, m/3 and o/1", got)
	}
}
