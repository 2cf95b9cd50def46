package metastore

import (
	"context"
	"time"
)

type expiryKey struct{}

// WithExpiry returns a context whose writes carry an expiry hint: a backend
// with a native time to live (DynamoDB's TTL) marks each item the write puts
// so that the backend deletes it some time after at; the others ignore the
// hint. It is a backstop that bounds what long-dead records cost, never a
// mechanism: a caller MUST stay correct whether the item is deleted at any
// time after at, or never. Deletes and reads ignore it.
func WithExpiry(ctx context.Context, at time.Time) context.Context {
	return context.WithValue(ctx, expiryKey{}, at)
}

// ExpiryFrom returns the expiry hint of ctx, if it has one.
func ExpiryFrom(ctx context.Context) (time.Time, bool) {
	at, ok := ctx.Value(expiryKey{}).(time.Time)
	return at, ok && !at.IsZero()
}
