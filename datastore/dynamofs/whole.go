package dynamofs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
	"golang.org/x/sync/errgroup"
)

// Commits of any size (issue 30).
//
// A commit of at most MaxCommit entries is one TransactWriteItems, as
// before. A larger one is staged under a commit record and made visible by
// one conditional write that flips it:
//
//	o#ID   o        the commit record: st = p (pending), d (done) or a (aborted); t = its start (ms)
//	o#ID   b#FIRST  one per staging transaction: es, its entries' paths and puts' upload intent keys (ipk, isk)
//	o#ID   e#PATH   one per entry, as older releases wrote the entries (still read)
//	o#     live     ids: the string set of commit records not yet settled
//
//  1. The record is created (pending) and its id added to the live set by
//     the first staging transaction below, under its fence's
//     ConditionCheck (a transaction of its own before issue 31).
//  2. The entries are staged as many as fit at a time (stagebatch.go), each batch a transaction
//     exactly like a small commit's (fence, the position it read, heads and
//     shard counters moved, clash checks) except that each path's item gets
//     the new state with tx = ID and old = its previous state (absent for
//     a new path), its upload intent is marked tx = ID (so that Reclaim
//     leaves it alone) instead of deleted, its entry item is written, and no
//     replaced version or tombstone is handed to Reclaim yet. Positions are
//     thereby reserved, dense, per partition.
//  3. The flip: one transaction moves the record from p to d under the
//     fence's ConditionCheck. Before it, every reader sees each staged path
//     as its old state; after it, as its new state.
//  4. Roll-forward: each staged item loses tx and old (condition tx = ID),
//     with its replaced version's reclaim entry, its tombstone's purge entry
//     and its intent's delete in the same transaction; each partition's
//     index entry moves (so that ChangedPartitions reports the commit
//     again); the entry items, the record and its live-set id go.
//
// Readers (Stat, List, Changes, ChangedPartitions) resolve an item with tx
// through its record (one GetItem per commit met): done is the new state;
// pending or aborted the old one. Changes stops before an item of a pending
// commit (upTo is the position before it), so a puller never moves past a
// position whose change is not decided; an aborted commit's item is its old
// state at the reserved position. ChangedPartitions reads the live set in
// its read of shard counters and rolls forward every done commit in
// it first.
//
// A writer that meets a staged path settles its commit first: done is
// rolled forward, aborted rolled back; pending and younger than the commit
// window is a conflict (a concurrent commit of the same path); pending and
// older, or fenced on a lock record that holds another token now (its
// fenced flip can never land), is aborted (p to a, conditional: exactly one
// of the flip and the abort wins) and rolled back. Reclaim settles every commit of the live set
// the same way before it reclaims uploads. Roll-back restores each item's
// old state (or deletes a new path's item) under tx = ID and releases the
// intents, which then expire as any upload that never committed.

const (
	attrTx  = "tx"
	attrOld = "old"
	// defaultCommitWindow is how long a pending commit record is taken for
	// a commit in flight.
	defaultCommitWindow = 5 * time.Minute
)

// errInFlight is settle's answer for a pending commit within its window.
var errInFlight = errors.New("lake: a commit is in flight")

// stagedError is buildCommit's: a path of the commit is staged by commit tx.
type stagedError struct{ tx, path string }

func (e *stagedError) Error() string {
	return fmt.Sprintf("lake: path %q is staged by commit %s", e.path, e.tx)
}

// CommitsWhole implements datastore.WholeCommitter.
func (d *Driver) CommitsWhole() bool { return true }

// faultHook is the test hook of datastore.WriteFaulter.
type faultHook = datastore.WriteFault

// SetWriteFault implements datastore.WriteFaulter: f runs before each write
// request (PutItem, UpdateItem, BatchWriteItem, TransactWriteItems).
func (d *Driver) SetWriteFault(f func() error) {
	d.fault.Set(f)
}

var (
	_ datastore.WholeCommitter = (*Driver)(nil)
	_ datastore.WriteFaulter   = (*Driver)(nil)
)

func (d *Driver) txPK(id string) string { return d.pk("o#" + id) }
func (d *Driver) txKey(id string) item  { return key(d.txPK(id), "o") }
func (d *Driver) liveKey() item         { return key(d.pk("o#"), "live") }

// stageIntent marks a staged file's upload intent with the commit's id
// (condition: it still exists, else the upload expired).
func (d *Driver) stageIntent(s datastore.Staged, tx string) (types.TransactWriteItem, error) {
	e, err := build(expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name(attrPK))).
		WithUpdate(expression.Set(expression.Name(attrTx), expression.Value(tx))))
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Update: &types.Update{TableName: &d.table, Key: d.intentKey(s), UpdateExpression: e.Update(),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}}, nil
}

// stagedItem is fi (the new state) staged by tx over old (nil: a new path).
func (d *Driver) stagedItem(fi, old item, tx string) item {
	fi[attrTx] = str(tx)
	if old != nil {
		m := item{}
		for k, v := range old {
			if b, ok := v.(*types.AttributeValueMemberB); ok && len(b.Value) == 0 {
				continue // DynamoDB refuses an empty binary in a map; fileInfo reads it back as empty
			}
			if k != attrPK && k != attrSK && k != attrTx && k != attrOld {
				m[k] = v
			}
		}
		fi[attrOld] = &types.AttributeValueMemberM{Value: m}
	}
	return fi
}

// oldOf returns the state a staged item replaces, as an item, or nil.
func oldOf(it item) item {
	m, ok := it[attrOld].(*types.AttributeValueMemberM)
	if !ok {
		return nil
	}
	out := item{attrPK: it[attrPK], attrSK: it[attrSK]}
	for k, v := range m.Value {
		out[k] = v
	}
	return out
}

// newOf returns a staged item's new state, without its staging attributes.
func newOf(it item) item {
	out := make(item, len(it))
	for k, v := range it {
		if k != attrTx && k != attrOld {
			out[k] = v
		}
	}
	return out
}

func newTxID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (d *Driver) fenceCheck(fence *datastore.Fence) (types.TransactWriteItem, error) {
	c, err := build(expression.NewBuilder().WithCondition(expression.Name("v").Equal(expression.Value(fence.Token))))
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: &d.table, Key: recordKey(fence.Key),
		ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}}, nil
}

// commitWhole stages entries under a new commit record, flips it, and rolls
// it forward (see above).
func (d *Driver) commitWhole(ctx context.Context, fence *datastore.Fence, entries []datastore.Entry, now time.Time, parts []string, layout []byte) ([]datastore.Info, error) {
	id := newTxID()
	rec := d.txKey(id)
	rec["st"], rec["t"] = str("p"), &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)}
	if fence != nil {
		// A fenced commit's flip is fenced: once the lock record holds
		// other bytes it can never flip, so settle may give it up at
		// once rather than after the commit window.
		rec["fk"], rec["fv"] = str(fence.Key), &types.AttributeValueMemberB{Value: fence.Token}
	}
	c, err := build(expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(attrPK))))
	if err != nil {
		return nil, err
	}
	u, err := build(expression.NewBuilder().WithUpdate(expression.Add(expression.Name("ids"), expression.Value(&types.AttributeValueMemberSS{Value: []string{id}}))))
	if err != nil {
		return nil, err
	}
	items := []types.TransactWriteItem{
		{Put: &types.Put{TableName: &d.table, Item: rec, ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names()}},
		{Update: &types.Update{TableName: &d.table, Key: d.liveKey(), UpdateExpression: u.Update(), ExpressionAttributeNames: u.Names(), ExpressionAttributeValues: u.Values()}},
	}
	// The registration of every partition of the commit (whatever the
	// process's cache says: it may predate another process's drop,
	// registry.go) and, with layout, the layout record's check.
	adds, err := d.registryAdds(parts)
	if err != nil {
		return nil, err
	}
	items = append(items, adds...)
	roles := make([]role, len(items))
	for i := range roles {
		roles[i] = roleOther
	}
	if items, roles, err = d.withLayoutCheck(ctx, items, roles, layout); err != nil { // layoutcommit.go
		return nil, err
	}
	// All of it is written by the first staging transaction
	// (stagebatch.go), under its fence's ConditionCheck, with the first
	// staged items: one request less than a registration of its own
	// before them (issue 31).
	out, own, err := d.stageAll(ctx, fence, entries, now, id, firstWrite{items: items, roles: roles, layout: layout}) // stagebatch.go
	if err != nil {
		d.giveUp(ctx, id, now)
		return nil, err
	}
	if own.first != nil {
		return out, nil // no batch changed anything: no record, nothing to flip
	}
	for _, p := range parts {
		d.registered.Store(d.regKey(p), struct{}{})
	}
	// The flip: the one write that makes the commit visible.
	e, err := build(expression.NewBuilder().WithCondition(expression.Name("st").Equal(expression.Value("p"))).
		WithUpdate(expression.Set(expression.Name("st"), expression.Value("d"))))
	if err != nil {
		return nil, err
	}
	items = []types.TransactWriteItem{{Update: &types.Update{TableName: &d.table, Key: d.txKey(id), UpdateExpression: e.Update(),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}}}
	if fence != nil {
		f, err := d.fenceCheck(fence)
		if err != nil {
			return nil, err
		}
		items = append(items, f)
	}
	// The flip rides in the first settling transaction when this writer
	// knows what it staged (settleOwn): one request less (issue 31).
	var settled error
	if len(own.lists) > 0 {
		settled = d.settleOwn(ctx, id, now, own, items...) // stagebatch.go
		var lf *leadFailed
		if errors.As(settled, &lf) {
			return nil, d.flipFailed(ctx, id, now, fence, lf.err)
		}
	} else {
		if err := d.transact(ctx, items); err != nil {
			return nil, d.flipFailed(ctx, id, now, fence, err)
		}
		settled = d.settleOwn(ctx, id, now, own)
	}
	// Done and visible; a failed roll-forward is left to readers, the next
	// writer and Reclaim, never reported as a failed commit.
	if settled == nil {
		d.moves.Record(d.pfx, out, d.moves.takeStaged(id)) // cursorover.go
	}
	return out, nil
}

// flipFailed is the error of commit id's flip (err, from the transaction
// whose first items are the record's update and, fenced, the fence's
// check): a fence conflict, a commit given up by another writer, or an
// unknown outcome (a lost response), which readers and the next writer
// resolve whichever way it went.
func (d *Driver) flipFailed(ctx context.Context, id string, now time.Time, fence *datastore.Fence, err error) error {
	idx, ok := failedIndexes(err)
	switch {
	case ok && fence != nil && slices.Contains(idx, 1):
		d.giveUp(ctx, id, now)
		return metastore.Conflict(fence.Key, datastore.FenceReason)
	case ok && slices.Contains(idx, 0):
		d.giveUp(ctx, id, now)
		return metastore.Conflict(fmt.Sprintf("commit %s", id), "another writer gave this commit up as dead (it took longer than the commit window); nothing of it was applied")
	}
	return d.classify(err, "")
}

// giveUp aborts a commit this writer staged and rolls it back, best effort:
// what it leaves, the next writer or Reclaim settles.
func (d *Driver) giveUp(ctx context.Context, id string, now time.Time) {
	if ok, err := d.abort(ctx, id); err == nil && ok {
		_ = d.rollBack(ctx, id)
		_ = d.forget(ctx, id)
	}
}

// txState reads commit id's record: its state ("" if it is gone) and start.
func (d *Driver) txState(ctx context.Context, id string) (string, time.Time, error) {
	it, err := d.getItem(ctx, d.txKey(id))
	if err != nil {
		return "", time.Time{}, err
	}
	return getS(it, "st"), time.UnixMilli(getI(it, "t")), nil
}

// fenceGone reports whether commit id is fenced on a lock record that no
// longer holds its token: its flip can never succeed.
func (d *Driver) fenceGone(ctx context.Context, id string) (bool, error) {
	it, err := d.getItem(ctx, d.txKey(id))
	if err != nil || getS(it, "st") != "p" || getS(it, "fk") == "" {
		return false, err
	}
	v, err := d.GetRecord(ctx, getS(it, "fk"))
	if errors.Is(err, metastore.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return !bytes.Equal(v, getB(it, "fv")), nil
}

// abort moves commit id from pending to aborted; ok is false if it was not
// pending (flipped meanwhile, or already aborted).
func (d *Driver) abort(ctx context.Context, id string) (bool, error) {
	e, err := build(expression.NewBuilder().WithCondition(expression.Name("st").Equal(expression.Value("p"))).
		WithUpdate(expression.Set(expression.Name("st"), expression.Value("a"))))
	if err != nil {
		return false, err
	}
	err = d.transact(ctx, []types.TransactWriteItem{{Update: &types.Update{TableName: &d.table, Key: d.txKey(id), UpdateExpression: e.Update(),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}}})
	if idx, ok := failedIndexes(err); ok && len(idx) > 0 {
		return false, nil
	}
	return err == nil, d.classify(err, "")
}

// settle finishes commit id: rolled forward if done, back if aborted or
// pending past the commit window (aborted first); errInFlight if pending
// within it.
func (d *Driver) settle(ctx context.Context, id string, now time.Time) error {
	for range 3 {
		st, started, err := d.txState(ctx, id)
		if err != nil {
			return err
		}
		switch st {
		case "":
			return d.forget(ctx, id)
		case "d":
			if err := d.rollForward(ctx, id, now); err != nil {
				return err
			}
			return d.forget(ctx, id)
		case "a":
			if err := d.rollBack(ctx, id); err != nil {
				return err
			}
			return d.forget(ctx, id)
		}
		if now.Sub(started) <= d.window {
			gone, err := d.fenceGone(ctx, id)
			if err != nil {
				return err
			}
			if !gone {
				return errInFlight
			}
		}
		if _, err := d.abort(ctx, id); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: commit %s would not settle", metastore.ErrUnavailable, id)
}

// staged returns commit id's entry items and the current items of their
// paths that are still staged by it.
func (d *Driver) staged(ctx context.Context, id string) (entries, files []item, err error) {
	// The whole pk: e#PATH items, and b# items of several entries
	// (stagebatch.go); entryItems leaves the record out.
	kc := expression.Key(attrPK).Equal(expression.Value(d.txPK(id)))
	e, err := build(expression.NewBuilder().WithKeyCondition(kc))
	if err != nil {
		return nil, nil, err
	}
	in := &dynamodb.QueryInput{KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}
	for {
		page, err := d.query(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, entryItems(page.Items)...)
		if page.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	var keys []item
	for _, it := range entries {
		p := getS(it, attrSK)[len("e#"):]
		keys = append(keys, key(d.filePK(d.partition(p)), p))
	}
	got, err := d.batchGet(ctx, keys)
	if err != nil {
		return nil, nil, err
	}
	for _, it := range got {
		if getS(it, attrTx) == id {
			files = append(files, it)
		}
	}
	return entries, files, nil
}

// settleParallel bounds the settling transactions of one commit in flight
// at once: each writes its own files' items (a file is in one transaction
// only), so they do not wait for each other, and a commit of many files
// settles in about its transactions over settleParallel round trips.
const settleParallel = 8

// settleItems sends ops per staged file, as many files to a transaction as
// fit (maxTxItems items, maxTxBytes bytes: stagebatch.go), those
// transactions in parallel; a transaction that fails a condition (another
// settler got there first) is sent again file by file, and a file's failed
// condition skipped.
//
// With lead (a staged commit's flip, settleOwn), the first transaction
// carries lead's items first and is sent alone, before the others: its
// files are settled in the same write that flips the commit, one request
// less (issue 31), and none of the others is settled before the flip
// landed. If it does not land, the error is a *leadFailed and nothing was
// written; if only a settling condition failed in it (none can before the
// flip: an item staged by a commit changes only by settling it), lead is
// sent alone and the files settled as without it.
//
// With tail (a staged commit's index move and forgetting, settleOwn), tail
// goes after every other transaction landed: in the last one when it fits
// there (the commit is settled, moved and forgotten without a request of
// its own, issue 31), else alone. tail.landed tells whether it landed; if
// its transaction fails a condition, the last files are settled without it
// and tail is left to the caller.
func (d *Driver) settleItems(ctx context.Context, files []item, ops func(it item) ([]types.TransactWriteItem, error), tail *settleTail, lead ...types.TransactWriteItem) error {
	if len(files) == 0 {
		if len(lead) > 0 {
			if err := leadOnly(d.transact(ctx, lead)); err != nil {
				return err
			}
		}
		return d.sendTail(ctx, tail, nil)
	}
	var groups [][]item
	var txs [][]types.TransactWriteItem
	for start, end := 0, 0; start < len(files); start = end {
		var all []types.TransactWriteItem
		if start == 0 {
			all = append(all, lead...)
		}
		for end = start; end < len(files); end++ {
			w, err := ops(files[end])
			if err != nil {
				return err
			}
			if end > start && tooBig(append(all[:len(all):len(all)], w...)) {
				break
			}
			all = append(all, w...)
		}
		groups, txs = append(groups, files[start:end]), append(txs, all)
	}
	if len(lead) > 0 {
		settled, err := d.sendLead(ctx, txs[0], len(lead))
		if err != nil {
			return err
		}
		if settled {
			groups, txs = groups[1:], txs[1:]
		} else {
			txs[0] = txs[0][len(lead):]
		}
	}
	if tail == nil || len(txs) == 0 {
		if err := d.settleGroups(ctx, groups, txs, ops); err != nil {
			return err
		}
		return d.sendTail(ctx, tail, nil)
	}
	last := len(txs) - 1
	if tooBig(append(slices.Clip(txs[last]), tail.items...)) {
		if err := d.settleGroups(ctx, groups, txs, ops); err != nil {
			return err
		}
		return d.sendTail(ctx, tail, nil)
	}
	if err := d.settleGroups(ctx, groups[:last], txs[:last], ops); err != nil {
		return err
	}
	if err := d.sendTail(ctx, tail, txs[last]); err != nil || tail.landed {
		return err
	}
	return d.settleGroup(ctx, groups[last], txs[last], ops)
}

// settleTail is what the writer of a staged commit writes once its files
// are settled: the move of the index entries of the partitions it touched
// (bumpItems) and the forgetting of the commit (forgetItems), in one
// transaction; landed once that transaction landed.
type settleTail struct {
	items  []types.TransactWriteItem
	onLand func()
	landed bool
}

// sendTail sends tail (if any) after with, the last settling transaction's
// items (nil: tail alone). A failed condition leaves tail.landed false and
// is no error: the caller moves the index and forgets the commit the old
// way, and settles with's files.
func (d *Driver) sendTail(ctx context.Context, tail *settleTail, with []types.TransactWriteItem) error {
	if tail == nil {
		return nil
	}
	err := d.transact(ctx, append(slices.Clip(with), tail.items...))
	if err == nil {
		tail.landed = true
		tail.onLand()
		return nil
	}
	if _, ok := failedIndexes(err); ok {
		return nil
	}
	return d.classify(err, "")
}

// settleGroups sends txs (the ops of groups' files), settleParallel at once.
func (d *Driver) settleGroups(ctx context.Context, groups [][]item, txs [][]types.TransactWriteItem, ops func(it item) ([]types.TransactWriteItem, error)) error {
	if len(txs) == 0 {
		return nil
	}
	if len(txs) == 1 {
		return d.settleGroup(ctx, groups[0], txs[0], ops)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(settleParallel)
	for i := range txs {
		g.Go(func() error { return d.settleGroup(gctx, groups[i], txs[i], ops) })
	}
	return g.Wait()
}

// sendLead sends tx, whose first n items are a lead (settleItems), alone.
// settled reports that its files were settled with the lead; false, with
// no error, when only a settling condition failed and the lead was then
// sent alone (its files are still to settle).
func (d *Driver) sendLead(ctx context.Context, tx []types.TransactWriteItem, n int) (settled bool, err error) {
	err = d.transact(ctx, tx)
	if err == nil {
		return true, nil
	}
	if idx, ok := failedIndexes(err); !ok || len(idx) == 0 || slices.ContainsFunc(idx, func(i int) bool { return i < n }) {
		return false, &leadFailed{err: err}
	}
	return false, leadOnly(d.transact(ctx, tx[:n]))
}

// leadOnly is the error of a transaction of a lead alone: a *leadFailed
// if it did not land.
func leadOnly(err error) error {
	if err != nil {
		return &leadFailed{err: err}
	}
	return nil
}

// settleGroup sends all, the ops of group's files in one transaction, and
// if a condition fails, each file's ops alone.
func (d *Driver) settleGroup(ctx context.Context, group []item, all []types.TransactWriteItem, ops func(it item) ([]types.TransactWriteItem, error)) error {
	err := d.transact(ctx, all)
	if _, ok := failedIndexes(err); !ok || err == nil {
		if err != nil {
			return d.classify(err, "")
		}
		return nil
	}
	for _, it := range group {
		w, err := ops(it)
		if err != nil {
			return err
		}
		err = d.transact(ctx, w)
		if _, ok := failedIndexes(err); err != nil && !ok {
			return d.classify(err, "")
		}
	}
	return nil
}

// leadFailed is settleItems' error when the transaction carrying its lead
// (a staged commit's flip) did not land, or its outcome is unknown: err is
// that transaction's.
type leadFailed struct{ err error }

func (e *leadFailed) Error() string { return e.err.Error() }
func (e *leadFailed) Unwrap() error { return e.err }

// onlyIfStaged is the condition of every settling write of a staged file.
func onlyIfStaged(id string) expression.ConditionBuilder {
	return expression.Name(attrTx).Equal(expression.Value(id))
}

// rollForward makes each file still staged by commit id its plain new state,
// hands replaced versions and tombstones to Reclaim, deletes the intents, and
// moves the index entry of each partition the commit touched.
func (d *Driver) rollForward(ctx context.Context, id string, now time.Time) error {
	entries, files, err := d.staged(ctx, id)
	if err != nil {
		return err
	}
	return d.rollForwardItems(ctx, id, now, entries, files, nil)
}

// rollForwardItems is rollForward over commit id's entry items and the
// items of its paths still staged by it (as staged reads them, or as its
// writer wrote them: stagebatch.go).
//
// With tail (settleOwn), the index move and the forgetting ride in the last
// settling transaction, or go in one transaction after it (settleItems);
// if that fails, the index is moved as without it and tail.landed stays
// false (the caller forgets the commit).
func (d *Driver) rollForwardItems(ctx context.Context, id string, now time.Time, entries, files []item, tail *settleTail, lead ...types.TransactWriteItem) error {
	intents := map[string]item{}
	for _, it := range entries {
		if getS(it, "ipk") != "" {
			intents[getS(it, attrSK)[len("e#"):]] = item{attrPK: it["ipk"], attrSK: it["isk"]}
		}
	}
	e, err := build(expression.NewBuilder().WithCondition(onlyIfStaged(id)).
		WithUpdate(expression.Remove(expression.Name(attrTx)).Remove(expression.Name(attrOld))))
	if err != nil {
		return err
	}
	err = d.settleItems(ctx, files, func(it item) ([]types.TransactWriteItem, error) {
		path := getS(it, attrSK)
		w := []types.TransactWriteItem{{Update: &types.Update{TableName: &d.table, Key: key(getS(it, attrPK), path), UpdateExpression: e.Update(),
			ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}}}
		if old := oldOf(it); old != nil && !getBool(old, "del") && getN(old, "chunks") > 0 {
			g := d.garbageKey(getS(old, "ver"), now)
			g["chunks"] = num(getN(old, "chunks"))
			w = append(w, types.TransactWriteItem{Put: &types.Put{TableName: &d.table, Item: g}})
		}
		if getBool(it, "del") {
			t := d.tombKey(path, now)
			t["path"], t["p"] = str(path), num(getN(it, attrPos))
			w = append(w, types.TransactWriteItem{Put: &types.Put{TableName: &d.table, Item: t}})
		}
		if ik, ok := intents[path]; ok {
			w = append(w, types.TransactWriteItem{Delete: &types.Delete{TableName: &d.table, Key: ik}})
		}
		return w, nil
	}, tail, lead...)
	if err != nil {
		return err
	}
	if tail != nil && tail.landed {
		return nil
	}
	return d.bumpIndexes(ctx, entryParts(d, entries), id) // stagebatch.go
}

// entryParts returns the partitions of a commit's entry items, sorted.
func entryParts(d *Driver, entries []item) []string {
	var parts []string
	for _, it := range entries {
		parts = append(parts, d.partition(getS(it, attrSK)[len("e#"):]))
	}
	slices.Sort(parts)
	return slices.Compact(parts)
}

// rollBack gives each file still staged by commit id its old state back
// (a new path's item goes) and releases its upload intent.
func (d *Driver) rollBack(ctx context.Context, id string) error {
	entries, files, err := d.staged(ctx, id)
	if err != nil {
		return err
	}
	intents := map[string]item{}
	var parts []string
	for _, it := range entries {
		if getS(it, "ipk") != "" {
			intents[getS(it, attrSK)[len("e#"):]] = item{attrPK: it["ipk"], attrSK: it["isk"]}
		}
		parts = append(parts, d.partition(getS(it, attrSK)[len("e#"):]))
	}
	if err := d.rollBackFiles(ctx, id, files, intents); err != nil {
		return err
	}
	// The heads forget the commit (their reserved positions stay unused).
	e, err := build(expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name(attrPK))).
		WithUpdate(expression.Remove(expression.Name(headMark(id)))))
	if err != nil {
		return err
	}
	slices.Sort(parts)
	for _, p := range slices.Compact(parts) {
		err := d.transact(ctx, []types.TransactWriteItem{{Update: &types.Update{TableName: &d.table, Key: d.headKey(p), UpdateExpression: e.Update(),
			ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names()}}})
		if _, ok := failedIndexes(err); err != nil && !ok {
			return d.classify(err, p)
		}
	}
	return nil
}

// headMark is the attribute of a partition's head that holds the first
// position commit id staged in it, until the commit is settled.
func headMark(id string) string { return "s_" + id }

// decidedSeq is the head item it's position up to which every change is
// decided: below the first position of any commit staged in the partition
// and still pending (its positions, and every later one, wait for it, as a
// pull does). One GetItem per staged commit marked on the head; none
// otherwise.
func (d *Driver) decidedSeq(ctx context.Context, it item) (uint64, error) {
	seq := getN(it, "seq")
	for name := range it {
		id, ok := strings.CutPrefix(name, "s_")
		if !ok {
			continue
		}
		st, _, err := d.txState(ctx, id)
		if err != nil {
			return 0, err
		}
		if first := getN(it, name); st == "p" && first > 0 {
			seq = min(seq, first-1)
		}
	}
	return seq, nil
}

// rollBackOrphan rolls back the one item of path if it is still staged by
// commit id while id's record is gone: a leftover lake never writes (a
// record goes only after its items are settled), but a foreign writer can.
// Without it the path could never be written again.
func (d *Driver) rollBackOrphan(ctx context.Context, id, path string) error {
	if st, _, err := d.txState(ctx, id); err != nil || st != "" {
		return err
	}
	it, err := d.getItem(ctx, key(d.filePK(d.partition(path)), path))
	if err != nil || getS(it, attrTx) != id {
		return err
	}
	return d.rollBackFiles(ctx, id, []item{it}, nil)
}

// rollBackFiles restores the old state of files staged by commit id and
// releases their intents.
func (d *Driver) rollBackFiles(ctx context.Context, id string, files []item, intents map[string]item) error {
	c, err := build(expression.NewBuilder().WithCondition(onlyIfStaged(id)))
	if err != nil {
		return err
	}
	rel, err := build(expression.NewBuilder().WithCondition(onlyIfStaged(id)).WithUpdate(expression.Remove(expression.Name(attrTx))))
	if err != nil {
		return err
	}
	return d.settleItems(ctx, files, func(it item) ([]types.TransactWriteItem, error) {
		path := getS(it, attrSK)
		var w []types.TransactWriteItem
		if old := oldOf(it); old != nil {
			w = append(w, types.TransactWriteItem{Put: &types.Put{TableName: &d.table, Item: old,
				ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}})
		} else {
			w = append(w, types.TransactWriteItem{Delete: &types.Delete{TableName: &d.table, Key: key(getS(it, attrPK), path),
				ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}})
		}
		if ik, ok := intents[path]; ok {
			w = append(w, types.TransactWriteItem{Update: &types.Update{TableName: &d.table, Key: ik, UpdateExpression: rel.Update(),
				ConditionExpression: rel.Condition(), ExpressionAttributeNames: rel.Names(), ExpressionAttributeValues: rel.Values()}})
		}
		return w, nil
	}, nil)
}

// forget deletes commit id's entry items and record, then its id from the
// live set: the last step of settling it.
func (d *Driver) forget(ctx context.Context, id string) error {
	kc := expression.Key(attrPK).Equal(expression.Value(d.txPK(id)))
	e, err := build(expression.NewBuilder().WithKeyCondition(kc).WithProjection(expression.NamesList(expression.Name(attrPK), expression.Name(attrSK))))
	if err != nil {
		return err
	}
	in := &dynamodb.QueryInput{KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(),
		ExpressionAttributeValues: e.Values(), ProjectionExpression: e.Projection()}
	var keys []item
	for {
		page, err := d.query(ctx, in)
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			if getS(it, attrSK) != "o" {
				keys = append(keys, key(getS(it, attrPK), getS(it, attrSK)))
			}
		}
		if page.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	return d.forgetKeys(ctx, id, keys)
}

// forgetKeys is forget with commit id's entry item keys known. Up to a
// transaction's worth of keys, the entries, the record and the live-set id
// go in one TransactWriteItems (one request, issue 31); more, the entries
// and the record in BatchWriteItems, then the id: the record goes last, as
// while it exists a settler finds the entries.
func (d *Driver) forgetKeys(ctx context.Context, id string, keys []item) error {
	items, fits, err := d.forgetItems(id, keys)
	if err != nil {
		return err
	}
	if fits {
		return d.classify(d.transact(ctx, items), "")
	}
	if err := d.batchDelete(ctx, dedupKeys(append(keys, d.txKey(id)))); err != nil {
		return err
	}
	unlive, err := d.unliveItem(id)
	if err != nil {
		return err
	}
	return d.classify(d.transact(ctx, []types.TransactWriteItem{unlive}), "")
}

// forgetItems returns the deletes of commit id's entry item keys and
// record and the removal of its live-set id, and whether they fit in one
// transaction.
func (d *Driver) forgetItems(id string, keys []item) ([]types.TransactWriteItem, bool, error) {
	keys = dedupKeys(append(slices.Clip(keys), d.txKey(id)))
	if len(keys)+1 > maxTxItems {
		return nil, false, nil
	}
	unlive, err := d.unliveItem(id)
	if err != nil {
		return nil, false, err
	}
	items := make([]types.TransactWriteItem, 0, len(keys)+1)
	for _, k := range keys {
		items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: &d.table, Key: k}})
	}
	return append(items, unlive), true, nil
}

// unliveItem is the removal of commit id from the live set.
func (d *Driver) unliveItem(id string) (types.TransactWriteItem, error) {
	u, err := build(expression.NewBuilder().WithUpdate(expression.Delete(expression.Name("ids"), expression.Value(&types.AttributeValueMemberSS{Value: []string{id}}))))
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Update: &types.Update{TableName: &d.table, Key: d.liveKey(), UpdateExpression: u.Update(),
		ExpressionAttributeNames: u.Names(), ExpressionAttributeValues: u.Values()}}, nil
}

// bumpIndex moves partition's index entry (its head) to the next position
// of its shard, so that ChangedPartitions reports it again.
func (d *Driver) bumpIndex(ctx context.Context, part, id string) error {
	sh := shard(part)
	for attempt := 1; attempt <= maxCommitAttempts; attempt++ {
		got, err := d.batchGet(ctx, []item{d.headKey(part), d.counterKey(sh)})
		if err != nil {
			return err
		}
		var h, n item
		for _, it := range got {
			if getS(it, attrPK) == d.headPK(sh) {
				h = it
			} else {
				n = it
			}
		}
		if h == nil {
			return nil // dropped meanwhile
		}
		next := getN(n, "n") + 1
		hw, err := d.casUpdate(d.headKey(part), "seq", getN(h, "seq"), withPrev(expression.Set(expression.Name(attrPos), expression.Value(next)), h).
			Remove(expression.Name(headMark(id))))
		if err != nil {
			return err
		}
		nw, err := d.casUpdate(d.counterKey(sh), "n", getN(n, "n"), expression.Set(expression.Name("n"), expression.Value(next)))
		if err != nil {
			return err
		}
		err = d.transact(ctx, []types.TransactWriteItem{hw, nw})
		if idx, ok := failedIndexes(err); ok && len(idx) > 0 {
			sleep(ctx, time.Duration(attempt)*time.Millisecond)
			continue
		}
		return d.classify(err, part)
	}
	return fmt.Errorf("%w: moving partition %q's index entry kept losing races", metastore.ErrUnavailable, part)
}

// liveCommits returns the ids of the live set item it (nil: none).
func liveCommits(it item) []string {
	if ss, ok := it["ids"].(*types.AttributeValueMemberSS); ok {
		return ss.Value
	}
	return nil
}

// settleLive settles every commit of the live set that can be settled at
// now (Reclaim; ChangedPartitions with the wall clock).
func (d *Driver) settleLive(ctx context.Context, ids []string, now time.Time) error {
	for _, id := range ids {
		if err := d.settle(ctx, id, now); err != nil && !errors.Is(err, errInFlight) {
			return err
		}
	}
	return nil
}

// txView is what readers see of a file item.
type txView struct {
	it      item // the state readers see (nil: absent)
	pending bool // staged by a commit not yet decided
	aborted bool // staged by an aborted commit: it is the old state
}

// view resolves items staged by a commit through their commit records (one
// GetItem per commit met; none when nothing is staged).
func (d *Driver) view(ctx context.Context, its []item) ([]txView, error) {
	out := make([]txView, len(its))
	states := map[string]string{}
	for i, it := range its {
		id := getS(it, attrTx)
		if id == "" {
			out[i] = txView{it: it}
			continue
		}
		st, ok := states[id]
		if !ok {
			var err error
			if st, _, err = d.txState(ctx, id); err != nil {
				return nil, err
			}
			states[id] = st
		}
		switch st {
		case "d":
			out[i] = txView{it: newOf(it)}
		case "":
			// Settled after this item was read: read it again.
			again, err := d.getItem(ctx, key(getS(it, attrPK), getS(it, attrSK)))
			if err != nil {
				return nil, err
			}
			if getS(again, attrTx) == id {
				// A record gone before its items: never written so
				// by lake; the old state is what was committed.
				out[i] = txView{it: oldOf(again), aborted: true}
				continue
			}
			if again != nil && getS(again, attrTx) != "" {
				v, err := d.view(ctx, []item{again})
				if err != nil {
					return nil, err
				}
				out[i] = v[0]
				continue
			}
			out[i] = txView{it: again}
		default:
			out[i] = txView{it: oldOf(it), pending: st == "p", aborted: st == "a"}
		}
	}
	return out, nil
}

// visible resolves its for Stat and List: the items readers see.
func (d *Driver) visible(ctx context.Context, its []item) ([]item, error) {
	staged := false
	for _, it := range its {
		if getS(it, attrTx) != "" {
			staged = true
			break
		}
	}
	if !staged {
		return its, nil
	}
	vs, err := d.view(ctx, its)
	if err != nil {
		return nil, err
	}
	out := its[:0:0]
	for _, v := range vs {
		if v.it != nil {
			out = append(out, v.it)
		}
	}
	return out, nil
}

// clashLive reports whether it counts as a live file in the clash checks of
// commit tx ("" for a one-write commit): its state, or, for a path staged
// by another commit not yet settled, either of its states, since that
// commit may go either way; this commit's own staged paths count as their
// new state, which is what its flip makes visible with the rest.
func clashLive(it item, tx string) bool {
	if it == nil {
		return false
	}
	if !getBool(it, "del") {
		return true
	}
	if id := getS(it, attrTx); id == "" || id == tx {
		return false
	}
	old := oldOf(it)
	return old != nil && !getBool(old, "del")
}

// notStagedByOther is the condition that an item is not staged by a commit
// other than tx (clash ConditionChecks on a tombstone).
func notStagedByOther(tx string) expression.ConditionBuilder {
	c := expression.AttributeNotExists(expression.Name(attrTx))
	if tx != "" {
		c = c.Or(expression.Name(attrTx).Equal(expression.Value(tx)))
	}
	return c
}

// checkCommits reports each commit of the live set that is decided but not
// settled (done: not rolled forward; aborted: not rolled back) or pending
// past the commit window, and with o.Repair settles it. A pending commit
// within its window is in flight: no problem.
func (d *Driver) checkCommits(ctx context.Context, o datastore.CheckOptions, add func(datastore.Problem)) error {
	live, err := d.getItem(ctx, d.liveKey())
	if err != nil {
		return err
	}
	now := time.Now()
	for _, id := range liveCommits(live) {
		st, started, err := d.txState(ctx, id)
		if err != nil {
			return err
		}
		what := map[string]string{
			"":  "a settled commit still in the live set",
			"d": "a commit made visible but not rolled forward (readers resolve it through its record)",
			"a": "an aborted commit not rolled back",
			"p": "a commit that was never made visible and is past the commit window",
		}[st]
		if st == "p" && now.Sub(started) <= d.window {
			continue
		}
		p := datastore.Problem{Object: fmt.Sprintf("dynamodb:%s/%s/o", d.table, d.txPK(id)), What: what, Fix: "settle it (roll forward, or back)"}
		if o.Repair {
			if err := d.settle(ctx, id, now); err != nil && !errors.Is(err, errInFlight) {
				return err
			}
			p.Repaired = true
		}
		add(p)
	}
	return nil
}
