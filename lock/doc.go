// Package lock is lake's lease lock with fencing tokens: namespaced locks
// whose tokens only grow, whose holders write through the lock, and whose
// algorithm is written once over a small Storage interface that the
// metastore contract implements (Metastore) and that other stores can.
//
// # Records
//
// A lock NAMESPACE/NAME has two records, and each namespace one counter:
//
//	rec/NS/NAME  the lock record: token, held or free, holder (id, host, pid),
//	             acquired at, lease, initial expiry. It never changes while
//	             held, so it is what fenced writes are guarded on.
//	exp/NS/NAME  the expiry record: the holder's token and its renewed
//	             expiry, written by each renewal with a write fenced on the
//	             lock record. A record for another token is stale.
//	gen/NS       the namespace's generation counter; no TTL touches it.
//
// The metastore adapter keeps them under the key prefix "lock/".
//
// # Tokens
//
// A token is generation<<32 | sequence. Creating a lock record (the first
// acquisition of a name, or after its record was deleted) bumps the
// namespace's generation and writes the record guarded on the bumped value;
// every other acquisition, takeovers included, bumps the sequence in the
// record with one conditional write; a release or a forced release keeps the
// token in the free record. So every acquisition's token exceeds every
// earlier one for the name: a deleted record comes back with a generation
// larger than any it ever had, and a creator that stalled between its two
// writes fails its guard. A sequence that would overflow takes the
// generation path.
//
// # Requests
//
// A Locker remembers the lock record it last wrote or read, so an
// uncontended re-acquisition is one conditional write and a release one
// (the record becomes free); a Locker that has not seen the record reads it
// first. A renewal is one fenced write of the expiry record (two for the
// first renewal of an acquisition that did not see that record).
//
// # Heartbeat and loss
//
// A Lease renews every Heartbeat (at most a third of the lease). A renewal
// refused because writes are paused (ErrWritesPaused) or whose outcome is
// unknown (ErrUnavailable) is retried and read back. The lease runs out on
// the holder's monotonic clock, a lease after the instant the last confirmed
// write was sent; then, or as soon as a read shows the lock record changed,
// the lease's context is cancelled with ErrLost. Lease.Write applies a
// mutation fenced on the lock record, so the store itself refuses a holder
// that lost the lock, however late its write arrives.
//
// # Takeover
//
// A waiter takes over a holder whose lease ran out with one write guarded on
// the expiry record as observed: a renewal that lands in between makes it
// fail. An absent expiry record (a holder that never renewed) is first
// created with the holder's own initial expiry, and guarded on. With a
// clock-skew bound (Options.ClockSkew), the waiter takes over once expiry
// plus the bound has passed on its clock (the store's own, when the Storage
// is also a Clock, as the S3 storage is). Without one, it waits until it has
// observed the lock and expiry records unchanged for a full lease of the
// holder's on its own monotonic clock, the safe default of the field.
//
// # Namespaces
//
// Names are NAMESPACE/NAME. Locks of different namespaces share no record,
// so they never contend; List returns a namespace's locks.
//
// No TTL is used: a dead holder's records stay until the next acquisition
// overwrites them, and a record deleted from outside (by an operator or a
// TTL) is tolerated as described above.
package lock
