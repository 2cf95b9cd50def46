package ownmoves

import (
	"fmt"
	"testing"

	"github.com/lakemeta/lake/datastore"
)

// TestLookup: a move is found only for the very changes its commit applied,
// in its namespace, with the cursor last read there; the oldest are
// forgotten past Kept.
func TestLookup(t *testing.T) {
	var l Log[string]
	out := []datastore.Info{{Partition: "m/1", Pos: 4}, {Partition: "m/1", Pos: 5}}
	l.Record("ns", out, "move")
	if _, ok := l.Lookup("ns", []byte("c"), out); ok {
		t.Fatal("found with no cursor read")
	}
	l.Read("ns", []byte("c"))
	if m, ok := l.Lookup("ns", []byte("c"), out); !ok || m != "move" {
		t.Fatalf("Lookup = %q, %v", m, ok)
	}
	for name, tc := range map[string]struct {
		ns, cursor string
		committed  []datastore.Info
	}{
		"another cursor":    {"ns", "d", out},
		"another namespace": {"other", "c", out},
		"part of it":        {"ns", "c", out[:1]},
		"another change":    {"ns", "c", []datastore.Info{out[0], {Partition: "m/1", Pos: 6}}},
		"nothing":           {"ns", "c", nil},
	} {
		if _, ok := l.Lookup(tc.ns, []byte(tc.cursor), tc.committed); ok {
			t.Errorf("%s: found", name)
		}
	}
	for i := range Kept {
		l.Record("ns", []datastore.Info{{Partition: "m/2", Pos: uint64(i + 1)}}, fmt.Sprint(i))
	}
	if _, ok := l.Lookup("ns", []byte("c"), out); ok {
		t.Fatalf("still found after %d later commits", Kept)
	}
	if m, ok := l.Lookup("ns", []byte("c"), []datastore.Info{{Partition: "m/2", Pos: Kept}}); !ok || m != fmt.Sprint(Kept-1) {
		t.Fatalf("the last commit: %q, %v", m, ok)
	}
}
