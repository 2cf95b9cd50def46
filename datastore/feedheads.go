package datastore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/lakemeta/lake/metastore"
	"golang.org/x/sync/errgroup"
)

// HeadFeeder is an optional ability of a Driver (DynamoDB): reading a
// partition's feed up to a head the caller has just read, without reading
// the head again, and the floors of several partitions in one request.
// ChangesOfHeads uses it so that a reader of many changed partitions (a
// catalog mirror reading every namespace's rows) pays one read a
// partition and one for all the floors, instead of two a partition.
type HeadFeeder interface {
	// ChangesUpTo is Changes bounded by upTo (a head's Seq the caller
	// read) instead of the head it would read; it does not check the
	// floor (see Floors).
	ChangesUpTo(ctx context.Context, partition string, after, upTo uint64, limit int) (changes []Info, next uint64, err error)
	// Floors returns the floor of each partition named, strongly
	// consistent; a partition without a head (dropped since the caller
	// read it) is left out of the map.
	Floors(ctx context.Context, partitions []string) (map[string]uint64, error)
}

// KeyFeeder is an optional ability of a HeadFeeder (DynamoDB): reading
// the feeds of many partitions at once, in one request, by the keys of
// their last changes that the heads just read name. ChangesOfHeads asks it
// first and reads the partitions it leaves out one by one (ChangesUpTo),
// and reads the floors of those only: an answer of ChangesOfKeys is
// proven whole by what it read.
type KeyFeeder interface {
	// ChangesOfKeys returns, for each partition of heads (as a
	// ChangedPartitions call of the same driver just returned them) it
	// can answer this way, what ChangesUpTo(partition, after[partition],
	// head's Seq, limit) would; the others are left out of the map. It
	// answers only where what it read shows that no change between the
	// position and the head is missing (a purged tombstone, say), so that
	// no floor need be read after it.
	ChangesOfKeys(ctx context.Context, heads []Head, after map[string]uint64, limit int) (map[string]HeadChanges, error)
}

// WholeFeeder is an optional ability of a Driver (S3): reading a
// partition's feed up to a head the caller has just read, without reading
// the head again, and answering for the floor itself. ChangesFromHead is
// Changes(h.Partition, after, limit) except that where it cannot prove its
// read missed no purged change it reads the head as Changes does, and then
// answers as Changes does (ErrHorizon below the floor, ErrInvalidArgument
// for a position past the head). ChangesOfHeads asks such a driver for no
// floors.
type WholeFeeder interface {
	ChangesFromHead(ctx context.Context, h Head, after uint64, limit int) (changes []Info, next uint64, err error)
}

// HeadChanges is one partition's part of what ChangesOfHeads returned.
type HeadChanges struct {
	// Changes and UpTo are what Changes returns from the position asked.
	Changes []Info
	UpTo    uint64
	// Horizon reports that the partition must be read whole: the
	// position asked is below its floor (Changes's ErrHorizon:
	// tombstones may be gone), or its head went away or back while it was
	// read (a partition dropped, a datastore recreated: Changes's
	// metastore.ErrInvalidArgument for a position beyond the head).
	// Changes is then empty.
	Horizon bool
}

// ChangesOfHeads reads the changes of each partition of heads (as a
// ChangedPartitions call just returned them) after the position after
// names for it (0 when absent), at most limit a partition, as Changes
// would: a partition whose head is not past its position is left out.
// Where the driver can (HeadFeeder), each feed is read up to its head's
// Seq without reading the head again, and the floors are read once, after
// every feed: a tombstone purged while a feed was read raised its floor in
// the purge's own write, so the floor read after says whether the feed
// read may have missed it; where the driver proves its reads whole
// instead (WholeFeeder), no floor is read. A head's Seq read a moment before only bounds
// the read: what committed since is past the cursor the same
// ChangedPartitions call returned, and the next call names it. A driver
// that can read many feeds in one request by the keys the heads name
// (KeyFeeder) reads those first, proven whole without their floors. The feeds
// are read at once (at most 8 in flight): a reader of many changed
// partitions waits about one read for them, not one each.
func (s *Store) ChangesOfHeads(ctx context.Context, heads []Head, after map[string]uint64, limit int) (map[string]HeadChanges, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, fmt.Errorf("%w: limit %d is outside 1..%d", metastore.ErrInvalidArgument, limit, MaxListLimit)
	}
	for _, h := range heads {
		if err := ValidatePartition(h.Partition); err != nil {
			return nil, err
		}
	}
	out := map[string]HeadChanges{}
	hf, ok := s.d.(HeadFeeder)
	wf, whole := s.d.(WholeFeeder)
	ok = ok && !whole
	var read []string
	// The partitions' feeds are read at once (feedsParallel): each is its
	// own request, and none needs another's answer; the floors are read
	// after them all, as below.
	var mu sync.Mutex
	set := func(p string, hc HeadChanges, fed bool) {
		mu.Lock()
		defer mu.Unlock()
		out[p] = hc
		if fed {
			read = append(read, p)
		}
	}
	var keyed map[string]HeadChanges
	if kf, can := s.d.(KeyFeeder); ok && can {
		// The partitions it answers need no floor: it proved them whole.
		var err error
		if keyed, err = kf.ChangesOfKeys(ctx, heads, after, limit); err != nil {
			return nil, err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(feedsParallel)
	for _, h := range heads {
		a := after[h.Partition]
		if h.Seq <= a {
			continue
		}
		if (ok || whole) && a < h.Floor {
			set(h.Partition, HeadChanges{Horizon: true}, false)
			continue
		}
		if hc, ok := keyed[h.Partition]; ok {
			set(h.Partition, hc, false)
			continue
		}
		g.Go(func() error {
			var (
				ch      []Info
				upTo    uint64
				err     error
				horizon bool // the partition is to be read whole
			)
			switch {
			case ok:
				ch, upTo, err = hf.ChangesUpTo(gctx, h.Partition, a, h.Seq, limit)
			case whole:
				ch, upTo, err = wf.ChangesFromHead(gctx, h, a, limit)
			default:
				ch, upTo, err = s.d.Changes(gctx, h.Partition, a, limit)
			}
			// Changes (and ChangesFromHead, which answers as it does)
			// also says a position past the head: the partition went
			// away or back since the heads were read.
			horizon = errors.Is(err, ErrHorizon) || (!ok && a > 0 && errors.Is(err, metastore.ErrInvalidArgument))
			switch {
			case horizon:
				set(h.Partition, HeadChanges{Horizon: true}, false)
			case err != nil:
				return err
			default:
				set(h.Partition, HeadChanges{Changes: ch, UpTo: upTo}, ok)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if len(read) == 0 {
		return out, nil
	}
	slices.Sort(read)
	floors, err := hf.Floors(ctx, read)
	if err != nil {
		return nil, err
	}
	for _, p := range read {
		if f, ok := floors[p]; !ok || after[p] < f {
			out[p] = HeadChanges{Horizon: true}
		}
	}
	return out, nil
}

// feedsParallel bounds the feeds ChangesOfHeads reads at once.
const feedsParallel = 8
