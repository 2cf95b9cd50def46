package dstest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// testDropIfDeleted: DropPartitionIfDeleted drops a partition whose guard
// is deleted or absent, and removes nothing of one whose guard is live,
// whatever lies before and after the guard in path order and however
// many writes the drop would take (the DynamoDB driver judges the guard
// by its Query of the partition, in path order, and holds the removals
// read before it); a guard outside the partition is refused.
func testDropIfDeleted(t *testing.T, s *datastore.Store) {
	ctx := t.Context()
	fence := &datastore.Fence{Key: "rec/ns/sync", Token: []byte("t1")}
	if err := s.Records().CASRecord(ctx, fence.Key, metastore.ExpectAbsent(), fence.Token); err != nil {
		t.Fatal(err)
	}
	// model fills partition m/NAME with n files around its definition
	// (paths before and after model.yaml), the definition as def says.
	model := func(name string, n int, def string) {
		t.Helper()
		var entries []datastore.Entry
		for i := range n {
			for _, dir := range []string{"a", "z"} {
				st, err := s.Upload(ctx, fmt.Sprintf("data/m/%s/%s%03d", name, dir, i), strings.NewReader("x"), nil)
				if err != nil {
					t.Fatal(err)
				}
				entries = append(entries, datastore.Entry{Put: &st})
			}
		}
		if _, err := s.Commit(ctx, nil, entries); err != nil {
			t.Fatal(err)
		}
		switch def {
		case "live":
			put(t, s, "data/m/"+name+"/model.yaml", "def")
		case "deleted":
			put(t, s, "data/m/"+name+"/model.yaml", "def")
			if _, err := s.Delete(ctx, "data/m/"+name+"/model.yaml"); err != nil {
				t.Fatal(err)
			}
		}
	}
	files := func(name string) int {
		t.Helper()
		got, err := s.ListAll(ctx, "data/m/"+name+"/")
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	for _, c := range []struct {
		def     string
		n       int
		dropped bool
	}{
		{"live", 3, false},
		{"deleted", 3, true},
		{"absent", 3, true},
		{"live", 110, false}, // more files before the guard than one DynamoDB transaction removes
		{"deleted", 110, true},
	} {
		name := fmt.Sprintf("%s%d", c.def, c.n)
		model(name, c.n, c.def)
		before := files(name)
		st, dropped, err := s.DropPartitionIfDeleted(ctx, fence, "m/"+name, "data/m/"+name+"/model.yaml")
		if err != nil || dropped != c.dropped {
			t.Fatalf("%s: DropPartitionIfDeleted = %+v, %v, %v; want dropped %v", name, st, dropped, err, c.dropped)
		}
		switch after := files(name); {
		case c.dropped && (after != 0 || st.Files != before):
			t.Errorf("%s: dropped, %d files left, %d counted of %d", name, after, st.Files, before)
		case !c.dropped && (after != before || st != (datastore.DropStats{})):
			t.Errorf("%s: not dropped, but %d of its %d files left, %+v counted", name, after, before, st)
		}
	}
	_, _, err := s.DropPartitionIfDeleted(ctx, fence, "m/live3", "data/m/other/model.yaml")
	if !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Fatalf("a guard outside the partition: %v; want ErrInvalidArgument", err)
	}
	stale := &datastore.Fence{Key: fence.Key, Token: []byte("t0")}
	if _, _, err := s.DropPartitionIfDeleted(ctx, stale, "m/live3", "data/m/live3/model.yaml"); err != nil {
		t.Fatalf("a live guard under a stale fence: %v; want nothing removed and no error (nothing written)", err)
	}
	model("stale", 2, "deleted")
	if _, _, err := s.DropPartitionIfDeleted(ctx, stale, "m/stale", "data/m/stale/model.yaml"); !datastore.IsFenceConflict(err) {
		t.Fatalf("a deleted guard under a stale fence: %v; want a fence conflict", err)
	}
}
