package dynamofs

import (
	"encoding/binary"
	"strings"
	"sync"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/ownmoves"
)

// ChangedPartitionsOver (datastore.CursorAdvancer): a sync's catalog fold
// used to read ChangedPartitions right after the sync's own commit only to
// find that commit (a TransactGetItems of the counters and a Query of the
// index: two of one changed file's nine requests). The commit knows what
// it did to the index: each shard counter it moved, from the value it read
// in its snapshot (snapshot.go) to the value it wrote, under a CAS on that
// value, and the head of each partition it changed. So when a cursor is
// exactly the counters this process last read (ChangedPartitions or the
// read-ahead serving it), and the commit found each of its shards'
// counters at the cursor's value, the index entries past the cursor on
// those shards, up to the commit's values, are the commit's own heads
// and nothing else (a counter moves only by a CAS, each move is one head),
// and on the other shards the cursor stays where it is. Another writer's
// change on another shard, or after the commit on its own, is then
// reported by the next read, which a fold makes whenever its cursor is not
// at the counters the process last read.
//
// A staged commit's index moves come at its roll-forward, in one
// transaction of heads and counters conditioned on what it read
// (bumpIndexes): its writer's own roll-forward remembers that move too.
//
// Not answered (ok false, read): a staged commit whose partitions' index
// entries moved one at a time (bumpIndex), a head marked by another staged
// commit (its decided head is below that commit's positions), a commit
// this process did not make or no longer remembers, and any cursor not at
// the counters last read or moved from them by such answers (ownmoves: a
// sync's second commit, the lifecycle's fold after the first fold, moves
// the cursor the first answer returned).

// indexMove is what one commit did to its namespace's index.
type indexMove struct {
	before, after map[string]uint64 // shard → counter read, written
	heads         []datastore.Head  // the commit's partitions at its positions
}

// moveLog remembers the last commits' index moves and the counters last
// read, per namespace prefix (ownmoves), and the moves of staged commits
// until their writers take them.
type moveLog struct {
	ownmoves.Log[*indexMove]
	mu     sync.Mutex
	staged map[string][]*indexMove // staged commit id → its staging batches' and roll-forward's moves, in order
}

// newIndexMove returns what a commit over the state read (lookup) does to
// the index: the shards' counters from what it read to counter, and the
// heads of the partitions it changes (seq: their new seqs); nil if one of
// those heads is marked by a staged commit.
func newIndexMove(d *Driver, parts []string, seq map[string]uint64, counter map[string]uint64, lookup func(item) item, tx string) *indexMove {
	m := &indexMove{before: map[string]uint64{}, after: map[string]uint64{}}
	for sh, n := range counter {
		m.before[sh], m.after[sh] = getN(lookup(d.counterKey(sh)), "n"), n
	}
	for _, p := range parts {
		newSeq, changed := seq[p]
		if !changed {
			continue
		}
		h := lookup(d.headKey(p))
		for a := range h {
			if strings.HasPrefix(a, headMark("")) && (tx == "" || a != headMark(tx)) {
				return nil
			}
		}
		m.heads = append(m.heads, datastore.Head{Partition: p, Seq: newSeq, Floor: getN(h, "floor")})
	}
	return m
}

// stagedIndexMove is the move of the index moves of staged commit id over
// the state read (lookup): each of parts' heads to its next position of
// its shard (next: the counters written); nil if a head is marked by
// another staged commit.
func stagedIndexMove(d *Driver, parts []string, id string, next map[string]uint64, lookup func(item) item) *indexMove {
	seq := map[string]uint64{}
	for _, p := range parts {
		h := lookup(d.headKey(p))
		if h == nil {
			return nil
		}
		seq[p] = getN(h, "seq") // the roll-forward moves the head, not its seq
	}
	return newIndexMove(d, parts, seq, next, lookup, id)
}

// stage appends m, the index move of one staging transaction or of the
// roll-forward of staged commit id, for its writer (takeStaged); a nil m
// (a move that cannot be answered) spoils the commit's.
func (l *moveLog) stage(id string, m *indexMove) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.staged == nil || (len(l.staged) >= ownmoves.Kept && l.staged[id] == nil) {
		// Moves of commits this process settled for another writer
		// are never taken: keep few.
		l.staged = map[string][]*indexMove{}
	}
	l.staged[id] = append(l.staged[id], m)
}

// stagedState returns, for staged commit id, the state its staging
// transactions left the index in, as this writer wrote it: each of parts'
// head (its seq, the last position a batch gave it, and its floor as
// read) and each of their shards' counter; ok is false unless every batch's
// move is known (none is nil: no head was marked by another staged
// commit) and names every part. It is a prediction for bumpIndexes' CAS,
// which any other commit since falsifies.
func (l *moveLog) stagedState(id string, parts []string) (heads map[string]datastore.Head, counters map[string]uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ms := l.staged[id]
	if len(ms) == 0 {
		return nil, nil, false
	}
	heads, counters = map[string]datastore.Head{}, map[string]uint64{}
	for _, m := range ms {
		if m == nil {
			return nil, nil, false
		}
		for _, h := range m.heads {
			heads[h.Partition] = h
		}
		for sh, n := range m.after {
			counters[sh] = n
		}
	}
	for _, p := range parts {
		if _, ok := heads[p]; !ok {
			return nil, nil, false
		}
		if _, ok := counters[shard(p)]; !ok {
			return nil, nil, false
		}
	}
	return heads, counters, true
}

// takeStaged returns and forgets the index move of staged commit id, its
// staging transactions' and its roll-forward's (the last) chained: nil
// unless each shard's counter went from one of them to the next with no
// other move in between.
func (l *moveLog) takeStaged(id string) *indexMove {
	l.mu.Lock()
	ms := l.staged[id]
	delete(l.staged, id)
	l.mu.Unlock()
	if len(ms) == 0 {
		return nil
	}
	out := &indexMove{before: map[string]uint64{}, after: map[string]uint64{}}
	for _, m := range ms {
		if m == nil {
			return nil
		}
		for sh, b := range m.before {
			if a, moved := out.after[sh]; moved && a != b {
				return nil // another commit moved the shard in between
			}
			if _, moved := out.before[sh]; !moved {
				out.before[sh] = b
			}
			out.after[sh] = m.after[sh]
		}
	}
	out.heads = ms[len(ms)-1].heads // the roll-forward's: the decided heads
	return out
}

// ChangedPartitionsOver implements datastore.CursorAdvancer (see above).
func (d *Driver) ChangedPartitionsOver(cursor []byte, committed []datastore.Info) ([]datastore.Head, []byte, bool) {
	m, ok := d.moves.Lookup(d.pfx, cursor, committed)
	if !ok || m == nil {
		return nil, nil, false
	}
	next, ok := over(cursor, m)
	if !ok {
		return nil, nil, false
	}
	d.moves.Moved(d.pfx, cursor, next) // the next commit's answer may start from it
	return append([]datastore.Head(nil), m.heads...), next, true
}

// overMove is ChangedPartitionsOver for a commit not yet made whose move is
// m (datastore.CommitFollower: what the commit will do to the index, as
// its transaction's conditions will hold it): the cursor must be one this
// process read (or moved from one), as for a commit made; the move past it
// is remembered (Moved) only once the commit applied (moved).
func (d *Driver) overMove(cursor []byte, m *indexMove) ([]datastore.Head, []byte, bool) {
	if m == nil || !d.moves.Known(d.pfx, cursor) {
		return nil, nil, false
	}
	next, ok := over(cursor, m)
	if !ok {
		return nil, nil, false
	}
	return append([]datastore.Head(nil), m.heads...), next, true
}

// over returns cursor moved by m: each shard m moved from the cursor's
// value to m's; ok false if m found a shard elsewhere (another commit
// moved it first) or the cursor is not one of d's.
func over(cursor []byte, m *indexMove) ([]byte, bool) {
	if len(cursor) != 8*Shards {
		return nil, false
	}
	next := append([]byte(nil), cursor...)
	for i, sh := range shardNames() {
		before, moved := m.before[sh]
		if !moved {
			continue
		}
		if binary.BigEndian.Uint64(cursor[8*i:]) != before {
			return nil, false // another commit moved the shard first
		}
		binary.BigEndian.PutUint64(next[8*i:], m.after[sh])
	}
	return next, true
}

var _ datastore.CursorAdvancer = (*Driver)(nil)
