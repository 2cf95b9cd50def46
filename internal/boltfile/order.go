package boltfile

import "bytes"

// A sound bbolt tree yields its keys in strictly increasing order. A damaged
// one need not: a branch page that names the same child twice (one flipped
// byte in a page id) makes a cursor visit that child's keys twice, and
// Seek(k) may then land before k. Within one transaction that is a finite
// detour, but a listing that pages by "seek past the last key returned"
// can be sent back to an earlier key on every page and never end, growing
// its result until the process runs out of memory. Ascending catches it at
// the first key that does not move forward.

// Ascending checks that the keys of a cursor walk move strictly forward from
// a starting position. Its zero value accepts any first key.
type Ascending struct {
	last []byte
	set  bool
}

// After returns an Ascending whose first key must lie past after (nil: any
// first key).
func After(after []byte) Ascending {
	return Ascending{last: after, set: after != nil}
}

// Next records k and reports whether it lies past the previous key (or the
// starting position). A false answer means the file is damaged: no sound
// tree yields it, so the caller poisons the file rather than going on.
// k may be memory of the map: it is kept only until the next call, which
// is inside the same transaction.
func (a *Ascending) Next(k []byte) bool {
	if a.set && bytes.Compare(k, a.last) <= 0 {
		return false
	}
	a.last, a.set = k, true
	return true
}

// Last returns the last key accepted (or the starting position), to say in
// an error where the walk went back.
func (a *Ascending) Last() []byte { return a.last }
