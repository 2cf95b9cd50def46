package treesync_test

import (
	"testing"

	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/treesync"
)

// TestCatalogMirrorFromKnownNamespaces (DynamoDB, issue 31): a sync names
// the namespaces its catalog cursor knows to its read-ahead, so that a
// change another namespace's fold made is found from those namespaces'
// heads, read with the catalog's counters, instead of a Query of the
// catalog's index; the row it brings is the one that fold wrote. A
// namespace the cursor does not know yet is found by the Query, as before.
func TestCatalogMirrorFromKnownNamespaces(t *testing.T) {
	s := dynamoStore(t)
	d := s.Driver().(*dynamofs.Driver)
	a := newTree(t, s, &treesync.Options{Namespace: "alpha"})
	b := newTree(t, s, &treesync.Options{Namespace: "beta"})
	write(t, a, "data/m/1/model.yaml", "type: m\n")
	sync(t, a, treesync.Scope{})
	write(t, b, "data/m/2/model.yaml", "type: m\n")
	sync(t, b, treesync.Scope{})

	// alpha's cursor does not know beta yet: its shard is queried.
	before := d.Stats()
	if rep := sync(t, a, treesync.Scope{}); rep.CatalogRead != 1 {
		t.Fatalf("alpha read %d catalog rows, want beta's 1", rep.CatalogRead)
	}
	if known := d.Stats().Sub(before).ShardsKnown; known != 0 {
		t.Errorf("a namespace alpha did not know was found from known heads (%d shards)", known)
	}

	// Now it does: beta's next fold is found from beta's head.
	write(t, b, "data/m/2/out/1/raw", "beta's data")
	sync(t, b, treesync.Scope{})
	before = d.Stats()
	if rep := sync(t, a, treesync.Scope{}); rep.CatalogRead != 1 {
		t.Fatalf("alpha read %d catalog rows, want beta's changed row", rep.CatalogRead)
	}
	if known := d.Stats().Sub(before).ShardsKnown; known != 1 {
		t.Errorf("beta's fold was found from known heads in %d shards, want 1 (no Query of the catalog's index)", known)
	}
	mirror, err := a.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	if r := mirror["beta/m/2"]; r.Files != 2 {
		t.Errorf("alpha's mirror of beta/m/2 = %+v, want the row with beta's 2 files", r)
	}
}
