package s3fs

import (
	"context"
	"errors"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// A sync stats the paths it is about to commit (their states, read before
// the commit, go to the catalog fold), then commits them: on S3 both read
// the partition's tail (its head, a LIST of its log) and each path's index
// entry, so the commit read again, a moment later, what the Stat had just
// read (issue 31). The Stat now hands its tail, with the index entries it
// read as hints, to the next commit of that partition in this process,
// which starts from it: it reads only the log object the head ends at (the
// fences a writer carries on), one GET instead of a GET, a LIST and the
// entries.
//
// A commit hands on the head it wrote the same way, with the index entries
// its roll-forward wrote as hints, to the partition's next commit in this
// process (a sync's catalog fold commits a model's row, and the lifecycle
// then removes the row of the model it dropped, both in the namespace's
// one catalog partition): that commit reads neither the head, nor the log,
// nor those entries (TestCommitHandsItsHeadToTheNext; two GETs and a LIST
// a sync that drops a model).
//
// Nothing is trusted that the commit does not vouch for: its create is
// conditional on the position the tail names, so a tail that moved since
// the Stat costs a lost race and a fresh read, never a decision on stale
// state (an index entry read after the tail is at least as new as the
// tail; one newer means a commit landed after it, which took that
// position). A tail older than handoffAge is not taken, so a lost race
// stays rare.

// handoffAge bounds how old a tail handed on a commit starts from.
const handoffAge = 5 * time.Second

// handOff offers t, part's tail just read by a Stat (or the head a commit
// just wrote), to the next commit. Every Stat offers (a reader's too,
// which no commit takes): the shelf drops the ones too old to be taken.
func (d *Driver) handOff(part string, t *tail) {
	d.c.handoff.Put(d.prefix+part, t)
}

// takeHandoff returns the tail a Stat offered for part, once, read as a
// writer reads it (withLast), or nil: none offered, too old, or its head
// names no object that ends at its watermark (the commit then reads).
func (d *Driver) takeHandoff(ctx context.Context, part string) (*tail, error) {
	t, ok := d.c.handoff.Take(d.prefix + part)
	if !ok {
		return nil, nil
	}
	if t.withLast {
		return nil, nil
	}
	if !t.exists || t.h.Applied == 0 {
		t.withLast = true // nothing applied: a writer reads no more
		return t, nil
	}
	if t.h.knownFences() {
		return writerTail(t), nil // what a writer needs of it, without a GET
	}
	if t.h.Base == 0 || t.h.Base > t.h.Applied {
		return nil, nil
	}
	o, err := d.readLog(ctx, part, d.logKey(part, t.h.Base), t.h.Base)
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, nil // compacted or dropped since: read afresh
	}
	if err != nil {
		return nil, err
	}
	if o.last() != t.h.Applied {
		return nil, nil
	}
	t.base = o
	if t.last == nil {
		t.last = o
	}
	t.withLast = true
	return t, nil
}
