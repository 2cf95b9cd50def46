package datastore

import (
	"context"
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
// conditions, and sends them in its own transaction; if the transaction
// fails on one of the rider's conditions the driver sends its own items
// alone, as without the rider. The caller asks Carried afterwards and
// commits the rider itself when it was not carried. Nothing is ever
// applied twice: a carried rider's commit applied with the transaction,
// and one not carried applied nothing.

// CommitRider is a commit of deletes prepared by Store.CommitRider, to be
// carried by another operation's write where the driver can.
type CommitRider struct {
	// Driver is the rider's store's driver, Fence its fence (the carrying
	// operation's own, or the rider is not carried) and Deletes its
	// paths, Now the time of its changes.
	Driver  Driver
	Fence   *Fence
	Deletes []string
	Now     time.Time

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
	if s.open() != nil || fence == nil || len(deletes) == 0 {
		return nil
	}
	if s.root.layoutUnverified.Load() || !s.root.layoutRecorded.Load() || !s.registeredHere() {
		return nil
	}
	if metastore.ValidateKey(fence.Key) != nil {
		return nil
	}
	r := &CommitRider{Driver: s.d, Fence: fence, Deletes: deletes, Now: s.now()}
	if checkEntries(r.Entries()) != nil {
		return nil
	}
	return r
}

// Entries returns the rider's commit entries.
func (r *CommitRider) Entries() []Entry {
	out := make([]Entry, len(r.Deletes))
	for i, p := range r.Deletes {
		out[i] = Entry{Delete: p}
	}
	return out
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
