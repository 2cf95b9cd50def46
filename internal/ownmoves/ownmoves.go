// Package ownmoves remembers, for a datastore driver, what this process's
// last commits did to a namespace's change index and the cursor it last
// read there, so that ChangedPartitionsOver (datastore.CursorAdvancer) can
// answer from a commit without a read. What a move holds is the driver's
// (DynamoDB: shard counters; S3: a head's ETags).
package ownmoves

import (
	"fmt"
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
	seen  map[string][]byte   // namespace → the cursor last read
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
		l.seen = map[string][]byte{}
	}
	l.seen[ns] = append([]byte(nil), cursor...)
}

// Lookup returns the move of the commit that applied exactly committed in
// namespace ns, when cursor is the one this process last read there.
func (l *Log[M]) Lookup(ns string, cursor []byte, committed []datastore.Info) (M, bool) {
	var zero M
	if len(committed) == 0 {
		return zero, false
	}
	l.mu.Lock()
	seen, read := l.seen[ns]
	e, ok := l.moves[ns+"\x00"+changeKey(committed[0].Partition, committed[0].Pos)]
	l.mu.Unlock()
	if !ok || !read || string(seen) != string(cursor) || len(e.applied) != len(committed) {
		return zero, false
	}
	for _, in := range committed {
		if !e.applied[changeKey(in.Partition, in.Pos)] {
			return zero, false
		}
	}
	return e.m, true
}
