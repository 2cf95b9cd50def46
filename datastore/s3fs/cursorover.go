package s3fs

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/lakemeta/lake/datastore"
)

// ChangedPartitionsOver (datastore.CursorAdvancer): S3's cursor is the
// heads' ETags (ChangedPartitions). A commit of one log object rolls its
// partition's head forward itself, with a write conditioned on the ETag
// it read (If-Match): when that first write succeeds, the head went from
// that ETag to the one the write returned, and nothing else wrote it in
// between. So when a cursor is what this process last read
// (ChangedPartitions) and remembers that very ETag for the partition, the
// cursor moved to the new ETag names everything the partition's head
// holds: the commit, and any commit of another writer that the commit's
// roll-forward rolled with it (its changes lie at or below the head
// returned, so a reader of the feed from its own position reads them).
// Every other partition stays as the cursor has it, and the next read
// reports what changed there.
//
// Not answered (ok false, read): a staged commit, a roll-forward that did
// not replace the head it read at its first write (another writer rolled
// it, or it failed), and any cursor not the one last read.

// headMove is what one commit's roll-forward did to its partition's head.
type headMove struct {
	part     string
	from, to string // the head's ETags
	head     datastore.Head
	applied  map[string]bool // partition NUL position of each change
}

// movesKept bounds the commits remembered (a sync asks about its last).
const movesKept = 32

// moveLog remembers this process's last commits' head moves and the
// cursor last read, per namespace prefix.
type moveLog struct {
	mu    sync.Mutex
	moves map[string]*headMove
	order []string
	seen  map[string][]byte
}

func moveKey(prefix, partition string, pos uint64) string {
	return prefix + "\x00" + partition + "\x00" + fmt.Sprint(pos)
}

// record remembers m as the move of the commit that applied out.
func (l *moveLog) record(prefix string, out []datastore.Info, m headMove) {
	if len(out) == 0 {
		return
	}
	m.applied = map[string]bool{}
	for _, in := range out {
		m.applied[in.Partition+"\x00"+fmt.Sprint(in.Pos)] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.moves == nil {
		l.moves = map[string]*headMove{}
	}
	k := moveKey(prefix, out[0].Partition, out[0].Pos)
	l.moves[k] = &m
	l.order = append(l.order, k)
	for len(l.order) > movesKept {
		delete(l.moves, l.order[0])
		l.order = l.order[1:]
	}
}

// read remembers the cursor a ChangedPartitions of prefix just returned.
func (l *moveLog) read(prefix string, next []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string][]byte{}
	}
	l.seen[prefix] = append([]byte(nil), next...)
}

// ChangedPartitionsOver implements datastore.CursorAdvancer (see above).
func (d *Driver) ChangedPartitionsOver(cursor []byte, committed []datastore.Info) ([]datastore.Head, []byte, bool) {
	if len(committed) == 0 {
		return nil, nil, false
	}
	d.c.moves.mu.Lock()
	seen := d.c.moves.seen[d.prefix]
	m := d.c.moves.moves[moveKey(d.prefix, committed[0].Partition, committed[0].Pos)]
	d.c.moves.mu.Unlock()
	if m == nil || string(seen) != string(cursor) || len(m.applied) != len(committed) {
		return nil, nil, false
	}
	for _, in := range committed {
		if !m.applied[in.Partition+"\x00"+fmt.Sprint(in.Pos)] {
			return nil, nil, false
		}
	}
	at := map[string]string{}
	if err := json.Unmarshal(cursor, &at); err != nil || at[m.part] != shortTag(m.from) {
		return nil, nil, false // the cursor remembers another head
	}
	at[m.part] = shortTag(m.to)
	next, _ := json.Marshal(at)
	return []datastore.Head{m.head}, next, true
}

// shortTag is the part of a head's ETag a cursor keeps.
func shortTag(etag string) string {
	if len(etag) > 10 {
		return etag[:10]
	}
	return etag
}

var _ datastore.CursorAdvancer = (*Driver)(nil)
