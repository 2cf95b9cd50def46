package dynamofs

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
)

// Fewer requests for a large staged commit (issue 31; the protocol is
// whole.go's, unchanged: one commit record, the entries staged under it,
// one flip, the roll-forward).
//
//   - A staging transaction holds as many entries as fit in one
//     TransactWriteItems (maxTxItems items, maxTxBytes bytes) instead of
//     MaxCommit: stageLen counts the items a batch can need before it is
//     read, and buildCommit, which knows them exactly once it has read,
//     answers errTxTooBig for a batch that does not fit; stageAll then
//     halves it and builds again (nothing was written).
//   - The entry list of a staging transaction is one item (b#FIRST, its
//     entries in attribute es) instead of one item per entry (e#PATH):
//     staged() reads both forms, so a commit staged by an older release
//     settles as before.
//   - Settling (roll-forward and roll-back) packs files into transactions
//     up to maxTxItems items and maxTxBytes bytes, not rollBatch files;
//     the index entries of all the partitions a commit touched move in one
//     transaction (bumpIndexes), as a one-write commit moves them.
//
// Atomicity is the record's, as before: nothing staged is visible until
// the flip, and every staging transaction carries the fence's
// ConditionCheck, its heads' and counters' CAS and its clash checks.

// maxTxBytes is the budget of one TransactWriteItems's items, by itemBytes's
// count, below DynamoDB's 4 MB so that its reckoning of attribute sizes
// (which counts a little more than names and values) cannot push a
// transaction over.
const maxTxBytes = 3 << 20

// errTxTooBig is buildCommit's answer for a staging batch whose
// transaction would exceed maxTxItems items or maxTxBytes bytes.
var errTxTooBig = errors.New("lake: a staging transaction does not fit")

// stageLen returns how many of entries (the rest of a staged commit) go in
// its next staging transaction: MaxCommit when an Option lowered it (tests
// stage in small batches on purpose), else as many as the items they can
// need leave room for.
func (d *Driver) stageLen(entries []datastore.Entry, first int) int {
	if d.maxCommit < maxCommit {
		return min(len(entries), d.maxCommit)
	}
	const room = maxTxItems - 4 // guards of claimed partitions (claims.go) find their room here, or errTxTooBig
	items := 2 + first          // the fence, the entry list, and the first write's items (firstWrite)
	parts, shards, models := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for n, e := range entries {
		path := e.Path()
		part := d.partition(path)
		add := 1 // the path's item
		if e.Put != nil && e.Put.Chunks > 0 {
			add++ // its intent
		}
		if !parts[part] {
			add += 2 + len(d.layout.ClaimParts(part)) // head, model-directory check, claims
			if !shards[shard(part)] {
				add++ // counter
			}
		}
		model, ok := d.modelDirOf(path)
		if ok && model != part && !models[model] {
			add++ // the deeper model's head (clash.go)
		}
		if items+add > room && n > 0 {
			return n
		}
		items += add
		parts[part], shards[shard(part)] = true, true
		if ok {
			models[model] = true
		}
	}
	return len(entries)
}

// fitsOneTx reports whether a commit of entries (over parts) can be one
// TransactWriteItems by what is known before its read: stageLen's count
// of the items they can need, with a tombstone for each delete, the
// registration of each partition, the layout's check and a record write.
// A replaced version's reclaim entry is not known until the read: a
// commit that needs more is then staged (errTxTooBig). Not when an Option
// lowered MaxCommit (tests stage small commits on purpose).
func (d *Driver) fitsOneTx(entries []datastore.Entry, parts []string) bool {
	if d.maxCommit < maxCommit || len(entries) > maxTxItems {
		return false
	}
	extra := 2 + len(parts)
	for _, e := range entries {
		if e.Put == nil {
			extra++
		}
	}
	return d.stageLen(entries, extra) == len(entries)
}

// firstWrite is what a staged commit's first staging transaction carries
// besides its batch: the record's create, its live-set id, the
// registration of the commit's partitions and the layout record's check
// (items, with their roles), and the layout checked (for the error).
type firstWrite struct {
	items  []types.TransactWriteItem
	roles  []role
	layout []byte
}

// stageAll stages entries under commit id, as many a transaction as fit,
// and returns what it staged (for settleOwn).
//
// first goes in the first staging transaction that changes anything;
// own.first is still set when none did (nothing was written).
func (d *Driver) stageAll(ctx context.Context, fence *datastore.Fence, entries []datastore.Entry, now time.Time, id string, first firstWrite) ([]datastore.Info, *stagedNote, error) {
	own := &stagedNote{first: first.items, firstRoles: first.roles, layout: first.layout}
	ctx = context.WithValue(ctx, stagedNoteKey{}, own)
	var out []datastore.Info
	for start := 0; start < len(entries); {
		n := d.stageLen(entries[start:], len(own.first))
		for {
			batch := entries[start : start+n]
			infos, err := d.commitOnce(ctx, fence, batch, d.partsOf(batch), now, id)
			if errors.Is(err, errTxTooBig) && n > 1 {
				n = (n + 1) / 2
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			out = append(out, infos...)
			break
		}
		start += n
	}
	return out, own, nil
}

// tooBig reports whether a staging transaction of items exceeds one
// TransactWriteItems.
func tooBig(items []types.TransactWriteItem) bool {
	return len(items) > maxTxItems || txBytes(items) > maxTxBytes
}

// listBatchItem is the entry list of one staging transaction of commit tx:
// for each entry, its path and its put's upload intent key.
func (d *Driver) listBatchItem(tx string, es []datastore.Entry) item {
	it := key(d.txPK(tx), "b#"+es[0].Path())
	var l []types.AttributeValue
	for _, e := range es {
		m := map[string]types.AttributeValue{"p": str(e.Path())}
		if e.Put != nil && e.Put.Chunks > 0 { // an inline file has no intent
			ik := d.intentKey(*e.Put)
			m["ipk"], m["isk"] = ik[attrPK], ik[attrSK]
		}
		l = append(l, &types.AttributeValueMemberM{Value: m})
	}
	it["es"] = &types.AttributeValueMemberL{Value: l}
	return it
}

// entryItems returns a commit's entry items, one per entry, from the items
// of its pk: e#PATH items as they are, each b# item's entries as e#PATH
// items, the record ("o") left out.
func entryItems(its []item) []item {
	var out []item
	for _, it := range its {
		sk := getS(it, attrSK)
		switch {
		case strings.HasPrefix(sk, "e#"):
			out = append(out, it)
		case strings.HasPrefix(sk, "b#"):
			l, _ := it["es"].(*types.AttributeValueMemberL)
			if l == nil {
				continue
			}
			for _, v := range l.Value {
				m, ok := v.(*types.AttributeValueMemberM)
				if !ok || getS(m.Value, "p") == "" {
					continue
				}
				e := item{attrPK: it[attrPK], attrSK: str("e#" + getS(m.Value, "p"))}
				if m.Value["ipk"] != nil {
					e["ipk"], e["isk"] = m.Value["ipk"], m.Value["isk"]
				}
				out = append(out, e)
			}
		}
	}
	return out
}

// bumpIndexes moves the index entries of parts (the partitions commit id
// touched) in one transaction: each head to its own next position of its
// shard, each counter past them, every write conditioned on what was read.
// A race lost, or more partitions than one transaction holds, falls back to
// bumpIndex one partition at a time.
func (d *Driver) bumpIndexes(ctx context.Context, parts []string, id string) error {
	cur, known := d.ownIndexState(id, parts)
	if !known && len(parts) > 1 && 2*len(parts) <= maxTxItems {
		keys := []item{}
		for _, p := range parts {
			keys = append(keys, d.headKey(p), d.counterKey(shard(p)))
		}
		got, err := d.batchGet(ctx, dedupKeys(keys))
		if err != nil {
			return err
		}
		cur = map[string]item{}
		for _, it := range got {
			cur[itemID(it)] = it
		}
	}
	if cur != nil && 2*len(parts) <= maxTxItems {
		items, landed, err := d.bumpItems(parts, id, cur)
		if err != nil || len(items) == 0 {
			return err
		}
		err = d.transact(ctx, items)
		if err == nil {
			landed()
			return nil
		}
		if _, ok := failedIndexes(err); !ok {
			return d.classify(err, "")
		}
	}
	for _, p := range parts {
		if err := d.bumpIndex(ctx, p, id); err != nil {
			return err
		}
	}
	return nil
}

// bumpItems returns the writes that move the index entries of parts (the
// partitions commit id touched) over cur (their heads and counters as read
// or as this writer left them), each conditioned on it, and what to do
// once they landed (stage the move for the commit's cursor: cursorover.go).
// No items: every head is gone (dropped meanwhile).
func (d *Driver) bumpItems(parts []string, id string, cur map[string]item) ([]types.TransactWriteItem, func(), error) {
	lookup := func(k item) item { return cur[itemID(k)] }
	next := map[string]uint64{}
	var items []types.TransactWriteItem
	for _, p := range parts {
		h, sh := lookup(d.headKey(p)), shard(p)
		if h == nil {
			continue // dropped meanwhile
		}
		if _, ok := next[sh]; !ok {
			next[sh] = getN(lookup(d.counterKey(sh)), "n")
		}
		next[sh]++
		w, err := d.casUpdate(d.headKey(p), "seq", getN(h, "seq"), withPrev(expression.Set(expression.Name(attrPos), expression.Value(next[sh])), h).
			Remove(expression.Name(headMark(id))))
		if err != nil {
			return nil, nil, err
		}
		items = append(items, w)
	}
	for _, sh := range slices.Sorted(maps.Keys(next)) {
		w, err := d.casUpdate(d.counterKey(sh), "n", getN(lookup(d.counterKey(sh)), "n"), expression.Set(expression.Name("n"), expression.Value(next[sh])))
		if err != nil {
			return nil, nil, err
		}
		items = append(items, w)
	}
	return items, func() { d.moves.stage(id, stagedIndexMove(d, parts, id, next, lookup)) }, nil
}

// ownIndexState is, for commit id that this writer staged, its parts'
// heads and their shards' counters as its staging transactions left them
// (moveLog.stagedState), as the items bumpIndexes would have read: not
// read back (issue 31: one request less a staged commit). It cannot be
// wrong where a read would be right: every value is a CAS condition of
// bumpIndexes' transaction, which any commit since the staging fails, and
// the partitions are then moved one at a time, read first. known is false
// for a commit this writer did not stage, or whose moves it cannot tell.
func (d *Driver) ownIndexState(id string, parts []string) (map[string]item, bool) {
	heads, counters, ok := d.moves.stagedState(id, parts)
	if !ok {
		return nil, false
	}
	cur := map[string]item{}
	for _, h := range heads {
		k := d.headKey(h.Partition)
		k["seq"], k["floor"] = num(h.Seq), num(h.Floor)
		cur[itemID(k)] = k
	}
	for sh, n := range counters {
		k := d.counterKey(sh)
		k["n"] = num(n)
		cur[itemID(k)] = k
	}
	return cur, true
}

// txBytes is the size of a transaction's items by itemBytes.
func txBytes(items []types.TransactWriteItem) int {
	n := 0
	for _, w := range items {
		n += 100 // the item's key and expressions, at most a few names and values
		switch {
		case w.Put != nil:
			n += itemBytes(w.Put.Item)
		case w.Update != nil:
			n += itemBytes(w.Update.ExpressionAttributeValues)
		}
	}
	return n
}

// itemBytes counts an item's attribute names and values, as DynamoDB sizes
// them (numbers by their digits: an over-count).
func itemBytes(it map[string]types.AttributeValue) int {
	n := 0
	for k, v := range it {
		n += len(k) + valueBytes(v)
	}
	return n
}

func valueBytes(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberM:
		return 3 + itemBytes(v.Value)
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueBytes(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	}
	return 1
}

// stagedNote is what the writer of a staged commit wrote: its staged file
// items and entry-list items, as its transactions put them, so that its
// own roll-forward right after its flip reads none of them back
// (settleOwn).
type stagedNote struct {
	files, lists []item
	// first are the items the first staging transaction carries besides
	// its batch (firstWrite), with their roles: nil once it landed.
	first      []types.TransactWriteItem
	firstRoles []role
	// layout is the layout the first write checks (for its error).
	layout []byte
	// below and pending carry a partition's live paths (clashbatch.go)
	// from one staging transaction to the next: pending as the
	// transaction being built read them, below once it landed.
	below, pending map[string]livePathsAt
	// state is what the commit's staging transactions read and wrote, as
	// the last one to land left it (nil: an absent item), and built the
	// same for the transaction being built (predict.go).
	state, built map[string]item
}

// livePathsAt is a partition's live paths (sorted) while its head holds
// seq and guard.
type livePathsAt struct {
	paths      []string
	seq, guard uint64
}

// carry notes, for the staging transaction being built, the live paths of
// partition key pk that its clash checks used and its head as read.
func carry(ctx context.Context, pk string, paths []string, head item) {
	n, _ := ctx.Value(stagedNoteKey{}).(*stagedNote)
	if n == nil {
		return
	}
	if n.pending == nil {
		n.pending = map[string]livePathsAt{}
	}
	n.pending[pk] = livePathsAt{paths: paths, seq: getN(head, "seq"), guard: getN(head, "guard")}
}

// carried returns the live paths of partition key pk (less gone) as an
// earlier staging transaction of this commit left them, if its head (as
// this one read it) still holds the seq that transaction gave it and the
// guard it read. Why that cannot be wrong: those paths were vouched for by
// that transaction's head CAS, which landed, and the paths it staged are
// added to them (noteStaged); every commit that changes a file of the
// partition since moves its head's seq, and every claim on it its guard,
// and this transaction's own head CAS checks both as read. Settling
// another commit's staged path changes no seq, but only from "either
// state" (clashLive) to one of them: the carried paths are then a
// superset, never missing a live file. A foreign file item written without
// its head is not vouched for by any read (clashbatch.go).
func carried(ctx context.Context, pk string, head item, gone map[string]bool) ([]string, bool) {
	n, _ := ctx.Value(stagedNoteKey{}).(*stagedNote)
	if n == nil {
		return nil, false
	}
	b, ok := n.below[pk]
	if !ok || head == nil || getN(head, "seq") != b.seq || getN(head, "guard") != b.guard {
		return nil, false
	}
	var out []string
	for _, p := range b.paths {
		if !gone[p] {
			out = append(out, p)
		}
	}
	return out, true
}

type stagedNoteKey struct{}

// noteStaged records in ctx's stagedNote (if any) the items a staging
// transaction of commit tx put: the path items it staged (tx = tx) and its
// entry-list item (b#).
func noteStaged(ctx context.Context, tx string, items []types.TransactWriteItem) {
	n, _ := ctx.Value(stagedNoteKey{}).(*stagedNote)
	if tx == "" || n == nil {
		return
	}
	n.first = nil // the record landed with this transaction, if it was the first
	if n.built != nil {
		if n.state == nil {
			n.state = map[string]item{}
		}
		maps.Copy(n.state, n.built)
		n.built = nil
	}
	var staged []item
	for _, w := range items {
		switch {
		case w.Put == nil:
		case getS(w.Put.Item, attrTx) == tx:
			staged = append(staged, w.Put.Item)
		case strings.HasPrefix(getS(w.Put.Item, attrSK), "b#"):
			n.lists = append(n.lists, w.Put.Item)
		}
	}
	n.files = append(n.files, staged...)
	// The live paths the transaction's clash checks used, with what it
	// staged, at the seq its head CAS set (the last position it gave).
	for pk, at := range n.pending {
		live := map[string]bool{}
		for _, p := range at.paths {
			live[p] = true
		}
		var seq, first uint64
		for _, it := range staged {
			if getS(it, attrPK) != pk {
				continue
			}
			pos := getN(it, attrPos)
			seq = max(seq, pos)
			if first == 0 || pos < first {
				first = pos
			}
			live[getS(it, attrSK)] = !getBool(it, "del")
		}
		if seq == 0 || first != at.seq+1 {
			// Nothing staged there (its head did not move), or the
			// paths were read by an earlier build of this transaction
			// against another head: positions follow the head read.
			continue
		}
		var paths []string
		for p, ok := range live {
			if ok {
				paths = append(paths, p)
			}
		}
		slices.Sort(paths)
		if n.below == nil {
			n.below = map[string]livePathsAt{}
		}
		n.below[pk] = livePathsAt{paths: paths, seq: seq, guard: at.guard}
	}
	n.pending = nil
}

// settleOwn rolls forward commit id, which this writer has just flipped,
// from what it staged (own): no read of the record, the entry list or the
// staged items. It cannot be wrong where settle would be right: the flip
// landed, so the record is done (or already settled by another, and then
// every write below is conditioned on tx = id, fails and is skipped:
// settleItems), and an item staged by id changes only by settling id.
//
// With lead (the flip), the first settling transaction carries it
// (settleItems): own must hold the lists then (the caller checks).
func (d *Driver) settleOwn(ctx context.Context, id string, now time.Time, own *stagedNote, lead ...types.TransactWriteItem) error {
	if (own == nil || len(own.lists) == 0) && len(lead) == 0 {
		return d.settle(ctx, id, now)
	}
	entries := entryItems(own.lists)
	var keys []item
	for _, it := range own.lists {
		keys = append(keys, key(getS(it, attrPK), getS(it, attrSK)))
	}
	tail, err := d.ownTail(id, entryParts(d, entries), keys)
	if err != nil {
		return err
	}
	if err := d.rollForwardItems(ctx, id, now, entries, own.files, tail, lead...); err != nil {
		return err
	}
	if tail != nil && tail.landed {
		return nil
	}
	return d.forgetKeys(ctx, id, keys)
}

// ownTail is the settleTail of commit id, which this writer staged over
// parts and whose entry items are keys: its index move from the state its
// staging left (ownIndexState, no read) and its forgetting. nil when that
// state is unknown or they do not fit in one transaction: they are then
// sent as for any commit, one after the other.
func (d *Driver) ownTail(id string, parts []string, keys []item) (*settleTail, error) {
	cur, known := d.ownIndexState(id, parts)
	if !known || 2*len(parts) > maxTxItems {
		return nil, nil
	}
	bump, landed, err := d.bumpItems(parts, id, cur)
	if err != nil {
		return nil, err
	}
	forget, fits, err := d.forgetItems(id, keys)
	if err != nil || !fits || len(bump)+len(forget) > maxTxItems {
		return nil, err
	}
	return &settleTail{items: append(bump, forget...), onLand: landed}, nil
}

// withFirst adds to a staging transaction of commit tx (items, roles) the
// items the first one carries (stagedNote.first), while no staging
// transaction of it has landed: the record is created in the same write
// as the first staged items, so none is ever seen without it.
func withFirst(ctx context.Context, tx string, items []types.TransactWriteItem, roles []role) ([]types.TransactWriteItem, []role) {
	n, _ := ctx.Value(stagedNoteKey{}).(*stagedNote)
	if tx == "" || n == nil || n.first == nil {
		return items, roles
	}
	return append(items, n.first...), append(roles, n.firstRoles...)
}

// noteLayout is layout, or, if nil, the layout the first write of the
// staged commit ctx stages checks (firstWrite): a staging transaction's
// failed layout check is that one.
func noteLayout(ctx context.Context, layout []byte) []byte {
	if n, _ := ctx.Value(stagedNoteKey{}).(*stagedNote); layout == nil && n != nil {
		return n.layout
	}
	return layout
}
