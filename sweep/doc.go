// Package sweep walks a live DynamoDB table in parallel scan segments and
// hands each page to a handler, durably, at a bounded write rate.
//
// It is the engine under every bulk pass lake makes over a table while the
// table keeps serving: the v1 → v2 backfill, and the sweeps of `lake reshape`.
// The handler decides what to write and conditions its own writes; the engine
// owns the walking, the resumption, the overlap and the rate.
//
// # Resumption
//
// Each segment has a durable cursor (the LastEvaluatedKey of its last page
// whose handler returned), saved through a Checkpoints only after the handler
// of that page returned. A sweep that stops (a crash, a cancelled context, a
// handler error) and is run again resumes each segment after its last saved
// page, so it redoes at most one page per segment: handlers MUST be
// idempotent, which conditional writes give for free. The segment count is
// recorded with the cursors when a sweep starts, and a resumed sweep uses the
// recorded count whatever Options.Segments says, because DynamoDB's parallel
// scan divides the table by the total segment count and a cursor of one
// division means nothing in another.
//
// # Overlap
//
// While the handler of one page runs, the segment already scans its next page,
// so a segment's time per page is the larger of the scan and the writes rather
// than their sum.
//
// # Rate
//
// Options.MaxWCU bounds the write capacity units per second the handlers
// cause, across all segments. Handlers report what they spend through
// Page.Spend before (an estimate) and after (the correction from the
// ConsumedCapacity DynamoDB returned) each write, index writes included, so
// that a sweep does not starve the live traffic beside it.
//
// # Dry runs
//
// With Options.DryRun the engine scans and calls the handler with Page.DryRun
// set (the handler MUST NOT write), and saves no cursor.
package sweep
