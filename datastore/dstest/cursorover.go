package dstest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
)

// Helpers of the drivers' ChangedPartitionsOver tests
// (datastore.CursorAdvancer), which need two processes of one backend and
// the backend's own ways of interfering, so they live beside each driver.

// CommitFiles commits n small files data/MODEL/f0… to s in one commit and
// returns what it applied.
func CommitFiles(t testing.TB, s *datastore.Store, model string, n int) []datastore.Info {
	t.Helper()
	var paths, contents []string
	for i := range n {
		paths = append(paths, fmt.Sprintf("data/%s/f%d", model, i))
		contents = append(contents, fmt.Sprint(model, i))
	}
	return CommitContents(t, s, paths, contents)
}

// CommitContents commits each of paths with the content at its index, in
// one commit, and returns what it applied.
func CommitContents(t testing.TB, s *datastore.Store, paths, contents []string) []datastore.Info {
	t.Helper()
	var es []datastore.Entry
	for i, p := range paths {
		st, err := s.Upload(t.Context(), p, strings.NewReader(contents[i]), nil)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, datastore.Entry{Put: &st})
	}
	out, err := s.Commit(t.Context(), nil, es)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ReadCursor reads s's changed partitions from the start and returns the
// cursor (so that it is the one this process last read).
func ReadCursor(t testing.TB, s *datastore.Store) string {
	t.Helper()
	_, c, err := s.ChangedPartitions(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// HeadNames renders heads as PARTITION@SEQ, sorted, comma-separated.
func HeadNames(hs []datastore.Head) string {
	var out []string
	for _, h := range hs {
		out = append(out, fmt.Sprintf("%s@%d", h.Partition, h.Seq))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}
