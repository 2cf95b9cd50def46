package dynamofs

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
)

// A path is a file or a directory, never both (datastore.Clash). A commit
// checks it for each put p, in the same transaction as everything else:
//
//   - The directories above p in p's own partition are read with the
//     commit's other items (one snapshot read, snapshot.go) and the files below p in it
//     with one Query (only when p is not already a live file); both are
//     vouched for by the partition head's CAS, which every commit that
//     changes the partition makes: a commit that landed in between fails it
//     and this one re-reads.
//   - A model's own directory data/T/I (its file item is in the partition
//     "data") is read too, and ConditionChecked (absent or a tombstone) in
//     the transaction. Only commits of that one model check that item, and
//     they already contend on the model's head, so no unrelated writer is
//     serialized by it.
//   - A put of the file data/T/I itself Queries the partition T/I for a
//     live file and guards T/I's head (claims.go: seq and guard as read).
//   - data and data/T (files at the top of the model tree, above many
//     partitions) are read, and a put of one of them Queries the registered
//     partitions below it, without a ConditionCheck on them (that item
//     would be in every commit of every model).
//   - Every other clash across partitions, and these races, are refused
//     atomically by directory claims (claims.go): a model's first commit
//     claims the partitions its directories fall in, and a put in a
//     claimed partition Queries the claiming models below it and bumps
//     their heads' guard, which every commit's head CAS conditions on.
//
// Cost per put: the directories above it in the snapshot read the commit
// makes anyway, one Query for a new file, and at most one ConditionCheck.
// A put of a deeper model's directory Queries that model only when its
// head (read in the same snapshot) says it may hold files
// (mayHoldFiles, clashbatch.go).

// ChecksClashes reports that Commit refuses file/directory clashes (the
// conformance suite's FileOrDirectory).
func (d *Driver) ChecksClashes() bool { return true }

// modelDirOf returns the model whose own directory a put of p would be
// made a file of, if p can be one: data/T/I under either layout, and under
// LayoutModels also data/T1/T2/I and data/T1/T2/T3/I (paths shorter than
// a data file, n <= 4 segments below data/, which is where a deeper
// model's directory falls; a data file or a definition is taken for what
// it is, and a model below it is not looked for: see the doc above).
func (d *Driver) modelDirOf(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, datastore.ModelPrefix)
	if !ok {
		return "", false
	}
	n := strings.Count(rest, "/") + 1
	if n == 2 || (d.layout != datastore.LayoutTypeID && n <= 4 && !strings.HasSuffix(rest, "/"+datastore.DefinitionFile)) {
		return rest, n >= 2
	}
	return "", false
}

// clashKeys returns the items a commit of entries reads for its clash
// checks: the file items of the directories above its puts (those not in
// the commit themselves) and the heads of the models whose directory it
// puts as a file.
func (d *Driver) clashKeys(entries []datastore.Entry) []item {
	if datastore.FlatScope(d.ns) {
		return nil // no path there is another's directory
	}
	in, parts := map[string]bool{}, map[string]bool{}
	for _, e := range entries {
		in[e.Path()] = true
		parts[d.partition(e.Path())] = true
	}
	seen := map[string]bool{}
	var keys []item
	for _, e := range entries {
		if e.Put == nil {
			continue
		}
		for _, a := range datastore.Ancestors(e.Put.Path) {
			if !in[a] && !seen[a] {
				seen[a] = true
				keys = append(keys, key(d.filePK(d.partition(a)), a))
			}
		}
		if model, ok := d.modelDirOf(e.Put.Path); ok {
			if !parts[model] && !seen["\x00"+model] {
				seen["\x00"+model] = true // its head is read with the commit's own otherwise
				keys = append(keys, d.headKey(model))
			}
		}
	}
	return keys
}

// clashChecks returns the Clash of a put of entries with the state read
// (lookup), or the ConditionChecks that keep that state true until the
// transaction (touched: the partitions whose heads the commit CASes).
func (d *Driver) clashChecks(ctx context.Context, entries []datastore.Entry, touched map[string]bool, lookup func(item) item, tx string, guard func(model string)) ([]types.TransactWriteItem, error) {
	if datastore.FlatScope(d.ns) {
		return nil, nil // no path there is another's directory
	}
	in := map[string]bool{}
	for _, e := range entries {
		in[e.Path()] = true
	}
	live := func(it item) bool { return clashLive(it, tx) } // whole.go
	batch := newBelowCache(d, entries, lookup)              // clashbatch.go
	checked := map[string]bool{}
	var checks []types.TransactWriteItem
	for _, e := range entries {
		if e.Put == nil {
			continue
		}
		p, part := e.Put.Path, d.partition(e.Put.Path)
		for _, a := range datastore.Ancestors(p) {
			if in[a] {
				continue
			}
			k := key(d.filePK(d.partition(a)), a)
			if live(lookup(k)) {
				return nil, datastore.Clash(p, a)
			}
			if d.partition(a) != part && a == datastore.ModelPrefix+part && !checked[a] {
				checked[a] = true
				c, err := build(expression.NewBuilder().WithCondition(
					expression.AttributeNotExists(expression.Name(attrPK)).Or(expression.Name("del").Equal(expression.Value(true)).And(notStagedByOther(tx)))))
				if err != nil {
					return nil, err
				}
				checks = append(checks, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: &d.table, Key: k,
					ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}})
			}
		}
		if live(lookup(key(d.filePK(part), p))) {
			continue // a file already: nothing is below it
		}
		if below, err := d.liveBelowBatched(ctx, batch, d.filePK(part), p+"/", in, tx); err != nil {
			return nil, err
		} else if below != "" {
			return nil, datastore.Clash(p, below)
		}
		model, isDir := d.modelDirOf(p)
		switch {
		case isDir && model != part:
			if mayHoldFiles(lookup(d.headKey(model))) { // clashbatch.go
				if below, err := d.liveBelow(ctx, d.filePK(model), "", in, tx); err != nil {
					return nil, err
				} else if below != "" {
					return nil, datastore.Clash(p, below)
				}
			}
			if !touched[model] {
				guard(model) // claims.go: seq and guard as read, guard bumped
			}
		case p == "data" || (strings.HasPrefix(p, datastore.ModelPrefix) && strings.Count(p, "/") == 1):
			if below, err := d.liveInModels(ctx, strings.TrimPrefix(strings.TrimPrefix(p, "data"), "/"), in, tx); err != nil {
				return nil, err
			} else if below != "" {
				return nil, datastore.Clash(p, below)
			}
		}
	}
	return checks, nil
}

// maxBelowPages bounds the pages liveBelow reads (tombstones only: a page
// with a live file ends it); Reclaim purges tombstones past the horizon.
const maxBelowPages = 1000

// liveBelow returns a live file of the item collection pk whose path
// starts with prefix ("" for any) and is not in gone (the commit's own
// deletes), or "" if there is none. A path staged by a commit other than tx
// counts as live if either of its states is (clashLive).
func (d *Driver) liveBelow(ctx context.Context, pk, prefix string, gone map[string]bool, tx string) (string, error) {
	e, err := belowQuery(pk, prefix)
	if err != nil {
		return "", err
	}
	var start item
	for range maxBelowPages {
		out, err := d.query(ctx, &dynamodb.QueryInput{KeyConditionExpression: e.KeyCondition(), FilterExpression: e.Filter(),
			ProjectionExpression: e.Projection(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
			ExclusiveStartKey: start, Limit: aws32(100)})
		if err != nil {
			return "", err
		}
		for _, it := range out.Items {
			if p := getS(it, attrSK); !gone[p] && clashLive(it, tx) {
				return p, nil
			}
		}
		if out.LastEvaluatedKey == nil {
			return "", nil
		}
		start = out.LastEvaluatedKey
	}
	return "", fmt.Errorf("lake: more than %d pages of tombstones below %q", maxBelowPages, prefix)
}

// liveInModels returns a live file of a registered model partition whose
// type is typ ("" for every model), or "".
func (d *Driver) liveInModels(ctx context.Context, typ string, gone map[string]bool, tx string) (string, error) {
	parts, err := d.Partitions(ctx)
	if err != nil {
		return "", err
	}
	for _, m := range parts {
		if !strings.Contains(m, "/") || (typ != "" && !strings.HasPrefix(m, typ+"/")) {
			continue
		}
		if below, err := d.liveBelow(ctx, d.filePK(m), "", gone, tx); err != nil || below != "" {
			return below, err
		}
	}
	return "", nil
}

// CrossPartitionClashes reports that a clash across partitions is refused
// atomically (the ConditionChecks above and the claims of claims.go).
func (d *Driver) CrossPartitionClashes() bool { return true }

// belowQuery is the Query of the items of partition key pk whose sort keys
// start with prefix and that may be live: not deleted, or staged by a
// commit (either of whose states may be live); only the attributes a clash
// check reads.
func belowQuery(pk, prefix string) (expression.Expression, error) {
	kc := expression.Key(attrPK).Equal(expression.Value(pk))
	if prefix != "" {
		kc = kc.And(expression.Key(attrSK).BeginsWith(prefix))
	}
	filt := expression.AttributeNotExists(expression.Name("del")).Or(expression.Name("del").Equal(expression.Value(false))).
		Or(expression.AttributeExists(expression.Name(attrTx)))
	e, err := expression.NewBuilder().WithKeyCondition(kc).WithFilter(filt).
		WithProjection(expression.NamesList(expression.Name(attrSK), expression.Name("del"), expression.Name(attrTx), expression.Name(attrOld))).Build()
	if err != nil {
		return expression.Expression{}, fmt.Errorf("lake: build expression: %w", err)
	}
	return e, nil
}
