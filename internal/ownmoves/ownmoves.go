// Package ownmoves remembers, for a datastore driver, what this process's
// last commits did to a namespace's change index and the cursor it last
// read there, so that ChangedPartitionsOver (datastore.CursorAdvancer) can
// answer from a commit without a read. What a move holds is the driver's
// (DynamoDB: shard counters; S3: a head's ETags).
//
// The cursors a namespace's answers may start from are the one last read
// and those answers already moved from it (Moved): a sync that commits
// twice under its lock (its catalog fold, then the lifecycle's removal of
// a row) moves a cursor past the first commit and then past the second,
// each move checked by the driver against what that commit found, and the
// next read starts the chain again. A cursor never read nor reached that
// way (an older one) is not answered: its holder reads, and so learns what
// other writers did meanwhile.
package ownmoves

import (
	"fmt"
	"slices"
	"sync"

	"github.com/lakemeta/lake/datastore"
)

// Kept bounds the commits remembered: a sync asks about its last.
const Kept = 32

// Log is the memory of one driver's client, shared by its namespaces.
type Log[M any] struct {
	mu    sync.Mutex
	moves map[string]entry[M] // namespace NUL partition NUL position → its commit's move
	order []string            // keys of moves, oldest first
	seen  map[string][]string // namespace → the cursor last read, then those moved from it
}

type entry[M any] struct {
	m       M
	applied map[string]bool // partition NUL position of each change
}

func changeKey(partition string, pos uint64) string { return partition + "\x00" + fmt.Sprint(pos) }

// Record remembers m as the move of the commit of namespace ns that
// applied out.
func (l *Log[M]) Record(ns string, out []datastore.Info, m M) {
	if len(out) == 0 {
		return
	}
	e := entry[M]{m: m, applied: map[string]bool{}}
	for _, in := range out {
		e.applied[changeKey(in.Partition, in.Pos)] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.moves == nil {
		l.moves = map[string]entry[M]{}
	}
	k := ns + "\x00" + changeKey(out[0].Partition, out[0].Pos)
	l.moves[k] = e
	l.order = append(l.order, k)
	for len(l.order) > Kept {
		delete(l.moves, l.order[0])
		l.order = l.order[1:]
	}
}

// Read remembers the cursor a ChangedPartitions of namespace ns just
// returned.
func (l *Log[M]) Read(ns string, cursor []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string][]string{}
	}
	l.seen[ns] = []string{string(cursor)}
}

// Moved remembers next, the cursor a ChangedPartitionsOver of namespace ns
// returned for from, as one the next may start from too (while from is
// still one: a read since ends the chain). At most Kept are remembered.
func (l *Log[M]) Moved(ns string, from, next []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	chain := l.seen[ns]
	if !slices.Contains(chain, string(from)) || slices.Contains(chain, string(next)) {
		return
	}
	chain = append(chain, string(next))
	if len(chain) > Kept {
		chain = append(chain[:1], chain[len(chain)-Kept+1:]...) // the read, and the latest moves
	}
	l.seen[ns] = chain
}

// Lookup returns the move of the commit that applied exactly committed in
// namespace ns, when cursor is the one this process last read there or one
// moved from it (Moved).
func (l *Log[M]) Lookup(ns string, cursor []byte, committed []datastore.Info) (M, bool) {
	var zero M
	if len(committed) == 0 {
		return zero, false
	}
	l.mu.Lock()
	read := slices.Contains(l.seen[ns], string(cursor))
	e, ok := l.moves[ns+"\x00"+changeKey(committed[0].Partition, committed[0].Pos)]
	l.mu.Unlock()
	if !ok || !read || len(e.applied) != len(committed) {
		return zero, false
	}
	for _, in := range committed {
		if !e.applied[changeKey(in.Partition, in.Pos)] {
			return zero, false
		}
	}
	return e.m, true
}

// Known reports whether cursor is the one this process last read in
// namespace ns, or one moved from it (Moved): where an answer over a
// commit of this process may start (a commit not yet made, whose move its
// writer knows: datastore.CommitFollower).
func (l *Log[M]) Known(ns string, cursor []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.seen[ns], string(cursor))
}
