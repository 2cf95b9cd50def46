package syncload

import (
	"context"
	"time"

	"github.com/lakemeta/lake/datastore"
)

// The optional abilities of a driver (datastore's ReadAheader,
// StatsReadAheader, HeadFeeder or WholeFeeder, CursorAdvancer) are what
// make a `lake data sync` cheap; a meter that hid them would measure a
// sync without them. So a meter has them, each forwarded to the driver it
// wraps and counted for the worker: CursorAdvancer always (without it, it
// answers as the datastore does: no cursor moved without a read), the
// others only over a driver that has them all: headFeedMeter over
// DynamoDB's (a HeadFeeder), wholeFeedMeter over S3's (a WholeFeeder).
// Those cannot be had and done without: a driver that says it reads
// ahead is trusted to make the reads that follow free, and a feed reader
// that says it reads floors in one request is asked for them; claimed over
// a driver without them, each would cost requests the datastore alone
// does not send.

var (
	_ datastore.CursorAdvancer   = (*meter)(nil)
	_ datastore.GuardedDropper   = (*meter)(nil)
	_ datastore.CommitPrefetcher = (*meter)(nil)
	_ datastore.ReadAheader      = aheadMeter{}
	_ datastore.StatsReadAheader = aheadMeter{}
	_ datastore.HeadFeeder       = headFeedMeter{}
	_ datastore.KeyFeeder        = headFeedMeter{}
	_ datastore.CommitStatReader = headFeedMeter{}
	_ datastore.WholeFeeder      = wholeFeedMeter{}
)

// aheadMeter is a meter over a driver that reads ahead.
type aheadMeter struct{ *meter }

// headFeedMeter is an aheadMeter over a driver that also feeds from heads
// and reads floors (DynamoDB).
type headFeedMeter struct{ aheadMeter }

// wholeFeedMeter is an aheadMeter over a driver that also feeds from heads
// and answers for their floors itself (S3).
type wholeFeedMeter struct{ aheadMeter }

// aheadDriver is the driver to hand the datastore for m: m itself, or a
// meter with the abilities of the driver it wraps.
func aheadDriver(m *meter) datastore.Driver {
	_, ra := m.Driver.(datastore.ReadAheader)
	_, sra := m.Driver.(datastore.StatsReadAheader)
	_, hf := m.Driver.(datastore.HeadFeeder)
	_, wf := m.Driver.(datastore.WholeFeeder)
	switch {
	case ra && sra && hf:
		return headFeedMeter{aheadMeter{m}}
	case ra && sra && wf:
		return wholeFeedMeter{aheadMeter{m}}
	}
	return m
}

// ReadAhead implements datastore.ReadAheader.
func (m aheadMeter) ReadAhead(ctx context.Context, scopes []string, records []string, statScope string, paths []string) (context.Context, error) {
	ra := m.Driver.(datastore.ReadAheader)
	ctx = withTally(ctx, m.meter)
	t := time.Now()
	out, err := ra.ReadAhead(ctx, scopes, records, statScope, paths)
	m.note("pull", t, 0, 0, "read-ahead")
	return out, err
}

// ReadAheadStats implements datastore.StatsReadAheader.
func (m aheadMeter) ReadAheadStats(ctx context.Context, scopes []string, records []string, stats map[string][]string) (context.Context, error) {
	ra := m.Driver.(datastore.StatsReadAheader)
	ctx = withTally(ctx, m.meter)
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

// ChangesUpTo implements datastore.HeadFeeder.
func (m headFeedMeter) ChangesUpTo(ctx context.Context, partition string, after, upTo uint64, limit int) ([]datastore.Info, uint64, error) {
	hf := m.Driver.(datastore.HeadFeeder)
	ctx = withTally(ctx, m.meter)
	t := time.Now()
	ch, next, err := hf.ChangesUpTo(ctx, partition, after, upTo, limit)
	m.note("pull", t, len(ch), 0, partKey(partition))
	return ch, next, err
}

// ChangesOfKeys implements datastore.KeyFeeder: the driver's (DynamoDB's
// reads the feeds its heads name the paths of in one request); over a
// driver without it, none answered, at no request.
func (m headFeedMeter) ChangesOfKeys(ctx context.Context, heads []datastore.Head, after map[string]uint64, limit int) (map[string]datastore.HeadChanges, error) {
	kf, ok := m.Driver.(datastore.KeyFeeder)
	if !ok {
		return nil, nil
	}
	ctx = withTally(ctx, m.meter)
	t := time.Now()
	out, err := kf.ChangesOfKeys(ctx, heads, after, limit)
	if len(out) > 0 {
		n := 0
		var keys []string
		for p, hc := range out {
			n += len(hc.Changes)
			keys = append(keys, partKey(p))
		}
		m.note("pull", t, n, 0, keys...)
	}
	return out, err
}

// ReadStatsForCommits implements datastore.CommitStatReader: the
// driver's (DynamoDB's stats the paths and reads for their commits in one
// request), counted as a read-ahead; over a driver without it, nothing
// read, at no request.
func (m headFeedMeter) ReadStatsForCommits(ctx context.Context, stats map[string][]string) (stat, commit context.Context, ok bool, err error) {
	r, isReader := m.Driver.(datastore.CommitStatReader)
	if !isReader {
		return ctx, ctx, false, nil
	}
	t := time.Now()
	stat, commit, ok, err = r.ReadStatsForCommits(withTally(ctx, m.meter), stats)
	if ok {
		m.note("pull", t, 0, 0, "read-ahead")
	}
	return stat, commit, ok, err
}

// Floors implements datastore.HeadFeeder.
func (m headFeedMeter) Floors(ctx context.Context, partitions []string) (map[string]uint64, error) {
	hf := m.Driver.(datastore.HeadFeeder)
	ctx = withTally(ctx, m.meter)
	t := time.Now()
	out, err := hf.Floors(ctx, partitions)
	m.note("pull", t, len(out), 0, "floors")
	return out, err
}

// ChangesFromHead implements datastore.WholeFeeder.
func (m wholeFeedMeter) ChangesFromHead(ctx context.Context, h datastore.Head, after uint64, limit int) ([]datastore.Info, uint64, error) {
	wf := m.Driver.(datastore.WholeFeeder)
	ctx = withTally(ctx, m.meter)
	t := time.Now()
	ch, next, err := wf.ChangesFromHead(ctx, h, after, limit)
	m.note("pull", t, len(ch), 0, partKey(h.Partition))
	return ch, next, err
}
