package datastore

import (
	"context"
	"errors"
	"fmt"

	"github.com/lakemeta/lake/metastore"
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
// read may have missed it. A head's Seq read a moment before only bounds
// the read: what committed since is past the cursor the same
// ChangedPartitions call returned, and the next call names it.
func (s *Store) ChangesOfHeads(ctx context.Context, heads []Head, after map[string]uint64, limit int) (map[string]HeadChanges, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, fmt.Errorf("%w: limit %d is outside 1..%d", metastore.ErrInvalidArgument, limit, MaxListLimit)
	}
	out := map[string]HeadChanges{}
	hf, ok := s.d.(HeadFeeder)
	var read []string
	for _, h := range heads {
		if err := ValidatePartition(h.Partition); err != nil {
			return nil, err
		}
		a := after[h.Partition]
		if h.Seq <= a {
			continue
		}
		if !ok {
			ch, upTo, err := s.d.Changes(ctx, h.Partition, a, limit)
			if errors.Is(err, ErrHorizon) || (a > 0 && errors.Is(err, metastore.ErrInvalidArgument)) {
				out[h.Partition] = HeadChanges{Horizon: true}
				continue
			}
			if err != nil {
				return nil, err
			}
			out[h.Partition] = HeadChanges{Changes: ch, UpTo: upTo}
			continue
		}
		if a < h.Floor {
			out[h.Partition] = HeadChanges{Horizon: true}
			continue
		}
		ch, upTo, err := hf.ChangesUpTo(ctx, h.Partition, a, h.Seq, limit)
		if errors.Is(err, ErrHorizon) {
			out[h.Partition] = HeadChanges{Horizon: true}
			continue
		}
		if err != nil {
			return nil, err
		}
		out[h.Partition] = HeadChanges{Changes: ch, UpTo: upTo}
		read = append(read, h.Partition)
	}
	if len(read) == 0 {
		return out, nil
	}
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
