package dynamofs

import (
	"context"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Registration in the commit (issue 31). A partition joins its registry
// shard's set before its first change, so that Partitions, List and the
// clash checks find it. It used to be one UpdateItem (an ADD) before each
// commit of each partition, once per process: every `lake data sync`, a
// process of its own, paid one request per changed partition. Now the
// commit decides from the heads it reads anyway:
//
//   - A partition whose head holds a seq has had a commit, and is
//     registered: the commit that first set its seq registered it (before
//     its transaction, or in it, below), and the only write of lake that
//     takes a partition out of its registry set is DropPartition's last
//     transaction, which deletes the head in the same transaction (on a
//     condition on the seq it read) or, when it read no head, checks that
//     the head still holds no seq (drop.go). So no seq ⇐ not registered,
//     atomically, and a head with a seq, read in the same snapshot
//     whose values this commit's head CAS is conditioned on, is of a
//     registered partition when the transaction applies: a drop that lands
//     between the read and the transaction deletes the head, and the
//     commit's CAS on that seq fails; it re-reads and registers below. No
//     request, no item.
//   - A partition whose head holds no seq (new, or dropped) is registered
//     by an ADD in the commit's own TransactWriteItems: no extra request,
//     and atomic with the commit, so a drop racing it cannot take the
//     partition out of the registry between the two (the drop's check that
//     the head holds no seq fails instead). The per-process cache
//     (Driver.registered) is not consulted here: it may predate a drop by
//     another process.
//   - Only when the ADDs would take the transaction past 100 items are they
//     made first, each on its own, as before (the race with a drop that
//     then remains is the one every commit had before: rare, and found and
//     repaired by `lake data check`).
//
// A foreign writer (not lake) that deletes a registry item, or takes a
// partition out of its set, leaves a partition with a head and files but
// not registered. lake does not write it back on the partition's next
// commit (it no longer writes the registry then), as it never did for a
// partition with no further commit: `lake data check` reports such a
// partition ("holds files but is not registered") and --repair registers
// it (TestRegistryDeletedByAForeignWriter). Pulls do not read the registry
// (ChangedPartitions reads the heads' index), so they see everything still.

// needsRegistry returns the partitions of parts that a commit changes (seq
// holds their new seq) whose head, as read (lookup), holds no seq: not
// registered, or not for sure.
func needsRegistry(parts []string, seq map[string]uint64, lookup func(item) item, headKey func(string) item) []string {
	var need []string
	for _, p := range parts {
		if _, changed := seq[p]; !changed {
			continue
		}
		if getN(lookup(headKey(p)), "seq") == 0 {
			need = append(need, p)
		}
	}
	return need
}

// registryAdds returns the transaction's writes that register need: one
// Update (an ADD to the string set) per registry shard, since a
// transaction may touch an item once.
func (d *Driver) registryAdds(need []string) ([]types.TransactWriteItem, error) {
	byShard := map[string][]string{}
	for _, p := range need {
		byShard[shard(p)] = append(byShard[shard(p)], p)
	}
	var out []types.TransactWriteItem
	for _, sh := range slices.Sorted(maps.Keys(byShard)) {
		u, err := build(expression.NewBuilder().WithUpdate(expression.Add(expression.Name("parts"),
			expression.Value(&types.AttributeValueMemberSS{Value: byShard[sh]}))))
		if err != nil {
			return nil, err
		}
		out = append(out, types.TransactWriteItem{Update: &types.Update{TableName: &d.table, Key: d.registryKey(sh),
			UpdateExpression: u.Update(), ExpressionAttributeNames: u.Names(), ExpressionAttributeValues: u.Values()}})
	}
	return out, nil
}

// registerInCommit returns the writes that register the partitions of a
// commit whose transaction holds n items so far (see above), or, if they do
// not fit beside them, registers them now, each with its own UpdateItem
// (the cache forgotten first: it may predate a drop), and returns none.
func (d *Driver) registerInCommit(ctx context.Context, parts []string, seq map[string]uint64, lookup func(item) item, n int) ([]types.TransactWriteItem, error) {
	need := needsRegistry(parts, seq, lookup, d.headKey)
	if len(need) == 0 {
		return nil, nil
	}
	adds, err := d.registryAdds(need)
	if err != nil {
		return nil, err
	}
	if n+len(adds) <= maxTxItems {
		return adds, nil
	}
	for _, p := range need {
		d.registered.Delete(d.regKey(p))
		if err := d.register(ctx, p); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// noSeqCheck is the ConditionCheck that partition's head holds no seq
// (DropPartition's last transaction, when it read no head).
func (d *Driver) noSeqCheck(partition string) (types.TransactWriteItem, error) {
	c, err := build(expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name("seq"))))
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: &d.table, Key: d.headKey(partition),
		ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names()}}, nil
}
