package dynamofs_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
)

// flipAPI sees each TransactWriteItems: it notes the one that flips a
// staged commit (an update of a commit record's state, "st") with the
// items it carries, and runs a hook (once) right before sending it.
type flipAPI struct {
	ddb.API
	beforeFlip atomic.Pointer[func()]
	flip       atomic.Pointer[[]types.TransactWriteItem]
}

func (f *flipAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for _, w := range in.TransactItems {
		if w.Update != nil && slices.Contains(mapValues(w.Update.ExpressionAttributeNames), "st") {
			items := in.TransactItems
			f.flip.Store(&items)
			if h := f.beforeFlip.Swap(nil); h != nil {
				(*h)()
			}
			break
		}
	}
	return f.API.TransactWriteItems(ctx, in, o...)
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestFlipRidesFirstSettle (issue 31): a staged commit's flip is sent in
// the same transaction as the settling of its first files, not alone
// before them; if the lock moved on before it, that transaction fails on
// the fence's check as a whole: a fence conflict, nothing of the commit
// visible, nothing settled, the staged items rolled back.
func TestFlipRidesFirstSettle(t *testing.T) {
	ctx := t.Context()
	api := &flipAPI{API: ddb.NewClient(ddblocal.Config(t), "")}
	s, table := smallStoreOver(t, api, 4)
	rec := s.Records()
	if err := rec.CASRecord(ctx, "lock/rec/ns/sync", metastore.ExpectAbsent(), []byte("t1")); err != nil {
		t.Fatal(err)
	}

	_, err := s.Commit(ctx, &datastore.Fence{Key: "lock/rec/ns/sync", Token: []byte("t1")}, uploadAll(t, s, "data/w/1", 10, "one"))
	if err != nil {
		t.Fatal(err)
	}
	flip := api.flip.Load()
	if flip == nil {
		t.Fatal("no flip seen: the commit was not staged")
	}
	settles := 0
	for _, w := range *flip {
		if w.Update != nil && slices.Contains(mapValues(w.Update.ExpressionAttributeNames), "tx") {
			settles++
		}
	}
	if settles != 10 {
		t.Fatalf("the flip's transaction settled %d files; want all 10 with it (%d items)", settles, len(*flip))
	}
	if files, err := s.ListAll(ctx, "data/w/"); err != nil || len(files) != 10 {
		t.Fatalf("after the commit %d files are listed (%v)", len(files), err)
	}

	// The lock moves on right before the next commit's flip.
	moved := func() {
		if err := rec.CASRecord(ctx, "lock/rec/ns/sync", metastore.ExpectValue([]byte("t1")), []byte("t2")); err != nil {
			t.Error(err)
		}
	}
	api.beforeFlip.Store(&moved)
	_, err = s.Commit(ctx, &datastore.Fence{Key: "lock/rec/ns/sync", Token: []byte("t1")}, uploadAll(t, s, "data/w/2", 10, "two"))
	if !datastore.IsFenceConflict(err) {
		t.Fatalf("a commit whose lock moved on before its flip: %v; want a fence conflict", err)
	}
	if files, err := s.ListAll(ctx, "data/w/2/"); err != nil || len(files) != 0 {
		t.Fatalf("the refused commit's files are listed: %d (%v)", len(files), err)
	}
	if left := stagedLeft(t, table); len(left) != 0 {
		t.Fatalf("the refused commit left behind: %v", left)
	}
}

// bumpAPI runs a hook (once) right before the transaction that moves a
// staged commit's index entries (bumpIndexes: heads' positions set and
// their commit's mark removed), and counts the BatchGetItems sent.
type bumpAPI struct {
	ddb.API
	beforeBump atomic.Pointer[func()]
	batchGets  atomic.Int64
}

func (b *bumpAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	b.batchGets.Add(1)
	return b.API.BatchGetItem(ctx, in, o...)
}

func (b *bumpAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for _, w := range in.TransactItems {
		u := w.Update
		if u == nil || u.UpdateExpression == nil || !strings.Contains(*u.UpdateExpression, "REMOVE") {
			continue
		}
		names := mapValues(u.ExpressionAttributeNames)
		if slices.Contains(names, "pos") && slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "s_") }) {
			if h := b.beforeBump.Swap(nil); h != nil {
				(*h)()
			}
			break
		}
	}
	return b.API.TransactWriteItems(ctx, in, o...)
}

// TestOwnIndexMoveReadsNothing (issue 31): the writer of a staged commit
// moves its partitions' index entries from the heads and counters its
// staging left, without reading them back (no BatchGetItem in the whole
// commit); when another commit lands on one of those partitions between
// the staging and that move, the move's conditions fail and each
// partition is moved after a read: either way ChangedPartitions from a
// cursor before names both partitions at their last positions, and a pull
// of each from 0 holds every file.
func TestOwnIndexMoveReadsNothing(t *testing.T) {
	for _, meanwhile := range []bool{false, true} {
		t.Run(fmt.Sprintf("a commit meanwhile %v", meanwhile), func(t *testing.T) {
			ctx := t.Context()
			api := &bumpAPI{API: ddb.NewClient(ddblocal.Config(t), "")}
			s, _ := smallStoreOver(t, api, 4)
			_, cur, err := s.ChangedPartitions(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			entries := append(uploadAll(t, s, "data/b/1", 6, "one"), uploadAll(t, s, "data/b/2", 6, "two")...)
			if meanwhile {
				api.beforeBump.Store(putLate(t, s, "data/b/1/late"))
			}
			api.batchGets.Store(0)
			if _, err := s.Commit(ctx, nil, entries); err != nil {
				t.Fatal(err)
			}
			if n := api.batchGets.Load(); !meanwhile && n != 0 {
				t.Fatalf("the staged commit sent %d BatchGetItems; want none", n)
			}
			if api.beforeBump.Load() != nil {
				t.Fatal("the hook never ran: no index move seen")
			}
			want := map[string]int{"b/1": 6, "b/2": 6}
			if meanwhile {
				want["b/1"] = 7
			}
			wantChangesSince(t, s, cur, want)
		})
	}
}

// smallStoreOver is newSmallStore through api (the emulator's client, or
// a test's wrapper of it), with its table's name.
func smallStoreOver(t *testing.T, api ddb.API, max int) (*datastore.Store, string) {
	s, d := openSmallStore(t, api, max)
	return s, d.Table()
}

// tailAPI keeps the items of each TransactWriteItems sent and runs a hook
// (once) right before the one that deletes a commit record (the tail of a
// staged commit's roll-forward: settleTail).
type tailAPI struct {
	ddb.API
	beforeTail atomic.Pointer[func()]
	mu         sync.Mutex
	sent       [][]types.TransactWriteItem
}

func (a *tailAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if slices.ContainsFunc(in.TransactItems, deletesRecord) {
		if h := a.beforeTail.Swap(nil); h != nil {
			(*h)()
		}
	}
	a.mu.Lock()
	a.sent = append(a.sent, in.TransactItems)
	a.mu.Unlock()
	return a.API.TransactWriteItems(ctx, in, o...)
}

// deletesRecord reports whether w deletes a staged commit's record.
func deletesRecord(w types.TransactWriteItem) bool {
	if w.Delete == nil {
		return false
	}
	pk := w.Delete.Key["pk"].(*types.AttributeValueMemberS).Value
	sk := w.Delete.Key["sk"].(*types.AttributeValueMemberS).Value
	return strings.Contains(pk, "o#") && sk == "o"
}

// settles reports whether w settles a staged file (removes its tx).
func settles(w types.TransactWriteItem) bool {
	return w.Update != nil && w.Update.UpdateExpression != nil && strings.Contains(*w.Update.UpdateExpression, "REMOVE") &&
		slices.Contains(mapValues(w.Update.ExpressionAttributeNames), "tx")
}

// movesIndex reports whether w moves a head's index entry and removes its
// commit's mark (bumpItems).
func movesIndex(w types.TransactWriteItem) bool {
	if w.Update == nil || w.Update.UpdateExpression == nil || !strings.Contains(*w.Update.UpdateExpression, "REMOVE") {
		return false // a staging transaction sets the mark; the move removes it
	}
	names := mapValues(w.Update.ExpressionAttributeNames)
	return slices.Contains(names, "pos") && slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "s_") })
}

// TestTailRidesLastSettle (issue 31): the writer of a staged commit moves
// its partitions' index entries and forgets the commit (its record, entry
// lists and live-set id) in the last transaction that settles its files,
// sent after the others landed, not in two transactions of their own.
// When another commit lands on one of its partitions right before that
// transaction, the transaction fails on the move's conditions; the files
// are settled without it, the partitions moved after a read, the commit
// forgotten: nothing staged is left, and ChangedPartitions from a cursor
// before names both partitions at their last positions with every change.
func TestTailRidesLastSettle(t *testing.T) {
	for _, meanwhile := range []bool{false, true} {
		t.Run(fmt.Sprintf("a commit meanwhile %v", meanwhile), func(t *testing.T) {
			ctx := t.Context()
			api := &tailAPI{API: ddb.NewClient(ddblocal.Config(t), "")}
			s, table := smallStoreOver(t, api, 0)
			_, cur, err := s.ChangedPartitions(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			// More files than one settling transaction holds, so that
			// there is a last one after the flip's.
			entries := append(uploadAll(t, s, "data/r/1", 110, "one"), uploadAll(t, s, "data/r/2", 40, "two")...)
			if meanwhile {
				api.beforeTail.Store(putLate(t, s, "data/r/1/late"))
			}
			api.mu.Lock()
			api.sent = nil
			api.mu.Unlock()
			if _, err := s.Commit(ctx, nil, entries); err != nil {
				t.Fatal(err)
			}
			if api.beforeTail.Load() != nil {
				t.Fatal("the hook never ran: no commit record deleted")
			}
			var withRecord [][]types.TransactWriteItem
			for _, tx := range api.sent {
				if slices.ContainsFunc(tx, deletesRecord) {
					withRecord = append(withRecord, tx)
				}
				if !meanwhile && slices.ContainsFunc(tx, movesIndex) && !slices.ContainsFunc(tx, settles) {
					t.Errorf("the index moved in a transaction of its own (%d items)", len(tx))
				}
			}
			switch {
			case len(withRecord) == 0:
				t.Fatal("no transaction deleted the commit record")
			case !meanwhile && (len(withRecord) != 1 || !slices.ContainsFunc(withRecord[0], settles) || !slices.ContainsFunc(withRecord[0], movesIndex)):
				t.Fatalf("the commit was forgotten in %d transactions; want one that also settles files and moves the index", len(withRecord))
			case meanwhile && slices.ContainsFunc(withRecord[len(withRecord)-1], settles):
				t.Fatal("after a failed tail the commit was forgotten with settling writes: the failed transaction was not the tail")
			}
			if left := stagedLeft(t, table); len(left) != 0 {
				t.Fatalf("left behind: %v", left)
			}
			want := map[string]int{"r/1": 110, "r/2": 40}
			if meanwhile {
				want["r/1"] = 111
			}
			wantChangesSince(t, s, cur, want)
		})
	}
}

// putLate is a hook that puts path (another commit landing on its
// partition in the middle of a staged one).
func putLate(t *testing.T, s *datastore.Store, path string) *func() {
	put := func() {
		if _, err := s.Put(t.Context(), path, strings.NewReader("late"), nil); err != nil {
			t.Error(err)
		}
	}
	return &put
}

// wantChangesSince fails unless ChangedPartitions after cur names exactly
// the partitions of want, each with want's number of changes in its feed.
func wantChangesSince(t *testing.T, s *datastore.Store, cur string, want map[string]int) {
	t.Helper()
	for part, f := range feedsSince(t, s, cur) {
		if f.changes != want[part] {
			t.Fatalf("%s: %d changes; want %d", part, f.changes, want[part])
		}
		delete(want, part)
	}
	if len(want) != 0 {
		t.Fatalf("ChangedPartitions missed %v", want)
	}
}

// feed is what feedsSince found of a partition: its changes read from 0
// (each path once) and its head's seq, which that read reached.
type feed struct {
	changes int
	seq     uint64
}

// feedsSince reads the feed of every partition ChangedPartitions names
// after cur, from 0, failing unless each read reaches its head.
func feedsSince(t *testing.T, s *datastore.Store, cur string) map[string]feed {
	t.Helper()
	heads, _, err := s.ChangedPartitions(t.Context(), cur)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]feed{}
	for _, h := range heads {
		ch, upTo, err := s.Changes(t.Context(), h.Partition, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if upTo != h.Seq {
			t.Fatalf("%s: the feed read reaches %d, its head %d", h.Partition, upTo, h.Seq)
		}
		out[h.Partition] = feed{changes: len(ch), seq: h.Seq}
	}
	return out
}
