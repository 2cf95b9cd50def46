package datastore

import (
	"context"
	"sync/atomic"

	"github.com/lakemeta/lake/metastore"
)

// RecordWrite is a record write a fenced commit may carry in its own
// transaction (WithRecordWrite): Key set to Value if it holds what Expect
// says. Issue 31: the catalog fold's cursor written with the rows.
type RecordWrite struct {
	Key    string
	Expect metastore.Expect
	Value  []byte
	// Optional lets a driver that would need a request of its own for
	// the write, apart from the carrying one (S3), leave it unwritten
	// (Written false); the caller keeps the value. A driver that carries
	// it in the same request (DynamoDB's transaction) writes it anyway.
	Optional bool
	// written is set by a driver that wrote the record with the commit;
	// refused when the commit was refused because the record did not
	// hold what Expect says (nothing of the commit was applied then).
	written, refused atomic.Bool
}

// Written reports that the commit wrote the record, atomically with its
// entries.
func (w *RecordWrite) Written() bool { return w.written.Load() }

// Refused reports that the commit was refused only because the record did
// not hold what Expect says: nothing was applied, and the caller may
// commit again without the record.
func (w *RecordWrite) Refused() bool { return w.refused.Load() }

// MarkWritten and MarkRefused are for drivers (RecordWriteOf).
func (w *RecordWrite) MarkWritten() { w.written.Store(true) }

// MarkRefused: see MarkWritten.
func (w *RecordWrite) MarkRefused() { w.refused.Store(true) }

type recordWriteKey struct{}

// WithRecordWrite returns a context whose fenced Commit may also write w in
// the same transaction, where the driver can (DynamoDB, a commit of one
// transaction); the caller learns from w.Written whether it did, and writes
// the record itself otherwise. Pass it to that one Commit only. A commit
// with no fence, or that changes nothing, never writes it.
func WithRecordWrite(ctx context.Context, w *RecordWrite) context.Context {
	return context.WithValue(ctx, recordWriteKey{}, w)
}

// RecordWriteOf returns the record write ctx carries (WithRecordWrite), or
// nil.
func RecordWriteOf(ctx context.Context) *RecordWrite {
	w, _ := ctx.Value(recordWriteKey{}).(*RecordWrite)
	return w
}
