package s3fs

import (
	"testing"
)

// TestHandoffIsTakenOnce: a Stat's tail offered for a partition is taken
// by the next commit once (the shelf's sweep of old offers is
// internal/offers' test).
func TestHandoffIsTakenOnce(t *testing.T) {
	d := &Driver{c: newClient(nil, ""), prefix: "p/"}
	d.handOff("m/new", &tail{})
	if _, ok := d.c.handoff.Get("p/m/new"); !ok {
		t.Fatal("the offer is not kept")
	}
	if _, err := d.takeHandoff(t.Context(), "m/new"); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.c.handoff.Get("p/m/new"); ok {
		t.Fatal("a taken offer stays")
	}
}

// TestRecentOfferIsRead: the heads' copies that ChangedPartitions offers
// to the feed read (recent.go) answer it at the same watermark only.
func TestRecentOfferIsRead(t *testing.T) {
	d := &Driver{c: newClient(nil, ""), prefix: "p/"}
	run := []*logObject{{First: 1}}
	d.c.recent.Put("p/m/new", recentOffer{applied: 1, objs: run})
	if objs, ok := d.offeredAfter("m/new", 1, 0); !ok || len(objs) != 1 {
		t.Fatalf("the fresh offer: %v, %v", objs, ok)
	}
	if objs, ok := d.offeredAfter("m/new", 2, 0); ok {
		t.Fatalf("an offer at another watermark answered: %v", objs)
	}
}
