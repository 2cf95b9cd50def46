package lock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// Info is a lock as a reader sees it.
type Info struct {
	// Name is NAMESPACE/NAME.
	Name string `json:"name"`
	// Held reports whether a holder holds the lock (possibly a dead one
	// whose lease has run out: see Expired).
	Held bool `json:"held"`
	// Token is the holder's fencing token, or the last holder's when free.
	Token Token `json:"token"`
	// Holder, Host and PID identify the holder.
	Holder string `json:"holder,omitempty"`
	Host   string `json:"host,omitempty"`
	PID    int    `json:"pid,omitempty"`
	// Acquired is when the holder acquired the lock, by its clock.
	Acquired time.Time `json:"acquired,omitzero"`
	// Lease is the holder's lease.
	Lease time.Duration `json:"lease,omitempty"`
	// Expires is the holder's expiry, by its clock: its last renewal plus
	// its lease.
	Expires time.Time `json:"expires,omitzero"`
	// Expired reports whether Expires has passed by the reader's clock.
	Expired bool `json:"expired,omitempty"`
	// Released is when the lock was last released; Forced whether by a
	// forced release or a takeover.
	Released time.Time `json:"released,omitzero"`
	Forced   bool      `json:"forced,omitempty"`
}

func infoOf(n lockName, rec lockRecord, exp *expiryRecord, now time.Time) Info {
	in := Info{
		Name: n.String(), Held: rec.Held, Token: rec.Token, Holder: rec.Holder, Host: rec.Host, PID: rec.PID,
		Acquired: rec.Acquired, Lease: time.Duration(rec.LeaseMS) * time.Millisecond, Expires: rec.Expires,
		Released: rec.Released, Forced: rec.Forced,
	}
	if exp != nil && exp.Token == rec.Token && exp.Expires.After(in.Expires) {
		in.Expires = exp.Expires
	}
	in.Expired = rec.Held && now.After(in.Expires)
	return in
}

// Inspect returns the current state of the lock name, strongly consistent.
// A lock never acquired gives an error matching ErrNotFound.
func (l *Locker) Inspect(ctx context.Context, name string) (Info, error) {
	n, err := parseName(name)
	if err != nil {
		return Info{}, err
	}
	cur, err := l.st.Get(ctx, n.lockKey())
	if err != nil {
		if errors.Is(err, metastore.ErrNotFound) {
			return Info{}, fmt.Errorf("%w: lock %s has never been acquired", metastore.ErrNotFound, n)
		}
		return Info{}, err
	}
	rec, err := decodeLock(n.lockKey(), cur)
	if err != nil {
		return Info{}, err
	}
	eb, err := l.get(ctx, n.expiryKey())
	if err != nil {
		return Info{}, err
	}
	var exp *expiryRecord
	if eb != nil {
		e, err := decodeExpiry(n.expiryKey(), eb)
		if err != nil {
			return Info{}, err
		}
		exp = &e
	}
	return infoOf(n, rec, exp, l.wallNow()), nil
}

// List returns every lock of namespace, sorted by name: two listings of the
// store, one of lock records and one of expiry records.
func (l *Locker) List(ctx context.Context, namespace string) ([]Info, error) {
	if err := ValidateNamespace(namespace); err != nil {
		return nil, err
	}
	recs, err := l.st.List(ctx, "rec/"+namespace+"/")
	if err != nil {
		return nil, err
	}
	exps, err := l.st.List(ctx, "exp/"+namespace+"/")
	if err != nil {
		return nil, err
	}
	byName := map[string]*expiryRecord{}
	for _, r := range exps {
		e, err := decodeExpiry(r.Key, r.Value)
		if err != nil {
			return nil, err
		}
		byName[strings.TrimPrefix(r.Key, "exp/")] = &e
	}
	out := make([]Info, 0, len(recs))
	for _, r := range recs {
		rec, err := decodeLock(r.Key, r.Value)
		if err != nil {
			return nil, err
		}
		full := strings.TrimPrefix(r.Key, "rec/")
		n, err := parseName(full)
		if err != nil {
			return nil, fmt.Errorf("lake: lock record %q: %w", r.Key, err)
		}
		out = append(out, infoOf(n, rec, byName[full], l.wallNow()))
	}
	return out, nil
}

// ForceRelease breaks the lock name held with token: the lock record becomes
// free (keeping the token, so the next acquisition's is larger) and the
// holder's fenced writes are refused from then on; the holder learns it at
// its next renewal or fenced write. Naming the token makes the operator's
// intent exact: if the lock is free or held with another token (the holder
// changed since it was inspected) nothing is done and the error matches
// ErrConflict.
func (l *Locker) ForceRelease(ctx context.Context, name string, token Token) error {
	n, err := parseName(name)
	if err != nil {
		return err
	}
	cur, err := l.st.Get(ctx, n.lockKey())
	if err != nil {
		if errors.Is(err, metastore.ErrNotFound) {
			return fmt.Errorf("%w: lock %s has never been acquired", metastore.ErrNotFound, n)
		}
		return err
	}
	rec, err := decodeLock(n.lockKey(), cur)
	if err != nil {
		return err
	}
	if !rec.Held {
		return metastore.Conflict(n.lockKey(), fmt.Sprintf("lock %s is not held (last token %s)", n, rec.Token))
	}
	if rec.Token != token {
		return metastore.Conflict(n.lockKey(), fmt.Sprintf("lock %s is held with token %s, not %s", n, rec.Token, token))
	}
	free := encode(l.freeRecord(rec, true))
	if err := l.st.Swap(ctx, n.lockKey(), cur, free); err != nil {
		return err
	}
	l.remember(n, free)
	return nil
}
