package dynamostore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lakemeta/lake/metastore/dynamostore"
)

// TestRegistryStaysBounded (issue 9): 10,000 distinct node ids heartbeat
// (in batches of 100, with 2 ms leases) and are then killed, one batch
// after another; the live process's heartbeats prune every entry dead for
// PruneAfterLeases leases, so the registry item never holds more than a
// couple of batches, and at the end only the live nodes remain.
func TestRegistryStaysBounded(t *testing.T) {
	const total, batch = 10000, 100
	lease := 2 * time.Millisecond
	api := client(t)
	d := openDriver(t, api, newTables(t, api, dynamostore.LayoutAuto))
	reg := d.Registry()
	if _, err := reg.Heartbeat(t.Context(), dynamostore.NodeInfo{ID: "survivor", Role: "commit", Lease: time.Hour}); err != nil {
		t.Fatal(err)
	}
	most := 0
	for start := 0; start < total; start += batch {
		var ns []dynamostore.NodeInfo
		for i := start; i < start+batch; i++ {
			ns = append(ns, dynamostore.NodeInfo{ID: fmt.Sprintf("pod-%05d", i), Role: "commit", Lease: lease})
		}
		if _, err := reg.HeartbeatAll(t.Context(), ns); err != nil {
			t.Fatalf("heartbeat of ids %d..: %v", start, err)
		}
		nodes, err := reg.Nodes(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, len(nodes))
		if len(nodes) > 2*batch+1 {
			t.Fatalf("after %d ids the registry holds %d entries: dead ones are not pruned", start+batch, len(nodes))
		}
		// The batch is killed: it never beats again.
		time.Sleep(dynamostore.PruneAfterLeases*lease + time.Millisecond)
	}
	if _, err := reg.Heartbeat(t.Context(), dynamostore.NodeInfo{ID: "survivor", Role: "commit", Lease: time.Hour}); err != nil {
		t.Fatal(err)
	}
	nodes, err := reg.Nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0].ID != "survivor" {
		t.Fatalf("after every pod died the registry holds %d entries, want only the survivor", len(nodes))
	}
	t.Logf("%d ids heartbeated and killed; the registry held at most %d entries", total, most)
}
