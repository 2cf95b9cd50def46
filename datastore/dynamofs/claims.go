package dynamofs

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
)

// Directory claims: a path is a file or a directory, never both, across
// partitions too, against unfenced concurrent writers (issue 27).
//
// The files of a model X lie below data/X, and their directories (data,
// data/T, data/X, data/X/NAME, data/X/NAME/VERSION…) can belong to other
// partitions, the ancestor partitions of X (Layout.ClaimParts: "data" and the
// shallower models whose names are prefixes of X's). A file put at one of
// those directories must be refused while X has a live file below it,
// atomically. Two attributes of a partition's head item carry that:
//
//   - subs, a string set: the models X that claimed the partition, so
//     that a put in it knows which partitions may hold files below it;
//   - guard, a counter that every cross-partition event bumps and that
//     every commit's head CAS conditions on, with seq.
//
// The claim (writer B, putting a file of X): the first commit of X in a
// process reads the heads of X's ancestor partitions with its other items
// (no extra request) and, for each that does not name X in subs, adds X
// to subs and bumps guard, conditioned on seq and guard as read, in its own
// transaction, which also checks (clash.go) that no ancestor of its files
// is a live file. A file put at an ancestor since B's read changed that
// head's seq, so B's transaction fails and B reads the file: a clash.
// Once a claim is seen it is cached for the process; a later commit of X
// pays nothing.
//
// The guard (writer A, putting a new file p in partition P): P's head is
// read with the commit anyway; for each X in its subs whose files can lie
// below p, A reads X's head, Queries X's files below p (a live one is the
// clash) and bumps X's guard conditioned on X's seq and guard as read.
// A commit of X since A's read fails A's condition (A reads again and
// finds the file); a commit of X after A's bumps the guard it conditions
// on, so it fails, reads again and finds p. A claim by X since A read P's
// head bumped P's guard, which A's own head CAS conditions on. So of a
// file and a file below it in another partition, the later commit always
// sees the earlier, whichever order they land in: DynamoDB's transactions
// serialize on the head items.
//
// A put whose partition no model claimed (every data file of a model
// without deeper models, the hot path) reads nothing and writes nothing
// more than before. A claim never refuses by itself: an emptied or dropped
// model is Queried and found empty, so nothing refuses forever.
//
// What it does not cover: a model whose files were all written before
// this release (a store upgraded in place) claims its ancestor partitions
// at its next commit, not before; until then the older checks of clash.go
// apply, which refuse a clash of writers one after another but not every
// race. DropPartition of an ancestor partition (the "data" partition)
// deletes its head and the claims in it; each model claims it again at its
// next commit from a process that has not cached the claim.

// claimKey caches that model x has claimed partition p in d's namespace.
func (d *Driver) claimKey(p, x string) string { return d.ns + "\x00" + p + "\x00" + x }

// claimKeys returns the heads a commit of entries reads for its claims:
// those of its models' ancestor partitions not yet known to be claimed.
func (d *Driver) claimKeys(entries []datastore.Entry) []item {
	var keys []item
	for _, e := range entries {
		if e.Put == nil {
			continue
		}
		x := d.partition(e.Put.Path)
		for _, p := range d.layout.ClaimParts(x) {
			if _, ok := d.claimed.Load(d.claimKey(p, x)); !ok {
				keys = append(keys, d.headKey(p))
			}
		}
	}
	return keys
}

// headWrite is what a commit adds to a head it does not otherwise change:
// a guard bump (and claims), conditioned on the head's seq and guard.
type headWrite struct {
	claims []string // models to add to subs
	// bump: a guard the put's Query relies on (subs named the model), so
	// the guard is bumped even on a head that does not exist (a dropped
	// model's: the stub it leaves holds only guard). Without it (a
	// model's directory put as a file, clash.go) an absent head is only
	// ConditionChecked absent, as before claims: that model's first
	// commit ConditionChecks the file item of its directory.
	bump bool
}

// crossPartition returns, for a commit of entries over the state read
// (lookup; cur takes the heads it reads itself), the Clash of a put with a
// live file of another partition below it, or the heads the commit must
// write: claims of its models, and guards of the partitions that can hold
// files below its puts. puts is the set of paths the commit puts.
func (d *Driver) crossPartition(ctx context.Context, entries []datastore.Entry, lookup func(item) item, cur map[string]item, tx string) (map[string]*headWrite, error) {
	in := map[string]bool{}
	for _, e := range entries {
		in[e.Path()] = true
	}
	writes := map[string]*headWrite{}
	at := func(p string) *headWrite {
		if writes[p] == nil {
			writes[p] = &headWrite{}
		}
		return writes[p]
	}
	for _, e := range entries {
		if e.Put == nil {
			continue
		}
		p := e.Put.Path
		part := d.partition(p)
		// Claims of the put's model in its ancestor partitions. The
		// process's cache is trusted only while the model's head has a
		// seq: a new or dropped model's claims may have been forgotten by
		// its drop (forgetClaims), so its commit reads them again.
		live := getN(lookup(d.headKey(part)), "seq") > 0
		for _, a := range d.layout.ClaimParts(part) {
			if _, ok := d.claimed.Load(d.claimKey(a, part)); ok {
				if live {
					continue
				}
				d.claimed.Delete(d.claimKey(a, part))
				if lookup(d.headKey(a)) == nil {
					// Not read with the commit (the cache said
					// claimed): read again, with it.
					return nil, errClaimedFirst
				}
			}
			if slices.Contains(getSS(lookup(d.headKey(a)), "subs"), part) {
				d.claimed.Store(d.claimKey(a, part), struct{}{})
				continue
			}
			if w := at(a); !slices.Contains(w.claims, part) {
				w.claims = append(w.claims, part)
			}
		}
		// Guards of the models that claimed the put's partition and can
		// hold files below it.
		if clashLive(lookup(key(d.filePK(part), p)), tx) {
			continue // a file already: nothing is below it
		}
		for _, x := range getSS(lookup(d.headKey(part)), "subs") {
			root := datastore.ModelPrefix + x + "/"
			if x == part || !(strings.HasPrefix(root, p+"/") || strings.HasPrefix(p, root)) {
				continue
			}
			hk := d.headKey(x)
			if lookup(hk) == nil {
				h, err := d.getItem(ctx, hk)
				if err != nil {
					return nil, err
				}
				cur[getS(hk, attrPK)+"\x00"+getS(hk, attrSK)] = h
			}
			below, err := d.liveBelow(ctx, d.filePK(x), p+"/", in, tx)
			if err != nil {
				return nil, err
			}
			if below != "" {
				return nil, datastore.Clash(p, below)
			}
			at(x).bump = true
		}
	}
	return writes, nil
}

// headCond is the condition of a head write: seq and guard as read.
func headCond(h item) expression.ConditionBuilder {
	cond := expression.AttributeNotExists(expression.Name("seq"))
	if s := getN(h, "seq"); s != 0 {
		cond = expression.Name("seq").Equal(expression.Value(s))
	}
	if g := getN(h, "guard"); g != 0 {
		return cond.And(expression.Name("guard").Equal(expression.Value(g)))
	}
	return cond.And(expression.AttributeNotExists(expression.Name("guard")))
}

// headUpdate is the head CAS of a commit: u applied only while the head
// holds seq and guard as read, plus the claims w adds.
func (d *Driver) headUpdate(k, h item, u expression.UpdateBuilder, w *headWrite) (types.TransactWriteItem, error) {
	if w != nil && len(w.claims) > 0 {
		u = u.Add(expression.Name("subs"), expression.Value(&types.AttributeValueMemberSS{Value: w.claims}))
	}
	e, err := build(expression.NewBuilder().WithCondition(headCond(h)).WithUpdate(u))
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Update: &types.Update{TableName: &d.table, Key: k, UpdateExpression: e.Update(),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}}, nil
}

// guardUpdate is the write of w to a head the commit does not change: a
// guard bump (and its claims), conditioned on seq and guard as read.
func (d *Driver) guardUpdate(k, h item, w *headWrite) (types.TransactWriteItem, error) {
	if h == nil && !w.bump && len(w.claims) == 0 {
		c, err := build(expression.NewBuilder().WithCondition(headCond(h)))
		if err != nil {
			return types.TransactWriteItem{}, err
		}
		return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: &d.table, Key: k,
			ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}}, nil
	}
	return d.headUpdate(k, h, expression.Add(expression.Name("guard"), expression.Value(1)), w)
}

func getSS(it item, name string) []string {
	if v, ok := it[name].(*types.AttributeValueMemberSS); ok {
		return v.Value
	}
	return nil
}

// dedupKeys drops repeated keys (BatchGetItem and TransactGetItems refuse duplicates).
func dedupKeys(keys []item) []item {
	seen := map[string]bool{}
	out := keys[:0:0]
	for _, k := range keys {
		id := getS(k, attrPK) + "\x00" + getS(k, attrSK)
		if !seen[id] {
			seen[id] = true
			out = append(out, k)
		}
	}
	return out
}

// maxTxItems is the most items one TransactWriteItems holds.
const maxTxItems = 100

// errClaimedFirst asks commitOnce to build its commit again after
// claimFirst.
var errClaimedFirst = errors.New("lake: claims made first; build the commit again")

// claimFirst makes claims (head Updates of claims.go) one transaction
// each, for a commit too large to carry them: a claim that fails its
// condition (the head moved since it was read) is left to the commit's
// next build, which reads the head again.
func (d *Driver) claimFirst(ctx context.Context, claims []types.TransactWriteItem) error {
	for _, c := range claims {
		err := d.transact(ctx, []types.TransactWriteItem{c})
		if _, failed := failedIndexes(err); err != nil && !failed {
			return d.classify(err, "")
		}
	}
	return nil
}

// dropHeads reads, for DropPartition of x, x's head and those of the
// partitions x claimed (one BatchGetItem; a GetItem for a partition that
// is not a model), and returns the head and the updates that remove x from
// their subs, for the drop's last transaction. Without them subs would
// grow with every model ever made (a seed's disposable models make
// thousands an hour) toward DynamoDB's 400 KB item limit, and every commit
// that reads such a head would pay for its size. Each update is
// conditioned on subs still naming x; in the transaction that deletes x's
// head under a condition on its seq, so a commit of x since the read
// fails the drop, and a commit of x after it finds x's head without a seq
// and claims again (crossPartition does not trust the process's cache for
// it).
func (d *Driver) dropHeads(ctx context.Context, x string) (item, []types.TransactWriteItem, error) {
	hosts := d.layout.ClaimParts(x)
	keys := []item{d.headKey(x)}
	for _, a := range hosts {
		keys = append(keys, d.headKey(a))
	}
	got, err := d.readCarrying(ctx, keys) // prefetch.go
	if err != nil {
		return nil, nil, err
	}
	byKey := map[string]item{}
	for _, it := range got {
		byKey[getS(it, attrPK)+"\x00"+getS(it, attrSK)] = it
	}
	find := func(k item) item { return byKey[getS(k, attrPK)+"\x00"+getS(k, attrSK)] }
	var forget []types.TransactWriteItem
	for _, a := range hosts {
		d.claimed.Delete(d.claimKey(a, x))
		if !slices.Contains(getSS(find(d.headKey(a)), "subs"), x) {
			continue
		}
		u, err := build(expression.NewBuilder().
			WithCondition(expression.Contains(expression.Name("subs"), x)).
			WithUpdate(expression.Delete(expression.Name("subs"), expression.Value(&types.AttributeValueMemberSS{Value: []string{x}}))))
		if err != nil {
			return nil, nil, err
		}
		forget = append(forget, types.TransactWriteItem{Update: &types.Update{TableName: &d.table, Key: d.headKey(a),
			ConditionExpression: u.Condition(), UpdateExpression: u.Update(), ExpressionAttributeNames: u.Names(), ExpressionAttributeValues: u.Values()}})
	}
	return find(d.headKey(x)), forget, nil
}
