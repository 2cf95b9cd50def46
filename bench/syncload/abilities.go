package syncload

import (
	"context"
	"time"

	"github.com/lakemeta/lake/datastore"
)

// The optional abilities of a driver (datastore's ReadAheader,
// StatsReadAheader, CursorAdvancer, HeadFeeder) are what make a
// `lake data sync` cheap; a meter that hid them would measure a sync
// without them. So the meter has them all, each forwarded to the driver it
// wraps, counted for the worker, and, where that driver lacks one, doing
// what the datastore does without it: no read ahead (the context as it
// is), no cursor moved without a read, a feed read with its head.

var (
	_ datastore.ReadAheader      = (*meter)(nil)
	_ datastore.StatsReadAheader = (*meter)(nil)
	_ datastore.CursorAdvancer   = (*meter)(nil)
	_ datastore.HeadFeeder       = (*meter)(nil)
)

// ReadAhead implements datastore.ReadAheader.
func (m *meter) ReadAhead(ctx context.Context, scopes []string, records []string, statScope string, paths []string) (context.Context, error) {
	ra, ok := m.Driver.(datastore.ReadAheader)
	if !ok {
		return ctx, nil
	}
	ctx = withTally(ctx, m)
	t := time.Now()
	out, err := ra.ReadAhead(ctx, scopes, records, statScope, paths)
	m.note("pull", t, 0, 0, "read-ahead")
	return out, err
}

// ReadAheadStats implements datastore.StatsReadAheader. Without the
// ability the context comes back as it is: the stats made with it read
// for themselves, as the caller's own reads would.
func (m *meter) ReadAheadStats(ctx context.Context, scopes []string, records []string, stats map[string][]string) (context.Context, error) {
	ra, ok := m.Driver.(datastore.StatsReadAheader)
	if !ok {
		return ctx, nil
	}
	ctx = withTally(ctx, m)
	t := time.Now()
	out, err := ra.ReadAheadStats(ctx, scopes, records, stats)
	m.note("pull", t, 0, 0, "read-ahead")
	return out, err
}

// ChangedPartitionsOver implements datastore.CursorAdvancer (no request:
// what the driver's own commits proved).
func (m *meter) ChangedPartitionsOver(cursor []byte, committed []datastore.Info) ([]datastore.Head, []byte, bool) {
	a, ok := m.Driver.(datastore.CursorAdvancer)
	if !ok {
		return nil, nil, false
	}
	return a.ChangedPartitionsOver(cursor, committed)
}

// ChangesUpTo implements datastore.HeadFeeder; without the ability it is
// Changes, which reads the head (a position below the floor is then the
// horizon's error, as Changes gives it).
func (m *meter) ChangesUpTo(ctx context.Context, partition string, after, upTo uint64, limit int) ([]datastore.Info, uint64, error) {
	hf, ok := m.Driver.(datastore.HeadFeeder)
	if !ok {
		return m.Changes(ctx, partition, after, limit)
	}
	ctx = withTally(ctx, m)
	t := time.Now()
	ch, next, err := hf.ChangesUpTo(ctx, partition, after, upTo, limit)
	m.note("pull", t, len(ch), 0, partKey(partition))
	return ch, next, err
}

// Floors implements datastore.HeadFeeder; without the ability, a head
// read a partition.
func (m *meter) Floors(ctx context.Context, partitions []string) (map[string]uint64, error) {
	hf, ok := m.Driver.(datastore.HeadFeeder)
	if !ok {
		out := map[string]uint64{}
		for _, p := range partitions {
			h, err := m.Head(ctx, p)
			if err != nil {
				return nil, err
			}
			out[p] = h.Floor
		}
		return out, nil
	}
	ctx = withTally(ctx, m)
	t := time.Now()
	out, err := hf.Floors(ctx, partitions)
	m.note("pull", t, len(out), 0, "floors")
	return out, err
}
