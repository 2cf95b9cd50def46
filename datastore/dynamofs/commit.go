package dynamofs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// BeginUpload records the upload intent with one PutItem.
func (d *Driver) BeginUpload(ctx context.Context, s datastore.Staged) error {
	it := d.intentKey(s)
	it["path"] = str(s.Path)
	return d.classify(d.putItem(ctx, &dynamodb.PutItemInput{Item: it}), s.Path)
}

// PutChunk stores one chunk with one conditional PutItem that creates it
// only if it does not exist, so a chunk is written once (issue 26). A
// failed condition is read back, never called a conflict on its own: the
// same bytes are a retry (perhaps of this very write, applied before a
// timeout) and succeed; other bytes are a conflict.
func (d *Driver) PutChunk(ctx context.Context, version string, i int, data []byte) error {
	it := d.chunkKey(version, i)
	it["d"] = &types.AttributeValueMemberB{Value: data}
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(attrPK))).Build()
	if err != nil {
		return err
	}
	err = d.putItem(ctx, &dynamodb.PutItemInput{Item: it, ConditionExpression: cond.Condition(),
		ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values()})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return d.classify(err, version)
	}
	cur, gerr := d.GetChunk(ctx, version, i)
	switch {
	case gerr != nil:
		return fmt.Errorf("%w: chunk %d of version %s: its create failed its condition and the read back failed: %v", metastore.ErrUnavailable, i, version, gerr)
	case bytes.Equal(cur, data):
		return nil
	}
	return metastore.Conflict(fmt.Sprintf("chunk %d of version %s", i, version), datastore.ChunkReason)
}

// register adds partition to its registry shard (an atomic ADD to a string
// set) once per process, before its first change.
func (d *Driver) register(ctx context.Context, partition string) error {
	if _, ok := d.registered.Load(d.regKey(partition)); ok {
		return nil
	}
	u, err := expression.NewBuilder().WithUpdate(expression.Add(expression.Name("parts"), expression.Value(&types.AttributeValueMemberSS{Value: []string{partition}}))).Build()
	if err != nil {
		return err
	}
	if err := d.fault.Check(); err != nil { // whole.go
		return err
	}
	err = d.retry(ctx, func() error {
		out, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &d.table, Key: d.registryKey(shard(partition)),
			UpdateExpression: u.Update(), ExpressionAttributeNames: u.Names(), ExpressionAttributeValues: u.Values(), ReturnConsumedCapacity: total})
		if err == nil {
			d.meter.add("UpdateItem", 0, one(out.ConsumedCapacity)...)
			d.meter.count(&d.meter.s.ItemsWritten)
		}
		return err
	})
	if err != nil {
		return d.classify(err, partition)
	}
	d.registered.Store(d.regKey(partition), struct{}{})
	return nil
}

// regKey is partition's key in the registration cache, which every
// namespace of the table shares.
func (d *Driver) regKey(partition string) string { return d.ns + "\x00" + partition }

// role says why an item is in a commit's transaction, to explain a failed
// condition.
type role int

const (
	roleFence role = iota
	roleIntent
	roleRace // a path, head or counter another commit changed since the read
	roleOther
	roleLayout // the layout record's check (layoutcommit.go)
	roleRecord // a record written with the commit (recordwrite.go)
)

// maxCommitAttempts bounds how often a commit re-reads after losing a race
// to another commit of the same partition or shard.
const maxCommitAttempts = 100

// commitPatience is how long a commit keeps racing after maxCommitAttempts:
// on a busy machine a few big commits of one partition can each lose a
// hundred races in a row, and giving up then turns plain contention into
// an error; only a race lost for this long is reported.
const commitPatience = 20 * time.Second

// Commit applies entries in one TransactWriteItems, re-reading and trying
// again when another commit changed a path, head or counter it read.
func (d *Driver) Commit(ctx context.Context, fence *datastore.Fence, entries []datastore.Entry, now time.Time) ([]datastore.Info, error) {
	return d.commitIfLayout(ctx, fence, entries, now, nil)
}

// commitIfLayout is Commit, applied only if the layout record holds layout
// (if not nil: layoutcommit.go).
func (d *Driver) commitIfLayout(ctx context.Context, fence *datastore.Fence, entries []datastore.Entry, now time.Time, layout []byte) ([]datastore.Info, error) {
	parts := d.partsOf(entries)
	if len(entries) > d.maxCommit {
		if d.fitsOneTx(entries, parts) {
			// More entries than a worst case holds, but these fit in
			// one transaction: a commit of one write (issue 31), or,
			// if what the read finds does not fit after all, staged.
			out, err := d.commitOnceIfLayout(ctx, fence, entries, parts, now, "", layout)
			if !errors.Is(err, errTxTooBig) {
				return out, err
			}
		}
		// The registration of its partitions and the layout's check ride
		// in the staged commit's first write (stagebatch.go).
		return d.commitWhole(ctx, fence, entries, now, parts, layout) // whole.go
	}
	// A commit of one transaction registers its new partitions in it
	// (registry.go).
	return d.commitOnceIfLayout(ctx, fence, entries, parts, now, "", layout)
}

// partsOf returns the partitions of entries' paths, sorted, each once.
func (d *Driver) partsOf(entries []datastore.Entry) []string {
	var parts []string
	for _, e := range entries {
		parts = append(parts, d.partition(e.Path()))
	}
	slices.Sort(parts)
	return slices.Compact(parts)
}

// commitOnce applies entries in one TransactWriteItems, or, with tx set,
// stages them under commit tx (whole.go). A path staged by another commit
// is settled first: rolled forward or back if that commit is decided or
// dead, a conflict if it is in flight.
func (d *Driver) commitOnce(ctx context.Context, fence *datastore.Fence, entries []datastore.Entry, parts []string, now time.Time, tx string) ([]datastore.Info, error) {
	return d.commitOnceIfLayout(ctx, fence, entries, parts, now, tx, nil)
}

// commitOnceIfLayout is commitOnce, applied only if the layout record
// holds layout (if not nil: layoutcommit.go).
func (d *Driver) commitOnceIfLayout(ctx context.Context, fence *datastore.Fence, entries []datastore.Entry, parts []string, now time.Time, tx string, layout []byte) ([]datastore.Info, error) {
	begin := time.Now()
	rideRefused := false // a follower's commit refused: not carried again
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			forgetState(ctx) // predict.go: what failed may have been a guess
		}
		items, roles, out, move, err := d.buildCommit(ctx, fence, entries, parts, now, tx)
		if errors.Is(err, errClaimedFirst) && attempt < maxCommitAttempts {
			continue // claims.go
		}
		var st *stagedError
		if errors.As(err, &st) && attempt < maxCommitAttempts {
			if err := d.settle(ctx, st.tx, now); errors.Is(err, errInFlight) {
				return nil, metastore.Conflict(st.path, "another commit in flight stages this path")
			} else if err != nil {
				return nil, err
			}
			if err := d.rollBackOrphan(ctx, st.tx, st.path); err != nil { // whole.go
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(out) == 0 {
			// Nothing to change: still answer for the fence, as bolt does.
			if fence != nil {
				v, err := d.GetRecord(ctx, fence.Key)
				if err != nil && !errors.Is(err, metastore.ErrNotFound) {
					return nil, err
				}
				if err != nil || !bytes.Equal(v, fence.Token) {
					return nil, metastore.Conflict(fence.Key, datastore.FenceReason)
				}
			}
			return nil, d.checkLayoutRecord(ctx, layout) // layoutcommit.go
		}
		if items, roles, err = d.withLayoutCheck(ctx, items, roles, layout); err != nil { // layoutcommit.go
			return nil, err
		}
		var rec *datastore.RecordWrite
		if items, roles, rec, err = d.withRecordWrite(ctx, fence, tx, items, roles); err != nil { // recordwrite.go
			return nil, err
		}
		// The commit a follower plans over this one's result rides in
		// its transaction (datastore.CommitFollower: a sync's catalog
		// fold); refused only on its own conditions, this commit is sent
		// again without it.
		own := len(items)
		f, fr, moved := d.follow(ctx, fence, tx, out, move, items, roles, rideRefused)
		if fr != nil {
			items = append(items, fr.items...)
		}
		err = d.transact(ctx, items)
		if err == nil {
			if move != nil {
				d.seen.wrote(d.pfx, move.after) // predict.go
			}
			if tx == "" {
				d.moves.Record(d.pfx, out, move) // cursorover.go
			} else {
				d.moves.stage(tx, move)
			}
			noteStaged(ctx, tx, items) // stagebatch.go
			if rec != nil {
				rec.MarkWritten()
			}
			if fr != nil {
				for _, m := range moved {
					d.moves.Moved(d.pfx, m[0], m[1])
				}
				fr.carried()
				f.MarkCarried(fr.r)
			}
			return out, nil
		}
		failed, ok := failedIndexes(err)
		if !ok || len(failed) == 0 {
			return nil, d.classify(err, "")
		}
		if fr != nil && !slices.ContainsFunc(failed, func(i int) bool { return i < own }) {
			rideRefused = true
			continue
		}
		race := true
		for _, i := range failed {
			if i >= own {
				continue // a follower's item, with one of the commit's own: the commit's decides
			}
			switch roles[i] {
			case roleFence:
				return nil, metastore.Conflict(fence.Key, datastore.FenceReason)
			case roleIntent:
				return nil, fmt.Errorf("%w: an upload of this commit", datastore.ErrUploadExpired)
			case roleLayout:
				return nil, staleLayout(noteLayout(ctx, layout)) // stagebatch.go
			case roleRecord:
				rec.MarkRefused()
				return nil, metastore.Conflict(rec.Key, "record differs from expected")
			case roleOther:
				race = false
			}
		}
		if race {
			d.meter.count(&d.meter.s.CommitRaces)
		}
		if !race || (attempt >= maxCommitAttempts && time.Since(begin) > commitPatience) {
			return nil, fmt.Errorf("%w: commit kept losing races with other commits (%v)", metastore.ErrUnavailable, err)
		}
		sleep(ctx, time.Duration(rand.Int64N(int64(min(attempt, 20))*int64(2*time.Millisecond))))
	}
}

// buildCommit reads the current state of the commit's paths, heads and shard
// counters and returns the transaction that applies entries over it, the
// role of each item, the changes it makes (none: nothing to do) and what it
// does to the index (cursorover.go; nil if a head it moves is marked by a
// staged commit).
func (d *Driver) buildCommit(ctx context.Context, fence *datastore.Fence, entries []datastore.Entry, parts []string, now time.Time, tx string) ([]types.TransactWriteItem, []role, []datastore.Info, *indexMove, error) {
	keys := d.commitKeys(entries, parts)
	// One snapshot (snapshot.go): the heads vouch for the rest.
	vouch, rest := d.splitVouching(keys)
	cur, predicted := d.predictStaging(ctx, entries, keys) // predict.go
	if !predicted {
		cur, predicted = d.prefetched(ctx, keys) // prefetch.go: read by the commit before
	}
	if !predicted {
		// A later commit's keys, read in the same snapshot (prefetch.go).
		pf, later := d.prefetchToRead(ctx, len(vouch)+len(rest))
		got, err := d.snapshotRead(ctx, append(vouch, later...), rest)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if pf != nil {
			pf.keep(got)
		}
		cur = map[string]item{}
		for _, it := range got {
			cur[itemID(it)] = it
		}
	}
	lookup := func(k item) item { return cur[itemID(k)] }
	after := map[string]item{} // a staging transaction's writes, as they will be (predict.go)
	for _, e := range entries {
		if old := lookup(key(d.filePK(d.partition(e.Path())), e.Path())); getS(old, attrTx) != "" {
			return nil, nil, nil, nil, &stagedError{tx: getS(old, attrTx), path: e.Path()}
		}
	}

	var items []types.TransactWriteItem
	var roles []role
	add := func(r role, w types.TransactWriteItem) { items, roles = append(items, w), append(roles, r) }
	touched := map[string]bool{}
	for _, p := range parts {
		touched[p] = true
	}
	// Claims and guards of cross-partition clashes (claims.go): the
	// heads this commit writes besides those it changes.
	writes, err := d.crossPartition(ctx, entries, lookup, cur, tx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	guard := func(model string) {
		if writes[model] == nil {
			writes[model] = &headWrite{}
		}
	}
	checks, err := d.clashChecks(ctx, entries, touched, lookup, tx, guard) // clash.go
	if err != nil {
		return nil, nil, nil, nil, err
	}
	for _, c := range checks {
		add(roleRace, c)
	}
	if fence != nil {
		c, err := build(expression.NewBuilder().WithCondition(expression.Name("v").Equal(expression.Value(fence.Token))))
		if err != nil {
			return nil, nil, nil, nil, err
		}
		add(roleFence, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: &d.table, Key: recordKey(fence.Key),
			ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}})
	}
	seq := map[string]uint64{}
	byPos := map[string][]string{} // partition → its changed paths, by position (recentpaths.go)
	var out []datastore.Info
	var listed []datastore.Entry // staged: the entry list's (stagebatch.go)
	for _, e := range entries {
		path := e.Path()
		part := d.partition(path)
		old := lookup(key(d.filePK(part), path))
		if e.Put == nil && (old == nil || getBool(old, "del")) {
			continue
		}
		if _, ok := seq[part]; !ok {
			seq[part] = getN(lookup(d.headKey(part)), "seq")
		}
		seq[part]++
		byPos[part] = append(byPos[part], path)
		info := datastore.Info{Path: path, Partition: part, Pos: seq[part], Time: now}
		if e.Put != nil {
			s := e.Put
			info.Version, info.Size, info.Chunks, info.SHA256, info.Meta, info.Inline = s.Version, s.Size, s.Chunks, s.SHA256, s.Meta, s.Inline
			switch {
			case s.Chunks == 0:
				// Inline (or empty): no intent to release, the path
				// item written below is all of it.
			case tx != "":
				w, err := d.stageIntent(*s, tx) // whole.go
				if err != nil {
					return nil, nil, nil, nil, err
				}
				add(roleIntent, w)
			default:
				c, err := build(expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name(attrPK))))
				if err != nil {
					return nil, nil, nil, nil, err
				}
				add(roleIntent, types.TransactWriteItem{Delete: &types.Delete{TableName: &d.table, Key: d.intentKey(*s),
					ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names()}})
			}
		} else {
			info.Deleted = true
			if tx == "" { // a staged delete's tombstone is handed to Reclaim by its roll-forward
				t := d.tombKey(path, now)
				t["path"], t["p"] = str(path), num(info.Pos)
				add(roleOther, types.TransactWriteItem{Put: &types.Put{TableName: &d.table, Item: t}})
			}
		}
		if tx == "" && old != nil && !getBool(old, "del") && getN(old, "chunks") > 0 {
			ver := getS(old, "ver")
			g := d.garbageKey(ver, now)
			g["chunks"] = num(getN(old, "chunks"))
			add(roleOther, types.TransactWriteItem{Put: &types.Put{TableName: &d.table, Item: g}})
		}
		cond := expression.AttributeNotExists(expression.Name(attrPK))
		if old != nil {
			cond = expression.Name(attrPos).Equal(expression.Value(getN(old, attrPos)))
		}
		c, err := build(expression.NewBuilder().WithCondition(cond))
		if err != nil {
			return nil, nil, nil, nil, err
		}
		fi := d.fileItem(info)
		if tx != "" {
			fi = d.stagedItem(fi, old, tx) // whole.go
			listed = append(listed, e)
			after[itemID(fi)] = fi
		}
		add(roleRace, types.TransactWriteItem{Put: &types.Put{TableName: &d.table, Item: fi,
			ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}})
		out = append(out, info)
	}
	if len(out) == 0 {
		return nil, nil, nil, nil, nil
	}
	if len(listed) > 0 {
		add(roleOther, types.TransactWriteItem{Put: &types.Put{TableName: &d.table, Item: d.listBatchItem(tx, listed)}})
	}
	// Heads and counters: every changed partition moves its one index
	// entry (its head item) to the next position of its shard.
	counter := map[string]uint64{}
	for _, p := range parts {
		newSeq, changed := seq[p]
		if !changed {
			continue
		}
		sh := shard(p)
		if _, ok := counter[sh]; !ok {
			counter[sh] = getN(lookup(d.counterKey(sh)), "n")
		}
		counter[sh]++
		oldSeq := getN(lookup(d.headKey(p)), "seq")
		u := withPrev(expression.Set(expression.Name("seq"), expression.Value(newSeq)).
			Set(expression.Name(attrPos), expression.Value(counter[sh])), lookup(d.headKey(p))) // prevpos.go
		if tx == "" {
			u = withRecent(u, lookup(d.headKey(p)), newSeq, byPos[p]) // recentpaths.go
		} else {
			// The head remembers the commit's first position here, so
			// that Head stops below it until the commit is decided.
			m := expression.Name(headMark(tx))
			u = u.Set(m, expression.IfNotExists(m, expression.Value(oldSeq+1)))
			var claims []string
			if writes[p] != nil {
				claims = writes[p].claims
			}
			after[itemID(d.headKey(p))] = headAfter(d.headKey(p), lookup(d.headKey(p)),
				headMoved(lookup(d.headKey(p)), map[string]types.AttributeValue{"seq": num(newSeq), attrPos: num(counter[sh])}), headMark(tx), oldSeq+1, claims, false)
		}
		w, err := d.headUpdate(d.headKey(p), lookup(d.headKey(p)), u, writes[p]) // claims.go
		if err != nil {
			return nil, nil, nil, nil, err
		}
		delete(writes, p)
		add(roleRace, w)
	}
	move := newIndexMove(d, parts, seq, counter, lookup, tx) // cursorover.go
	var claims []types.TransactWriteItem
	for _, p := range slices.Sorted(maps.Keys(writes)) {
		h, hw := lookup(d.headKey(p)), writes[p]
		if h != nil || hw.bump || len(hw.claims) > 0 { // else only ConditionChecked absent (guardUpdate)
			after[itemID(d.headKey(p))] = headAfter(d.headKey(p), h, nil, "", 0, hw.claims, true)
		}
		w, err := d.guardUpdate(d.headKey(p), h, hw)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if len(writes[p].claims) > 0 {
			claims = append(claims, w)
		}
		add(roleRace, w)
	}
	for _, sh := range slices.Sorted(maps.Keys(counter)) {
		oldN := getN(lookup(d.counterKey(sh)), "n")
		w, err := d.casUpdate(d.counterKey(sh), "n", oldN, expression.Set(expression.Name("n"), expression.Value(counter[sh])))
		if err != nil {
			return nil, nil, nil, nil, err
		}
		add(roleRace, w)
		c := d.counterKey(sh)
		c["n"] = num(counter[sh])
		after[itemID(c)] = c
	}
	if tx == "" {
		regs, err := d.registerInCommit(ctx, parts, seq, lookup, len(items)) // registry.go
		if err != nil {
			return nil, nil, nil, nil, err
		}
		for _, w := range regs {
			add(roleRace, w)
		}
	}
	if len(items) > maxTxItems && len(claims) > 0 {
		// The claims do not fit beside the commit: make them first, on
		// their own (a claim alone is as safe: claims.go), then build the
		// commit again, which finds them.
		if err := d.claimFirst(ctx, claims); err != nil {
			return nil, nil, nil, nil, err
		}
		return nil, nil, nil, nil, errClaimedFirst
	}
	if tx != "" {
		noteBuilt(ctx, keys, cur, after) // predict.go
	}
	items, roles = withFirst(ctx, tx, items, roles) // stagebatch.go: a staged commit's record, with its first batch
	if tooBig(items) {
		// stagebatch.go: stageAll halves the batch; a commit of one
		// write is staged instead (commitIfLayout).
		return nil, nil, nil, nil, errTxTooBig
	}
	return items, roles, out, move, nil
}

// commitKeys are the items a commit of entries (in partitions parts)
// reads: their file items, their partitions' heads and shard counters, and
// what the clash checks and directory claims read.
func (d *Driver) commitKeys(entries []datastore.Entry, parts []string) []item {
	shards := map[string]bool{}
	var keys []item
	for _, e := range entries {
		keys = append(keys, key(d.filePK(d.partition(e.Path())), e.Path()))
	}
	for _, p := range parts {
		keys = append(keys, d.headKey(p))
		if !shards[shard(p)] {
			shards[shard(p)] = true
			keys = append(keys, d.counterKey(shard(p)))
		}
	}
	keys = append(keys, d.clashKeys(entries)...) // clash.go
	keys = append(keys, d.claimKeys(entries)...) // claims.go
	return keys
}

// casUpdate is an Update of k applying u only if attribute name still holds
// old (or, for zero, is absent).
func (d *Driver) casUpdate(k item, name string, old uint64, u expression.UpdateBuilder) (types.TransactWriteItem, error) {
	cond := expression.AttributeNotExists(expression.Name(name))
	if old != 0 {
		cond = expression.Name(name).Equal(expression.Value(old))
	}
	e, err := build(expression.NewBuilder().WithCondition(cond).WithUpdate(u))
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Update: &types.Update{TableName: &d.table, Key: k, UpdateExpression: e.Update(),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}}, nil
}

func build(b expression.Builder) (expression.Expression, error) {
	e, err := b.Build()
	if err != nil {
		return e, fmt.Errorf("lake: build expression: %w", err)
	}
	return e, nil
}

// HasIntent implements datastore.IntentChecker with one strongly
// consistent GetItem of the intent's item.
func (d *Driver) HasIntent(ctx context.Context, version string, started time.Time) (bool, error) {
	it, err := d.getItem(ctx, d.intentKey(datastore.Staged{Version: version, Started: started}))
	if err != nil {
		return false, err
	}
	return it != nil, nil
}

var _ datastore.IntentChecker = (*Driver)(nil)

// follow returns the commit ctx's follower plans over this one's result
// (out, whose index move is move), prepared to ride in its transaction
// (items), and the cursor moves its answers made (to remember once the
// transaction applied); nil unless the commit is a fenced one of one
// transaction whose move is known, and the rider fits.
func (d *Driver) follow(ctx context.Context, fence *datastore.Fence, tx string, out []datastore.Info, move *indexMove, items []types.TransactWriteItem, roles []role, refused bool) (*datastore.CommitFollower, *ride, [][2][]byte) {
	f := datastore.CommitFollowerOf(ctx)
	if f == nil || refused || fence == nil || tx != "" || move == nil {
		return nil, nil, nil
	}
	var moved [][2][]byte
	r := f.Follow(out, func(pos []byte) ([]datastore.Head, []byte, bool) {
		heads, next, ok := d.overMove(pos, move)
		if ok {
			moved = append(moved, [2][]byte{pos, next})
		}
		return heads, next, ok
	})
	var base []types.TransactWriteItem // the fence's check not counted, as prepareRideOf asks
	for i, it := range items {
		if roles[i] != roleFence {
			base = append(base, it)
		}
	}
	fr := d.prepareRideOf(ctx, r, fence, base)
	if fr == nil {
		return nil, nil, nil
	}
	return f, fr, moved
}
