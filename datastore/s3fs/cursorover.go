package s3fs

import (
	"encoding/json"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/ownmoves"
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
}

// moveLog remembers the last commits' head moves and the cursor last read,
// per namespace prefix, for ChangedPartitionsOver.
type moveLog = ownmoves.Log[headMove]

// ChangedPartitionsOver implements datastore.CursorAdvancer (see above).
func (d *Driver) ChangedPartitionsOver(cursor []byte, committed []datastore.Info) ([]datastore.Head, []byte, bool) {
	m, ok := d.c.moves.Lookup(d.prefix, cursor, committed)
	if !ok {
		return nil, nil, false
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
