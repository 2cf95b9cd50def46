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
// A staged commit of one log object a partition (whole.go) rolls each of
// its partitions forward the same way, from the tail its part was created
// after: when every one of those first writes replaced the ETag that
// part read, the commit moved each head from one ETag to the next, and the
// cursor is moved for all of them (a head the commit created, absent from
// a cursor read before it, included; a head that holds only claims moved
// in the cursor but not reported, as ChangedPartitions does).
//
// Not answered (ok false, read): a staged commit with several objects in
// one partition, a roll-forward that did not replace the head it read at
// its first write (another writer rolled it, or it failed), a cursor that
// remembers another ETag for one of the heads, and any cursor not the one
// last read or moved from it by such answers (ownmoves).

// headMove is what one commit's roll-forward did to one partition's head.
type headMove struct {
	part     string
	from, to string // the head's ETags
	head     datastore.Head
	// created: the commit created the head (from is the ETag of its
	// create), so a cursor read before it has no entry for it.
	created bool
	// claimsOnly: the head holds only directory claims (claimsonly.go):
	// the cursor keeps its ETag, ChangedPartitions does not report it.
	claimsOnly bool
}

// moveLog remembers the last commits' head moves (one a partition the
// commit wrote: a staged commit moves several) and the cursor last read,
// per namespace prefix, for ChangedPartitionsOver.
type moveLog = ownmoves.Log[[]headMove]

// ChangedPartitionsOver implements datastore.CursorAdvancer (see above).
func (d *Driver) ChangedPartitionsOver(cursor []byte, committed []datastore.Info) ([]datastore.Head, []byte, bool) {
	moves, ok := d.c.moves.Lookup(d.prefix, cursor, committed)
	if !ok {
		return nil, nil, false
	}
	at := map[string]string{}
	if err := json.Unmarshal(cursor, &at); err != nil {
		return nil, nil, false
	}
	for _, m := range moves {
		tag, had := at[m.part]
		if (had && tag != shortTag(m.from)) || (!had && !m.created) {
			return nil, nil, false // the cursor remembers another head
		}
	}
	var heads []datastore.Head
	for _, m := range moves {
		at[m.part] = shortTag(m.to)
		if !m.claimsOnly {
			heads = append(heads, m.head)
		}
	}
	next, _ := json.Marshal(at)
	d.c.moves.Moved(d.prefix, cursor, next) // the next commit's answer may start from it
	return heads, next, true
}

// shortTag is the part of a head's ETag a cursor keeps.
func shortTag(etag string) string {
	if len(etag) > 10 {
		return etag[:10]
	}
	return etag
}

var _ datastore.CursorAdvancer = (*Driver)(nil)
