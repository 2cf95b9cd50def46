package dynamofs_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
)

// TestReclaimPurgesAPartitionsTombstonesTogether (issue 31, reclaim.go's
// purgeTombstones): the tombstones past the horizon are purged with one
// BatchGetItem of their partitions' heads and one transaction a partition
// (a GetItem, a transaction and a BatchWriteItem each before): 60
// tombstones of two partitions, 3 transactions (two of 45 and 5 more, then
// 10), no GetItem, no BatchWriteItem. Each partition's floor is raised to
// its highest tombstone: a feed read from before it is refused, one from it
// answers nothing. The hostile peer: a path put again after its tombstone
// (what a second client may do at any time) fails its partition's
// transaction: that partition's tombstones are purged one by one, the
// path put again stays live with its content, the others go.
func TestReclaimPurgesAPartitionsTombstonesTogether(t *testing.T) {
	ctx := t.Context()
	_, open := tableOpener(t)
	d := open(0)
	s := datastore.New(d)
	other := datastore.New(open(0)) // another client
	const horizon = time.Second
	o := datastore.ReclaimOptions{Grace: time.Hour, UploadGrace: time.Hour, Horizon: horizon}
	tombstones := func(part string, n int) uint64 {
		t.Helper()
		var last uint64
		for i := range n {
			p := fmt.Sprintf("data/%s/f%02d", part, i)
			if _, err := s.Put(ctx, p, strings.NewReader("x"), nil); err != nil {
				t.Fatal(err)
			}
			info, err := s.Delete(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			last = info.Pos
		}
		return last
	}
	lastA, lastB := tombstones("a/m", 50), tombstones("b/m", 10)
	time.Sleep(horizon + 100*time.Millisecond)
	before := d.Stats()
	st, err := d.Reclaim(ctx, time.Now(), o)
	if err != nil || st.Tombstones != 60 {
		t.Fatalf("reclaim: %+v, %v; want the 60 tombstones purged", st, err)
	}
	c := d.Stats().Sub(before)
	if c.Requests["TransactWriteItems"] != 3 || c.Requests["GetItem"] != 0 || c.Requests["BatchWriteItem"] != 0 {
		t.Fatalf("the purge of 60 tombstones of 2 partitions sent %v; want 3 TransactWriteItems, no GetItem or BatchWriteItem", c.Requests)
	}
	for part, last := range map[string]uint64{"a/m": lastA, "b/m": lastB} {
		h, err := s.Head(ctx, part)
		if err != nil || h.Floor != last {
			t.Fatalf("%s's head after the purge: %+v, %v; want its floor at its last tombstone %d", part, h, err, last)
		}
		if _, _, err := s.Changes(ctx, part, last-1, 10); !errors.Is(err, datastore.ErrHorizon) {
			t.Fatalf("%s's feed from before its floor: %v; want ErrHorizon", part, err)
		}
		if ch, _, err := s.Changes(ctx, part, last, 10); err != nil || len(ch) != 0 {
			t.Fatalf("%s's feed from its floor: %v, %v; want nothing", part, ch, err)
		}
	}
	if again, err := d.Reclaim(ctx, time.Now(), o); err != nil || again.Tombstones != 0 {
		t.Fatalf("a second reclaim: %+v, %v; want nothing left to purge", again, err)
	}

	// Another client puts one path again after its tombstone.
	tombstones("c/m", 5)
	if _, err := other.Put(ctx, "data/c/m/f02", strings.NewReader("again"), nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(horizon + 100*time.Millisecond)
	if st, err := d.Reclaim(ctx, time.Now(), o); err != nil || st.Tombstones != 4 {
		t.Fatalf("reclaim over a path put again: %+v, %v; want the 4 other tombstones purged", st, err)
	}
	if _, body, err := s.Get(ctx, "data/c/m/f02"); err != nil || string(body) != "again" {
		t.Fatalf("the path put again after its tombstone: %q, %v; want it live", body, err)
	}
	files, err := s.ListAll(ctx, "data/c/m/")
	if err != nil || len(files) != 1 {
		t.Fatalf("c/m lists %v, %v; want f02 alone", files, err)
	}
	if again, err := d.Reclaim(ctx, time.Now(), o); err != nil || again.Tombstones != 0 {
		t.Fatalf("a reclaim after it: %+v, %v; want nothing left", again, err)
	}
}
