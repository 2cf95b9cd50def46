package dynamofs

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// Reclaim walks the reclaim shards: expired intents, replaced versions past
// the grace period, tombstones past the horizon. Each kind is a range of
// sort keys ordered by time, so it reads only what is due, and only in the
// shards where the due mark (duemark.go, read with the live commits) says
// something can be due.
func (d *Driver) Reclaim(ctx context.Context, now time.Time, o datastore.ReclaimOptions) (datastore.ReclaimStats, error) {
	var st datastore.ReclaimStats
	// Commits of any size left unsettled (whole.go) first: done ones roll
	// forward, dead ones back, before their uploads' intents are looked at.
	got, err := d.batchGet(ctx, []item{d.liveKey(), d.dueMarkKey()})
	if err != nil {
		return st, err
	}
	var live, markItem item
	for _, it := range got {
		switch getS(it, attrSK) { // as feed.go tells the live item from the counters
		case "live":
			live = it
		case "due":
			markItem = it
		}
	}
	if err := d.settleLive(ctx, liveCommits(live), now); err != nil {
		return st, err
	}
	stamp := readStamp(now)
	mark := parseDueMark(markItem, time.Now().UnixMilli())
	var due []dueTomb // the tombstones past the horizon, purged after the walk
	kinds := []struct {
		kind  string
		grace time.Duration
		fn    func(pk string, it item) (bool, error)
	}{
		{"i#", o.UploadGrace, func(pk string, it item) (bool, error) {
			// The intent goes first, conditionally: a commit that consumes
			// it at the same time wins or loses as a whole.
			// An intent a staged commit holds (tx) is that commit's to
			// settle, never an expired upload's.
			c, err := build(expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name(attrPK)).
				And(expression.AttributeNotExists(expression.Name(attrTx)))))
			if err != nil {
				return false, err
			}
			err = d.transact(ctx, []types.TransactWriteItem{{Delete: &types.Delete{TableName: &d.table, Key: key(pk, getS(it, attrSK)),
				ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names()}}})
			if idx, ok := failedIndexes(err); ok && len(idx) > 0 {
				// Committed meanwhile, or held by a staged commit: kept
				// in the due mark, so that the next reclaim looks again.
				return true, nil
			}
			if err != nil {
				return false, d.classify(err, "")
			}
			n, err := d.deleteAllChunks(ctx, versionOf(getS(it, attrSK)))
			st.Uploads++
			st.Chunks += n
			return false, err
		}},
		{"g#", o.Grace, func(pk string, it item) (bool, error) {
			ver := versionOf(getS(it, attrSK))
			n := int(getN(it, "chunks"))
			keys := []item{key(pk, getS(it, attrSK))}
			for i := range n {
				keys = append(keys, d.chunkKey(ver, i))
			}
			st.Versions++
			st.Chunks += n
			return false, d.batchDelete(ctx, keys)
		}},
		{"t#", o.Horizon, func(pk string, it item) (bool, error) {
			// Purged after the walk, those of one partition together
			// (purgeTombstones): an entry left by a failure is read
			// again, since the mark is written only after them.
			due = append(due, dueTomb{entry: key(pk, getS(it, attrSK)), path: getS(it, "path"), pos: getN(it, "p")})
			return false, nil
		}},
	}
	read := false
	for _, sh := range shardNames() {
		pk := d.reclaimPK(sh)
		for _, k := range kinds {
			end := now.Add(-k.grace).UnixMilli()
			if !mark.need(k.kind, sh, end) {
				continue
			}
			earliest, left, err := d.due(ctx, pk, k.kind, end, func(it item) (bool, error) { return k.fn(pk, it) })
			if err != nil {
				return st, err
			}
			mark.saw(k.kind, sh, stamp, earliest, left)
			read = true
		}
	}
	purged, err := d.purgeTombstones(ctx, due)
	st.Tombstones += purged
	if err != nil {
		return st, err
	}
	if read {
		if err := d.putDueMark(ctx, mark); err != nil {
			return st, err
		}
	}
	return st, nil
}

// versionOf returns the version at the end of a reclaim sort key KIND#MS#VERSION.
func versionOf(sk string) string { return sk[len("i#")+13+1:] }

func (d *Driver) deleteAllChunks(ctx context.Context, version string) (int, error) {
	kc := expression.Key(attrPK).Equal(expression.Value(d.chunkPK(version)))
	e, err := build(expression.NewBuilder().WithKeyCondition(kc).WithProjection(expression.NamesList(expression.Name(attrPK), expression.Name(attrSK))))
	if err != nil {
		return 0, err
	}
	in := &dynamodb.QueryInput{KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(),
		ExpressionAttributeValues: e.Values(), ProjectionExpression: e.Projection()}
	var keys []item
	for {
		page, err := d.query(ctx, in)
		if err != nil {
			return 0, err
		}
		keys = append(keys, page.Items...)
		if page.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	return len(keys), d.batchDelete(ctx, keys)
}

// dueTomb is a tombstone past the horizon: its reclaim entry (t#…), its
// path and its position.
type dueTomb struct {
	entry item
	path  string
	pos   uint64
}

// tombsPerTx is the most tombstones one purge transaction carries: two
// items each (the tombstone, its reclaim entry) and the head's floor.
const tombsPerTx = 45

// purgeTombstones purges due, those of one partition in one transaction
// (issue 31: the catalog's reclaim in the seed's loop of ten workers
// purged each removed row's tombstone with a GetItem of its head, a
// transaction and a BatchWriteItem, 1.5 requests a sync): the heads of
// their partitions in one BatchGetItem, then per partition the tombstones'
// deletes, each conditioned on its position and on being a tombstone, their
// reclaim entries' deletes and the floor raised to the highest position,
// under a condition on the floor read. A tombstone replaced since (a path
// put again) fails its transaction: that partition's are purged one by
// one, as before, and the rest stand. It returns the tombstones purged.
func (d *Driver) purgeTombstones(ctx context.Context, due []dueTomb) (int, error) {
	if len(due) == 0 {
		return 0, nil
	}
	var order []string
	byPart := map[string][]dueTomb{}
	for _, t := range due {
		part := d.partition(t.path)
		if _, ok := byPart[part]; !ok {
			order = append(order, part)
		}
		byPart[part] = append(byPart[part], t)
	}
	keys := make([]item, len(order))
	for i, part := range order {
		keys[i] = d.headKey(part)
	}
	got, err := d.batchGet(ctx, keys)
	if err != nil {
		return 0, err
	}
	floors := map[string]uint64{} // by partition: a head's sort key is its partition
	for _, it := range got {
		floors[getS(it, attrSK)] = getN(it, "floor")
	}
	purged := 0
	for _, part := range order {
		ts := byPart[part]
		for len(ts) > 0 {
			n := min(len(ts), tombsPerTx)
			k, floor, err := d.purgeTogether(ctx, part, floors[part], ts[:n])
			purged += k
			floors[part] = floor
			if err != nil {
				return purged, err
			}
			ts = ts[n:]
		}
	}
	return purged, nil
}

// purgeTogether purges ts, tombstones of part, in one transaction over the
// floor read (floor), or, if one of them was replaced since, one by one. It
// returns the tombstones purged and the floor as it left it.
func (d *Driver) purgeTogether(ctx context.Context, part string, floor uint64, ts []dueTomb) (int, uint64, error) {
	// A path's latest tombstone alone is its item; an older entry of the
	// same path only goes (its purge would find another position).
	latest := map[string]uint64{}
	var top uint64
	for _, t := range ts {
		latest[t.path] = max(latest[t.path], t.pos)
		top = max(top, t.pos)
	}
	for attempt := 0; attempt < maxCommitAttempts; attempt++ {
		var items []types.TransactWriteItem
		for _, t := range ts {
			if latest[t.path] == t.pos {
				del, err := build(expression.NewBuilder().WithCondition(expression.Name(attrPos).Equal(expression.Value(t.pos)).
					And(expression.Name("del").Equal(expression.Value(true)))))
				if err != nil {
					return 0, floor, err
				}
				items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: &d.table, Key: key(d.filePK(part), t.path),
					ConditionExpression: del.Condition(), ExpressionAttributeNames: del.Names(), ExpressionAttributeValues: del.Values()}})
			}
			items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: &d.table, Key: t.entry}})
		}
		floorAt := -1
		if top > floor {
			w, err := d.casUpdate(d.headKey(part), "floor", floor, expression.Set(expression.Name("floor"), expression.Value(top)))
			if err != nil {
				return 0, floor, err
			}
			floorAt = len(items)
			items = append(items, w)
		}
		err := d.transact(ctx, items)
		idx, ok := failedIndexes(err)
		switch {
		case err == nil:
			return len(latest), max(floor, top), nil
		case ok && len(idx) > 0 && idx[0] == floorAt:
			// The floor moved: read it again.
			h, err := d.getItem(ctx, d.headKey(part))
			if err != nil {
				return 0, floor, err
			}
			floor = getN(h, "floor")
			continue
		case ok && len(idx) > 0:
			// One of them was replaced: one by one, each reading the
			// floor it raises.
			n, err := d.purgeEach(ctx, ts)
			return n, 0, err
		default:
			return 0, floor, d.classify(err, part)
		}
	}
	return 0, floor, errors.New("lake: tombstone purge kept racing the floor")
}

// purgeEach purges ts one by one (purgeTombstone) and deletes their
// reclaim entries.
func (d *Driver) purgeEach(ctx context.Context, ts []dueTomb) (int, error) {
	purged := 0
	entries := make([]item, 0, len(ts))
	for _, t := range ts {
		ok, err := d.purgeTombstone(ctx, t.path, t.pos)
		if err != nil {
			return purged, err
		}
		if ok {
			purged++
		}
		entries = append(entries, t.entry)
	}
	return purged, d.batchDelete(ctx, entries)
}

// purgeTombstone deletes path's tombstone at pos, if it is still the path's
// state, and raises the partition's floor to pos, in one transaction.
func (d *Driver) purgeTombstone(ctx context.Context, path string, pos uint64) (bool, error) {
	part := d.partition(path)
	for attempt := 0; attempt < maxCommitAttempts; attempt++ {
		h, err := d.Head(ctx, part)
		if err != nil {
			return false, err
		}
		del, err := build(expression.NewBuilder().WithCondition(expression.Name(attrPos).Equal(expression.Value(pos)).
			And(expression.Name("del").Equal(expression.Value(true)))))
		if err != nil {
			return false, err
		}
		items := []types.TransactWriteItem{{Delete: &types.Delete{TableName: &d.table, Key: key(d.filePK(part), path),
			ConditionExpression: del.Condition(), ExpressionAttributeNames: del.Names(), ExpressionAttributeValues: del.Values()}}}
		if pos > h.Floor {
			w, err := d.casUpdate(d.headKey(part), "floor", h.Floor, expression.Set(expression.Name("floor"), expression.Value(pos)))
			if err != nil {
				return false, err
			}
			items = append(items, w)
		}
		err = d.transact(ctx, items)
		idx, ok := failedIndexes(err)
		switch {
		case err == nil:
			return true, nil
		case ok && len(idx) > 0 && idx[0] == 0:
			return false, nil // the path changed since: nothing to purge
		case ok && len(idx) > 0:
			continue // the floor moved: read it again
		default:
			return false, d.classify(err, path)
		}
	}
	return false, errors.New("lake: tombstone purge kept racing the floor")
}

var _ = metastore.ErrNotFound
