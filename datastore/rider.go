package datastore

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// A commit carried by another write (issue 31). A sync whose lifecycle
// drops a model removes the model's partition (its last transaction
// deletes the head) and then the model's catalog row (a commit in the
// catalog's namespace): on DynamoDB two transactions of one table, one
// after the other, under the same fence. The row's removal can be carried
// by the drop's last transaction instead: one request fewer in every sync
// that drops a model, and the row goes with the partition, atomically.
//
// A CommitRider is such a commit, prepared by the store it commits in and
// offered to another operation through its context (WithCommitRider). A
// driver that can (DynamoDB, the drop of a namespace of the same table)
// builds the rider's items as its own Commit would, with the same
// conditions, and sends them in its own transaction (S3, which has no
// transaction of two partitions, commits the rider right after the drop,
// fenced by the drop's check: s3fs/follow.go); if the transaction
// fails on one of the rider's conditions the driver sends its own items
// alone, as without the rider. The caller asks Carried afterwards and
// commits the rider itself when it was not carried. Nothing is ever
// applied twice: a carried rider's commit applied with the transaction,
// and one not carried applied nothing (on S3, one whose object landed but
// whose head write failed is not acknowledged and not carried: the
// caller's own commit of the same entries rolls it forward first, and
// applies them again over it, to the same state).

// CommitRider is a commit prepared by Store.CommitRider (deletes) or
// Store.FollowingCommit (a commit following another), to be carried by
// another operation's write where the driver can.
type CommitRider struct {
	// Driver is the rider's store's driver, Fence its fence (the carrying
	// operation's own, or the rider is not carried) and Deletes its
	// paths, Now the time of its changes.
	Driver  Driver
	Fence   *Fence
	Deletes []string
	Now     time.Time
	// Record, if not nil, is a record write the rider's commit carries
	// too (as WithRecordWrite's), written exactly when it is where the
	// carrying write takes it in the same request (DynamoDB's
	// transaction); a driver that needs a request of its own for it (S3)
	// writes it after the commit, or leaves it when it is Optional.
	Record *RecordWrite

	entries []Entry // FollowingCommit's; else Deletes
	mu      sync.Mutex
	carried bool
	applied []Info
}

// CommitRider returns deletes as a commit of s that another operation of
// its datastore may carry, fenced by fence (which must be the carrying
// operation's), or nil when s's Commit would do more than a driver can
// carry: a layout not yet proved or recorded (its check or record),
// a namespace this process has not registered, a path Commit refuses.
func (s *Store) CommitRider(fence *Fence, deletes []string) *CommitRider {
	r := &CommitRider{Deletes: deletes}
	if !s.canCarry(fence, r.Entries()) || s.root.layoutUnverified.Load() || !s.root.layoutRecorded.Load() {
		return nil
	}
	r.Driver, r.Fence, r.Now = s.d, fence, s.now()
	return r
}

// canCarry reports whether entries, fenced by fence, can be a commit of s
// that another operation's write carries: s open, a valid fence, entries
// Commit would take, and s's namespace needing no registration.
func (s *Store) canCarry(fence *Fence, entries []Entry) bool {
	return s.open() == nil && fence != nil && len(entries) > 0 && s.registeredHere() &&
		metastore.ValidateKey(fence.Key) == nil && checkEntries(entries) == nil
}

// Entries returns the rider's commit entries.
func (r *CommitRider) Entries() []Entry {
	if r.entries != nil {
		return r.entries
	}
	out := make([]Entry, len(r.Deletes))
	for i, p := range r.Deletes {
		out[i] = Entry{Delete: p}
	}
	return out
}

// RidesWith is for drivers: whether r may be carried by an operation
// fenced by fence. It must be a rider not carried yet, under that very
// fence (the carrying operation's check is its check), and whose record
// write, if any, is neither the fence's record nor the layout's (which
// the carrying write checks). Whether the carrying driver can take r's
// commit (its kind, its store) is the driver's to say.
func (r *CommitRider) RidesWith(fence *Fence) bool {
	if r == nil || fence == nil || r.Fence == nil || r.Fence.Key != fence.Key || !bytes.Equal(r.Fence.Token, fence.Token) {
		return false
	}
	if _, done := r.Carried(); done {
		return false
	}
	return r.Record == nil || (r.Record.Key != fence.Key && r.Record.Key != LayoutKey)
}

// MarkCarried is for drivers: the rider's commit applied with the
// carrying write, and applied is what it applied (as Commit returns it).
func (r *CommitRider) MarkCarried(applied []Info) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.carried, r.applied = true, applied
}

// Carried reports whether the rider was carried, and what its commit
// applied then.
func (r *CommitRider) Carried() ([]Info, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied, r.carried
}

type riderKey struct{}

// WithCommitRider returns a context whose next carrying write may carry r
// (a drop's last transaction, on DynamoDB). Pass it to that one operation.
func WithCommitRider(ctx context.Context, r *CommitRider) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, riderKey{}, r)
}

// CommitRiderOf returns the rider ctx offers (WithCommitRider), or nil.
func CommitRiderOf(ctx context.Context) *CommitRider {
	r, _ := ctx.Value(riderKey{}).(*CommitRider)
	return r
}

// DriverUnwrapper is implemented by a Driver that wraps another and
// forwards to it (a load harness's meter): Unwrap returns the wrapped one,
// so that a driver can recognise one of its own kind behind it (a
// CommitRider's).
type DriverUnwrapper interface {
	Unwrap() Driver
}

// UnwrapDriver returns the driver d wraps, through every DriverUnwrapper,
// or d.
func UnwrapDriver(d Driver) Driver {
	for {
		u, ok := d.(DriverUnwrapper)
		if !ok {
			return d
		}
		d = u.Unwrap()
	}
}

// A commit following another (issue 31). A sync's catalog fold commits the
// rows of the models the sync's own commit changed, right after it, in a
// transaction of its own on DynamoDB, though every row is computed from
// what that commit applied (catalog.PlanFold, when nothing else needs a
// read). A CommitFollower offered to the data commit (WithCommitFollower)
// is asked, by a driver that can, for that commit once the driver knows
// what its own will apply (the positions are the store's): the rider it
// returns is sent in the same transaction, and its own refusal (a row or
// the cursor's record changed since it was read) sends the data commit
// again alone. The caller asks Carried afterwards, and folds as before
// when it was not.

// CommitFollower plans a commit of another store of the datastore to
// carry with the commit its context is given to.
type CommitFollower struct {
	store *Store // the carrying commit's
	plan  func(applied []Info, over func(cursor string) ([]Head, string, bool)) *CommitRider

	mu      sync.Mutex
	carried *CommitRider
}

// WithCommitFollower returns a context whose next commit of s may carry
// the commit plan returns, where the driver can. plan is given what the
// commit will apply, as Commit would return it, and over, which answers
// ChangedPartitionsOver of s's namespace as it will stand once the commit
// applied (ok false where the store cannot prove it); it returns nil to
// carry nothing. Pass the context to that one commit only.
func (s *Store) WithCommitFollower(ctx context.Context, plan func(applied []Info, over func(cursor string) ([]Head, string, bool)) *CommitRider) (context.Context, *CommitFollower) {
	f := &CommitFollower{store: s, plan: plan}
	return context.WithValue(ctx, followerKey{}, f), f
}

type followerKey struct{}

// CommitFollowerOf returns the follower ctx offers, or nil.
func CommitFollowerOf(ctx context.Context) *CommitFollower {
	f, _ := ctx.Value(followerKey{}).(*CommitFollower)
	return f
}

// Follow is for drivers: the follower's rider for a commit that will apply
// applied, over answering the driver's ChangedPartitionsOver (its cursor
// positions) as it will stand after the commit; nil if there is none, or
// one was carried already.
func (f *CommitFollower) Follow(applied []Info, over func(pos []byte) ([]Head, []byte, bool)) *CommitRider {
	f.mu.Lock()
	done := f.carried != nil
	f.mu.Unlock()
	if done || len(applied) == 0 {
		return nil
	}
	name := f.store.d.Name()
	return f.plan(slices.Clone(applied), func(cursor string) ([]Head, string, bool) {
		pos, err := decodeCursor(cursor, name, "\x00feed")
		if err != nil {
			return nil, "", false
		}
		heads, next, ok := over(pos)
		if !ok {
			return nil, "", false
		}
		return heads, encodeCursor(name, "\x00feed", next), true
	})
}

// MarkCarried is for drivers: r, which Follow returned, applied with the
// carrying commit (its own MarkCarried says what it applied).
func (f *CommitFollower) MarkCarried(r *CommitRider) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.carried = r
}

// Carried returns the rider the carrying commit carried, if any.
func (f *CommitFollower) Carried() (*CommitRider, bool) {
	if f == nil {
		return nil, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.carried, f.carried != nil
}

// FollowingCommit returns entries as a commit of s to follow another
// commit of its datastore fenced by fence (WithCommitFollower), carrying
// record too if not nil, or nil when s's Commit would do more than a
// driver can carry: a namespace this process has not registered, a path
// Commit refuses, a put that is not inline (its content checked here, as
// Commit checks it, which reads nothing). The layout needs no proof of its
// own: the carrying commit checks it, in the same write.
func (s *Store) FollowingCommit(ctx context.Context, fence *Fence, entries []Entry, record *RecordWrite) *CommitRider {
	if !s.canCarry(fence, entries) {
		return nil
	}
	for _, e := range entries {
		if e.Put != nil && (e.Put.Chunks != 0 || VerifyStaged(ctx, s.d, *e.Put) != nil) {
			return nil
		}
	}
	return &CommitRider{Driver: s.d, Fence: fence, Now: s.now(), Record: record, entries: slices.Clone(entries)}
}
