package dynamofs

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// Head reads a partition's head with one strongly consistent GetItem.
func (d *Driver) Head(ctx context.Context, partition string) (datastore.Head, error) {
	it, err := d.getItem(ctx, d.headKey(partition))
	if err != nil {
		return datastore.Head{}, err
	}
	seq, err := d.decidedSeq(ctx, it) // whole.go
	if err != nil {
		return datastore.Head{}, err
	}
	return datastore.Head{Partition: partition, Seq: seq, Floor: getN(it, "floor")}, nil
}

// Changes reads the head, then queries bypos for (after, seq]
// (ChangesUpTo).
func (d *Driver) Changes(ctx context.Context, partition string, after uint64, limit int) ([]datastore.Info, uint64, error) {
	h, err := d.Head(ctx, partition)
	if err != nil {
		return nil, 0, err
	}
	if after < h.Floor {
		return nil, 0, fmt.Errorf("%w: partition %q position %d, floor %d", datastore.ErrHorizon, partition, after, h.Floor)
	}
	if after > h.Seq {
		return nil, 0, fmt.Errorf("%w: position %d is beyond partition %q's head %d", metastore.ErrInvalidArgument, after, partition, h.Seq)
	}
	return d.ChangesUpTo(ctx, partition, after, h.Seq, limit)
}

var _ datastore.HeadFeeder = (*Driver)(nil)

// ChangesUpTo implements datastore.HeadFeeder: Changes's query of bypos
// for (after, upTo], upTo being a head the caller read.
func (d *Driver) ChangesUpTo(ctx context.Context, partition string, after, upTo uint64, limit int) ([]datastore.Info, uint64, error) {
	if after >= upTo {
		return nil, upTo, nil
	}
	kc := expression.Key(attrPK).Equal(expression.Value(d.filePK(partition))).
		And(expression.Key(attrPos).Between(expression.Value(after+1), expression.Value(upTo)))
	e, err := build(expression.NewBuilder().WithKeyCondition(kc))
	if err != nil {
		return nil, 0, err
	}
	in := &dynamodb.QueryInput{IndexName: strp(indexByPos), KeyConditionExpression: e.KeyCondition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), Limit: aws32(limit)}
	var out []datastore.Info
	for {
		page, err := d.query(ctx, in)
		if err != nil {
			return nil, 0, err
		}
		vs, err := d.view(ctx, page.Items) // whole.go
		if err != nil {
			return nil, 0, err
		}
		for i, v := range vs {
			if v.pending {
				// A change not yet decided: stop right before it, so
				// that no puller moves past its position.
				return out, getN(page.Items[i], attrPos) - 1, nil
			}
			if v.it == nil {
				continue // a new path of an aborted commit
			}
			info := fileInfo(v.it)
			info.Pos = getN(page.Items[i], attrPos)
			out = append(out, info)
		}
		if len(out) >= limit {
			return out[:limit], out[limit-1].Pos, nil
		}
		if page.LastEvaluatedKey == nil {
			return out, upTo, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
		in.Limit = aws32(limit - len(out))
	}
}

// Floors implements datastore.HeadFeeder: the partitions' heads in
// BatchGetItems (one for up to 100).
func (d *Driver) Floors(ctx context.Context, partitions []string) (map[string]uint64, error) {
	keys := make([]item, len(partitions))
	for i, p := range partitions {
		keys[i] = d.headKey(p)
	}
	got, err := d.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64, len(partitions))
	for _, it := range got {
		out[getS(it, attrSK)] = getN(it, "floor")
	}
	return out, nil
}

func strp(s string) *string { return &s }

func shardNames() []string {
	out := make([]string, Shards)
	for i := range out {
		out[i] = fmt.Sprintf("%02d", i)
	}
	return out
}

// Partitions reads the registry shards in one BatchGetItem.
func (d *Driver) Partitions(ctx context.Context) ([]string, error) {
	var keys []item
	for _, sh := range shardNames() {
		keys = append(keys, d.registryKey(sh))
	}
	got, err := d.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, it := range got {
		if ss, ok := it["parts"].(*types.AttributeValueMemberSS); ok {
			out = append(out, ss.Value...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ChangedPartitions reads the shard counters in one BatchGetItem and queries
// the index of each shard whose counter moved past the cursor.
func (d *Driver) ChangedPartitions(ctx context.Context, cursor []byte) ([]datastore.Head, []byte, error) {
	var at [Shards]uint64
	if cursor != nil {
		if len(cursor) != 8*Shards {
			return nil, nil, fmt.Errorf("%w: not a dynamodb feed cursor", metastore.ErrInvalidCursor)
		}
		for i := range at {
			at[i] = binary.BigEndian.Uint64(cursor[8*i:])
		}
	}
	names := shardNames()
	var keys []item
	for _, sh := range names {
		keys = append(keys, d.counterKey(sh))
	}
	keys = append(keys, d.liveKey()) // whole.go
	// A read-ahead of this sync may hold them (readahead.go).
	got, known, ahead := d.aheadFeed(ctx, keys)
	var err error
	if !ahead {
		// A BatchGetItem, not a snapshot (snapshot.go): each counter
		// read alone is serializable with the transactions, and one
		// that shows a commit's move shows a committed commit, whose
		// index entries the Queries below, made after it, read. A
		// TransactGetItems of the 16 counters would be refused by
		// every commit in flight in any shard.
		if got, err = d.batchGet(ctx, keys); err != nil {
			return nil, nil, err
		}
	}
	for _, it := range got {
		if ids := liveCommits(it); getS(it, attrSK) == "live" && len(ids) > 0 {
			// Commits flipped but maybe not rolled forward: roll them
			// forward first, which moves their partitions' index
			// entries, so that no changed partition goes unreported.
			if err := d.settleLive(ctx, ids, time.Now()); err != nil {
				return nil, nil, err
			}
			if got, err = d.batchGet(ctx, keys); err != nil {
				return nil, nil, err
			}
			known = nil // read before the settle moved heads
			break
		}
	}
	var now [Shards]uint64
	for _, it := range got {
		if getS(it, attrSK) == "live" {
			continue
		}
		var i int
		fmt.Sscanf(strings.TrimPrefix(getS(it, attrPK), d.pfx), "n#%02d", &i)
		now[i] = getN(it, "n")
	}
	var heads []datastore.Head
	next := make([]byte, 0, 8*Shards)
	for i, sh := range names {
		if now[i] < at[i] {
			return nil, nil, fmt.Errorf("%w: feed cursor is beyond shard %s's index", metastore.ErrInvalidCursor, sh)
		}
		next = binary.BigEndian.AppendUint64(next, now[i])
		if now[i] == at[i] {
			continue
		}
		if its, ok := d.knownFill(known, sh, at[i], now[i]); ok {
			if heads, err = d.appendHeads(ctx, heads, its); err != nil {
				return nil, nil, err
			}
			d.meter.count(&d.meter.s.ShardsKnown)
			continue
		}
		kc := expression.Key(attrPK).Equal(expression.Value(d.headPK(sh))).
			And(expression.Key(attrPos).Between(expression.Value(at[i]+1), expression.Value(now[i])))
		e, err := build(expression.NewBuilder().WithKeyCondition(kc))
		if err != nil {
			return nil, nil, err
		}
		in := &dynamodb.QueryInput{IndexName: strp(indexByPos), KeyConditionExpression: e.KeyCondition(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}
		for {
			page, err := d.query(ctx, in)
			if err != nil {
				return nil, nil, err
			}
			if heads, err = d.appendHeads(ctx, heads, page.Items); err != nil {
				return nil, nil, err
			}
			if page.LastEvaluatedKey == nil {
				break
			}
			in.ExclusiveStartKey = page.LastEvaluatedKey
		}
	}
	d.moves.Read(d.pfx, next) // cursorover.go
	d.seen.read(d.pfx, now)   // predict.go
	return heads, next, nil
}

// appendHeads appends the heads of index entries its (head items) to
// heads, each at its decided position (whole.go).
func (d *Driver) appendHeads(ctx context.Context, heads []datastore.Head, its []item) ([]datastore.Head, error) {
	for _, it := range its {
		seq, err := d.decidedSeq(ctx, it)
		if err != nil {
			return nil, err
		}
		heads = append(heads, datastore.Head{Partition: getS(it, attrSK), Seq: seq, Floor: getN(it, "floor")})
		d.offerRecent(it, seq) // for the feed read that follows (recentpaths.go)
	}
	return heads, nil
}

// knownFill returns the known heads (read with the counters, in one
// request: datastore.WithKnownPartitions) whose index position lies in
// shard sh's window (at, now], if they hold every position of it: then no
// other partition moved in sh since at, and the Query of the window would
// return exactly them (a commit takes each position of a shard's counter
// for one head, in the transaction that moves the counter; a head read
// before a later commit of its partition shows an earlier position, which
// leaves the window unfilled and the shard queried). A head in the window
// accounts for the earlier positions it remembers there too (prevpos.go):
// its feed, read up to the head, holds those moves' changes as well. ok
// false: query.
func (d *Driver) knownFill(known []item, sh string, at, now uint64) ([]item, bool) {
	if len(known) == 0 || now-at > uint64(len(known)*(1+prevPositions)) {
		return nil, false
	}
	pk := d.headPK(sh)
	var out []item
	seen := map[uint64]bool{}
	for _, it := range known {
		pos := getN(it, attrPos)
		if getS(it, attrPK) != pk || pos <= at || pos > now || seen[pos] {
			continue
		}
		seen[pos] = true
		out = append(out, it)
	}
	for _, it := range out {
		for _, p := range prevOf(it) {
			if p > at && p < getN(it, attrPos) {
				seen[p] = true
			}
		}
	}
	if uint64(len(seen)) != now-at {
		return nil, false
	}
	return out, true
}
