package metastore

import "bytes"

// Item is one key and its value.
type Item struct {
	Key   string
	Value []byte
}

// Page is one page of a List.
type Page struct {
	// Items are the matching items of this page, in the backend's order.
	// There are at most the requested limit of them, possibly none.
	Items []Item
	// Cursor continues the listing; empty when the listing is complete.
	Cursor string
}

// Expect is the precondition of a conditional write: either the key is
// absent, or it holds exactly a given value. The zero Expect means absent.
type Expect struct {
	present bool
	value   []byte
}

// ExpectAbsent is the precondition "the key does not exist".
func ExpectAbsent() Expect { return Expect{} }

// ExpectValue is the precondition "the key holds exactly v". An empty v means
// the key exists with an empty value, which differs from absent.
func ExpectValue(v []byte) Expect {
	if v == nil {
		v = []byte{}
	}
	return Expect{present: true, value: v}
}

// Absent reports whether e expects the key to be absent.
func (e Expect) Absent() bool { return !e.present }

// Value returns the expected value; nil when e expects absence.
func (e Expect) Value() []byte { return e.value }

// Matches reports whether a current state (exists, value) satisfies e.
func (e Expect) Matches(exists bool, value []byte) bool {
	if !e.present {
		return !exists
	}
	return exists && bytes.Equal(e.value, value)
}

// Guard is the precondition of GuardedMutate: Key holds exactly Value.
type Guard struct {
	Key   string
	Value []byte
}

// Mutation is the target of GuardedMutate: if Key satisfies Expect, it gets
// Value, or is deleted when Delete is set.
type Mutation struct {
	Key    string
	Expect Expect
	Value  []byte
	Delete bool
}
