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
		d.c.handoff.m.Store(fmt.Sprintf("p/m/%d", i), offer{v: &tail{}, at: old})
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
