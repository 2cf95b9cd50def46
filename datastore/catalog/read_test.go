package catalog

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
)

// TestRowChangeSkipsForeignEntries: an entry of namespace ns's catalog
// partition that no lake client writes is left out with its reason (Read
// reports it, and the sync goes on), never mirrored: a path that names no
// model, a row filed in another namespace's partition, a row that does not
// decode, a row that names another model than its path. A row lake wrote
// and a removal are changes.
func TestRowChangeSkipsForeignEntries(t *testing.T) {
	meta := func(ns, model string) []byte {
		b, _ := json.Marshal(Row{Namespace: ns, Model: model, State: Live})
		return b
	}
	for _, c := range []struct {
		name string
		info datastore.Info
		skip string // the reason's start, "" for a change
	}{
		{"a row", datastore.Info{Path: rowPath("ns", "t/1"), Meta: meta("ns", "t/1")}, ""},
		{"a removal", datastore.Info{Path: rowPath("ns", "t/1"), Deleted: true}, ""},
		{"no model", datastore.Info{Path: "ns/../../x", Meta: meta("ns", "t/1")}, "names no model"},
		{"another namespace's partition", datastore.Info{Path: rowPath("other", "t/1"), Meta: meta("other", "t/1")}, `is filed in namespace "ns"'s partition`},
		{"a removal filed in another namespace's", datastore.Info{Path: rowPath("other", "t/1"), Deleted: true}, `is filed in namespace "ns"'s partition`},
		{"not a row", datastore.Info{Path: rowPath("ns", "t/1"), Meta: []byte("garbage")}, "is not a catalog row"},
		{"no metadata", datastore.Info{Path: rowPath("ns", "t/1")}, "is not a catalog row"},
		{"another model's row", datastore.Info{Path: rowPath("ns", "t/1"), Meta: meta("victim", "t/9")}, "holds the row of victim/t/9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch, skip := rowChange("ns", c.info)
			switch {
			case c.skip == "" && skip != nil:
				t.Fatalf("skipped: %v", skip)
			case c.skip == "" && (ch.Namespace != "ns" || ch.Model != "t/1" || ch.Removed != c.info.Deleted):
				t.Fatalf("change = %+v", ch)
			case c.skip != "" && skip == nil:
				t.Fatalf("not skipped: %+v", ch)
			case c.skip != "" && (skip.Entry != c.info.Path || !strings.HasPrefix(skip.Why, c.skip) || !strings.Contains(skip.Why, "delete it in the backend")):
				t.Fatalf("skip = %+v, want %q…", skip, c.skip)
			}
		})
	}
}
