package dynamofs_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
)

// TestClashBatchedReads (issue 31): a commit of many new files reads each
// partition once for its clash checks instead of once per file, and still
// refuses a new file with a live file below it, in one transaction and in
// a commit of several (whole), whichever batch holds the clashing file; a
// first commit to a fresh model sends no Query at all.
func TestClashBatchedReads(t *testing.T) {
	d := newDriver(t)
	s := datastore.New(d)
	ctx := t.Context()
	commit := func(paths ...string) error {
		t.Helper()
		var es []datastore.Entry
		for _, p := range paths {
			st, err := s.Upload(ctx, p, strings.NewReader(p), nil)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, datastore.Entry{Put: &st})
		}
		_, err := s.Commit(ctx, nil, es)
		return err
	}
	many := func(dir string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s/f%03d", dir, i))
		}
		return out
	}
	before := d.Stats()
	if err := commit(many("data/t/fresh", 10)...); err != nil {
		t.Fatal(err)
	}
	if q := d.Stats().Sub(before).Requests["Query"]; q != 0 {
		t.Fatalf("a first commit of 10 files to a fresh model sent %d Queries, want none", q)
	}
	before = d.Stats()
	if err := commit(many("data/t/fresh/more", 10)...); err != nil {
		t.Fatal(err)
	}
	if q := d.Stats().Sub(before).Requests["Query"]; q != 1 {
		t.Fatalf("a commit of 10 new files to a model of 10 sent %d Queries, want 1", q)
	}
	if err := commit("data/t/m/d/below"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{5, 40} { // one transaction; a whole commit of several
		paths := append(many(fmt.Sprintf("data/t/m/n%d", n), n-1), "data/t/m/d")
		err := commit(paths...)
		if _, ok := datastore.AsClash(err); !ok {
			t.Fatalf("a commit of %d new files, one of them a directory of a live file: %v, want a clash", n, err)
		}
		if _, err := s.Stat(ctx, paths[0]); err == nil {
			t.Fatalf("a file of the refused commit of %d is visible", n)
		}
	}
}
