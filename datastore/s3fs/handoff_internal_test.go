package s3fs

import (
	"fmt"
	"testing"
	"time"
)

// TestHandoffOffersDoNotPileUp: every Stat offers its tails, and only a
// commit takes one, so a process that reads many partitions (a node
// serving a fleet) would keep a tail for each it ever read. Offers too
// old to be taken are dropped by a later offer, at most once every
// handoffAge; a fresh offer is kept.
func TestHandoffOffersDoNotPileUp(t *testing.T) {
	d := &Driver{c: newClient(nil, ""), prefix: "p/"}
	old := time.Now().Add(-2 * handoffAge)
	for i := range 1000 {
		d.c.handoff.m.Store(fmt.Sprintf("p/m/%d", i), &offer{v: &tail{}, at: old})
	}
	d.handOff("m/new", &tail{})
	d.handOff("m/newer", &tail{}) // within handoffAge of the sweep: no second sweep needed
	n := 0
	d.c.handoff.m.Range(func(k, _ any) bool {
		n++
		if k != "p/m/new" && k != "p/m/newer" {
			t.Errorf("an offer too old to be taken is kept: %v", k)
		}
		return true
	})
	if n != 2 {
		t.Fatalf("%d offers kept; want the 2 fresh ones", n)
	}
	if _, err := d.takeHandoff(t.Context(), "m/new"); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.c.handoff.m.Load("p/m/new"); ok {
		t.Fatal("a taken offer stays")
	}
}

// TestRecentOffersDoNotPileUp: the same for the heads' copies that
// ChangedPartitions offers to the feed read (recent.go), whose values hold
// a slice (a sweep comparing them by value would panic).
func TestRecentOffersDoNotPileUp(t *testing.T) {
	d := &Driver{c: newClient(nil, ""), prefix: "p/"}
	old := time.Now().Add(-2 * recentAge)
	run := []*logObject{{First: 1}}
	for i := range 100 {
		d.c.recent.m.Store(fmt.Sprintf("p/m/%d", i), &offer{v: recentOffer{applied: 1, objs: run}, at: old})
	}
	d.c.recent.put("p/m/new", recentOffer{applied: 1, objs: run})
	n := 0
	d.c.recent.m.Range(func(k, _ any) bool {
		n++
		return true
	})
	if n != 1 {
		t.Fatalf("%d offers kept; want the fresh one", n)
	}
	if objs, ok := d.offeredAfter("m/new", 1, 0); !ok || len(objs) != 1 {
		t.Fatalf("the fresh offer: %v, %v", objs, ok)
	}
}
