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
			purged, err := d.purgeTombstone(ctx, getS(it, "path"), getN(it, "p"))
			if err != nil {
				return false, err
			}
			if purged {
				st.Tombstones++
			}
			return false, d.batchDelete(ctx, []item{key(pk, getS(it, attrSK))})
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
