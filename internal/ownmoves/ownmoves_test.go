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

// TestMovedChains: a cursor an answer moved from the one last read is one
// the next answer may start from (a sync's second commit), and so on down
// the chain; a cursor moved from one that is not in the chain is not
// added; a read starts a new chain, and the old one's cursors are answered
// no more. The read stays answerable however long the chain grows.
func TestMovedChains(t *testing.T) {
	var l Log[string]
	first := []datastore.Info{{Partition: "m/1", Pos: 1}}
	second := []datastore.Info{{Partition: "m/1", Pos: 2}}
	l.Record("ns", first, "first")
	l.Record("ns", second, "second")
	l.Read("ns", []byte("c0"))
	if _, ok := l.Lookup("ns", []byte("c1"), second); ok {
		t.Fatal("answered from a cursor no answer returned")
	}
	l.Moved("ns", []byte("c0"), []byte("c1"))
	if m, ok := l.Lookup("ns", []byte("c1"), second); !ok || m != "second" {
		t.Fatalf("from the cursor the first answer returned: %q, %v", m, ok)
	}
	if _, ok := l.Lookup("ns", []byte("c0"), first); !ok {
		t.Fatal("the cursor read is no longer answered")
	}
	l.Moved("ns", []byte("x"), []byte("c9"))
	if _, ok := l.Lookup("ns", []byte("c9"), second); ok {
		t.Fatal("answered from a cursor moved from one outside the chain")
	}
	l.Moved("other", []byte("c0"), []byte("c2"))
	if _, ok := l.Lookup("ns", []byte("c2"), second); ok {
		t.Fatal("a move in another namespace joined this one's chain")
	}
	for i := range 2 * Kept {
		l.Moved("ns", []byte(fmt.Sprintf("c%d", i+1)), []byte(fmt.Sprintf("c%d", i+2)))
	}
	if _, ok := l.Lookup("ns", []byte("c0"), first); !ok {
		t.Fatalf("the read is not answered after %d moves", 2*Kept)
	}
	if _, ok := l.Lookup("ns", []byte(fmt.Sprintf("c%d", 2*Kept+1)), second); !ok {
		t.Fatal("the latest move is not answered")
	}
	if _, ok := l.Lookup("ns", []byte("c2"), second); ok {
		t.Fatalf("a move older than the last %d is still answered", Kept)
	}
	l.Read("ns", []byte("d0"))
	if _, ok := l.Lookup("ns", []byte("c1"), second); ok {
		t.Fatal("answered from the old chain after a read")
	}
}
