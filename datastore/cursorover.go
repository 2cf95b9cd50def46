package datastore

// CursorAdvancer is the optional ability of a driver that can answer
// ChangedPartitions over the caller's own last commit without a read: when
// the cursor is where this process last read the index (or where an
// earlier such answer moved it from there: a sync's second commit), and
// nothing but that commit moved the index entries of the shards it
// touched since,
// the changed partitions past the cursor, up to the commit and no further
// on those shards (and no further at all on the others), are exactly the
// commit's. A cursor that is not provably there, or a commit the driver
// does not know, answers ok false: read (ChangedPartitions).
//
// The answer is a ChangedPartitions answer of an earlier instant on the
// shards the commit did not touch, so a change another writer made there
// meanwhile is reported by the next read, never lost: the cursor it
// returns is never past what the heads it returns account for.
type CursorAdvancer interface {
	ChangedPartitionsOver(cursor []byte, committed []Info) (heads []Head, next []byte, ok bool)
}

// ChangedPartitionsOver answers ChangedPartitions(cursor) without a read
// when the driver can prove the answer from the caller's own last commit
// (committed, as Commit returned it): see CursorAdvancer. ok false: call
// ChangedPartitions.
func (s *Store) ChangedPartitionsOver(cursor string, committed []Info) ([]Head, string, bool) {
	a, can := s.d.(CursorAdvancer)
	if !can || cursor == "" || len(committed) == 0 || s.open() != nil {
		return nil, "", false
	}
	pos, err := decodeCursor(cursor, s.d.Name(), "\x00feed")
	if err != nil {
		return nil, "", false
	}
	heads, next, ok := a.ChangedPartitionsOver(pos, committed)
	if !ok {
		return nil, "", false
	}
	return heads, encodeCursor(s.d.Name(), "\x00feed", next), true
}
