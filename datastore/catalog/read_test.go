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
	const checkOut = "lake data check --catalog --repair --namespace ns deletes it"
	for _, c := range []struct {
		name string
		info datastore.Info
		skip string // the reason's start, "" for a change
		out  string // the way out it names
	}{
		{"a row", datastore.Info{Path: rowPath("ns", "t/1"), Meta: meta("ns", "t/1")}, "", ""},
		{"a removal", datastore.Info{Path: rowPath("ns", "t/1"), Deleted: true}, "", ""},
		{"no model, a path lake refuses", datastore.Info{Path: "ns/../../x", Meta: meta("ns", "t/1")}, "names no model", "delete it in the backend"},
		{"no model", datastore.Info{Path: "ns/x", Meta: meta("ns", "t/1")}, "names no model", checkOut},
		{"another namespace's partition", datastore.Info{Path: rowPath("other", "t/1"), Meta: meta("other", "t/1")}, `is filed in namespace "ns"'s partition`, "delete it in the backend"},
		{"a removal filed in another namespace's", datastore.Info{Path: rowPath("other", "t/1"), Deleted: true}, `is filed in namespace "ns"'s partition`, "delete it in the backend"},
		{"not a row", datastore.Info{Path: rowPath("ns", "t/1"), Meta: []byte("garbage")}, "is not a catalog row", checkOut},
		{"no metadata", datastore.Info{Path: rowPath("ns", "t/1")}, "is not a catalog row", checkOut},
		{"another model's row", datastore.Info{Path: rowPath("ns", "t/1"), Meta: meta("victim", "t/9")}, "holds the row of victim/t/9", checkOut},
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
			case c.skip != "" && (skip.Entry != c.info.Path || !strings.HasPrefix(skip.Why, c.skip) || !strings.HasSuffix(skip.Why, c.out+")")):
				t.Fatalf("skip = %+v, want %q…", skip, c.skip)
			}
		})
	}
}
