package dynamofs_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// stagingAPI counts a staged commit's staging transactions (those that put
// an entry list, b#) and the TransactGetItems sent, and runs a hook (once)
// right before the staging transaction numbered at (from 1).
type stagingAPI struct {
	ddb.API
	at       int
	hook     atomic.Pointer[func()]
	stagings atomic.Int64
	reads    atomic.Int64
}

func (a *stagingAPI) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	a.reads.Add(1)
	return a.API.TransactGetItems(ctx, in, o...)
}

func (a *stagingAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if slices.ContainsFunc(in.TransactItems, putsEntryList) {
		if int(a.stagings.Add(1)) == a.at {
			if h := a.hook.Swap(nil); h != nil {
				(*h)()
			}
		}
	}
	return a.API.TransactWriteItems(ctx, in, o...)
}

// putsEntryList reports whether w puts a staging transaction's entry list.
func putsEntryList(w types.TransactWriteItem) bool {
	if w.Put == nil {
		return false
	}
	sk, _ := w.Put.Item["sk"].(*types.AttributeValueMemberS)
	return sk != nil && strings.HasPrefix(sk.Value, "b#")
}

// TestStagingGuessesAreChecked (issue 31): after its first staging
// transaction, a staged commit builds the next ones from what the earlier
// ones read and wrote and from guesses (a new path's file item absent, a
// head in a shard whose counter was last read at 0 absent, a counter as
// last read), without a read. Each case changes what a guess stands for
// right before a later staging transaction, as another writer may: the
// transaction fails on its own conditions and is built again after a read,
// and the outcome is the one a read before each transaction gives.
//
//   - a file of a later batch put meanwhile: the commit replaces it (its
//     feed holds both changes);
//   - the same path's item written by a client that is not lake (no head,
//     no counter moved: the hostile peer): the put's own condition sees
//     it, and the commit replaces it;
//   - a commit in another partition of a new partition's shard: that
//     shard's counter moved, so the guessed counter is refused, and every
//     head ends at its own position of its shard (no two heads share one);
//   - a deeper model created meanwhile whose directory is a path of a
//     later batch: the commit is refused as a clash, nothing of it visible.
//
// Without a change the commit reads once (its first transaction).
func TestStagingGuessesAreChecked(t *testing.T) {
	// Two partitions of different shards (the second new in a later batch)
	// and a third partition in the second's shard.
	first, second := "g/a", ""
	var neighbour string
	for i := 0; second == "" || neighbour == ""; i++ {
		p := fmt.Sprintf("g/b%d", i)
		switch {
		case second == "" && shardOf(p) != shardOf(first):
			second = p
		case second != "" && neighbour == "" && shardOf(p) == shardOf(second):
			neighbour = p
		}
	}
	for _, tc := range []struct {
		name string
		// meanwhile runs before the third staging transaction (the
		// first batches hold first's files, then second's begin).
		meanwhile func(t *testing.T, s *datastore.Store, table string)
		clash     bool
		extra     map[string]int // paths beyond the commit's, by partition
		later     map[string]int // positions beyond the paths', by partition
	}{
		{name: "nothing"},
		{name: "a later file put by another process", meanwhile: func(t *testing.T, s *datastore.Store, table string) {
			if _, err := s.Put(t.Context(), "data/"+second+"/f05", strings.NewReader("theirs"), nil); err != nil {
				t.Error(err)
			}
		}, later: map[string]int{second: 1}}, // the same path twice: one change in the feed
		{name: "a foreign item at a later path", meanwhile: func(t *testing.T, s *datastore.Store, table string) {
			// A client that is not lake writes the path's item as lake
			// would, without a head or a counter: only the put's own
			// condition can see it.
			_, err := ddblocal.Client(t).PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table),
				Item: map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: "f#" + second}, "sk": &types.AttributeValueMemberS{Value: "data/" + second + "/f05"},
					"pos": &types.AttributeValueMemberN{Value: "1"}, "size": &types.AttributeValueMemberN{Value: "6"},
				}})
			if err != nil {
				t.Error(err)
			}
		}},
		{name: "a commit in the shard by another process", meanwhile: func(t *testing.T, s *datastore.Store, table string) {
			if _, err := s.Put(t.Context(), "data/"+neighbour+"/x", strings.NewReader("theirs"), nil); err != nil {
				t.Error(err)
			}
		}, extra: map[string]int{neighbour: 1}},
		{name: "a deeper model", meanwhile: func(t *testing.T, s *datastore.Store, table string) {
			if _, err := s.Put(t.Context(), "data/"+second+"/f70/r/1/raw", strings.NewReader("theirs"), nil); err != nil {
				t.Error(err)
			}
		}, clash: true, extra: map[string]int{second + "/f70": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			api := &stagingAPI{API: ddb.NewClient(ddblocal.Config(t), ""), at: 3}
			s, table := smallStoreOver(t, api, 0)
			_, cur, err := s.ChangedPartitions(ctx, "") // the sync's pull: counters read
			if err != nil {
				t.Fatal(err)
			}
			entries := append(uploadAll(t, s, "data/"+first, 100, "ours"), uploadAll(t, s, "data/"+second, 100, "ours")...)
			if tc.meanwhile != nil {
				// Another process's writes: a store of its own over the
				// same table, whose commits this one's driver does not see.
				_, other := anotherProcess(t, table)
				h := func() { tc.meanwhile(t, other, table) }
				api.hook.Store(&h)
			}
			api.reads.Store(0)
			_, err = s.Commit(ctx, nil, entries)
			if tc.meanwhile != nil && api.hook.Load() != nil {
				t.Fatalf("the hook never ran: %d staging transactions", api.stagings.Load())
			}
			if tc.clash {
				if _, ok := datastore.AsClash(err); !ok {
					t.Fatalf("a commit over a deeper model made meanwhile: %v; want a clash", err)
				}
				if files, err := s.ListAll(ctx, "data/"+first+"/"); err != nil || len(files) != 0 {
					t.Fatalf("the refused commit's files are listed: %d (%v)", len(files), err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if reads := api.reads.Load(); tc.meanwhile == nil && reads != 1 {
				t.Fatalf("the staged commit read %d times; want once (its first staging transaction)", reads)
			} else if tc.meanwhile != nil && reads < 2 {
				t.Fatalf("the staged commit read %d times after a change meanwhile; want a read again", reads)
			}
			if left := stagedLeft(t, table); len(left) != 0 {
				t.Fatalf("left behind: %v", left)
			}
			if !tc.clash {
				got, err := s.StatMany(ctx, []string{"data/" + second + "/f05"})
				if err != nil || got["data/"+second+"/f05"].Size != int64(len("ours")) {
					t.Fatalf("data/%s/f05 after the commit: %+v (%v); want the commit's", second, got, err)
				}
			}
			want := map[string]int{}
			if !tc.clash {
				want[first], want[second] = 100, 100
			}
			for p, n := range tc.extra {
				want[p] += n
			}
			for part, f := range feedsSince(t, s, cur) {
				// A refused commit's positions stay taken: its partitions'
				// heads are past their (no) changes.
				rolledBack := tc.clash && (part == first || part == second)
				if f.changes != want[part] || (!rolledBack && f.seq != uint64(want[part]+tc.later[part])) {
					t.Fatalf("%s: %d changes, head %d; want %d, head %d", part, f.changes, f.seq, want[part], want[part]+tc.later[part])
				}
				delete(want, part)
			}
			if len(want) != 0 {
				t.Fatalf("ChangedPartitions missed %v", want)
			}
			headsOwnPositions(t, table)
		})
	}
}

// headsOwnPositions fails unless every head item of the table is at its own
// index position of its shard, at most its shard's counter, as a peer
// scanning the table sees them.
func headsOwnPositions(t *testing.T, table string) {
	t.Helper()
	out, err := ddblocal.Client(t).Scan(t.Context(), &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]map[string]string{} // shard pk -> pos -> partition
	counters := map[string]string{}
	for _, it := range out.Items {
		pk := it["pk"].(*types.AttributeValueMemberS).Value
		sk := it["sk"].(*types.AttributeValueMemberS).Value
		i := strings.LastIndex(pk, "#x#")
		if n, ok := it["n"].(*types.AttributeValueMemberN); ok && strings.Contains(pk, "#n#") {
			counters[strings.Replace(pk, "#n#", "#x#", 1)] = n.Value
		}
		p, ok := it["pos"].(*types.AttributeValueMemberN)
		if i < 0 || !ok {
			continue
		}
		if pos[pk] == nil {
			pos[pk] = map[string]string{}
		}
		if other, dup := pos[pk][p.Value]; dup {
			t.Fatalf("heads %s and %s share position %s of %s", other, sk, p.Value, pk)
		}
		pos[pk][p.Value] = sk
	}
	for pk, ps := range pos {
		for p, part := range ps {
			var at, top int
			fmt.Sscan(p, &at)
			fmt.Sscan(counters[pk], &top)
			if at > top {
				t.Fatalf("head %s at %d, past its shard's counter %d", part, at, top)
			}
		}
	}
}

// TestStagingGuessesUnderRace (issue 31): staged commits of many files
// each (their own paths, in the same two partitions), each from a store of
// its own as from another process, racing each other and single puts
// there, under -race in CI: a staging transaction after a commit's first
// is built from what the commit's earlier ones left and from guesses,
// while the others move the same heads and counters, so guesses go wrong,
// fail their transactions and are built again after a read. Every commit
// lands whole, each partition's feed reaches its head with every path
// once, and no two heads share an index position.
func TestStagingGuessesUnderRace(t *testing.T) {
	ctx := t.Context()
	s, table := smallStoreOver(t, ddb.NewClient(ddblocal.Config(t), ""), 0)
	_, cur, err := s.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	const writers, files, singles = 4, 60, 20
	parts := []string{"race/a", "race/b"}
	var wg sync.WaitGroup
	for w := range writers {
		// Each writer a process of its own: its guesses come from its
		// own pull's read of the counters, as a sync's would.
		_, ws := anotherProcess(t, table)
		if _, _, err := ws.ChangedPartitions(ctx, ""); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			var entries []datastore.Entry
			for _, p := range parts {
				for i := range files {
					st, err := ws.Upload(ctx, fmt.Sprintf("data/%s/w%d-f%02d", p, w, i), strings.NewReader(fmt.Sprintf("w%d", w)), nil)
					if err != nil {
						t.Error(err)
						return
					}
					entries = append(entries, datastore.Entry{Put: &st})
				}
			}
			if _, err := ws.Commit(ctx, nil, entries); err != nil {
				t.Errorf("writer %d: %v", w, err)
			}
		})
	}
	for i := range singles {
		wg.Go(func() {
			p := parts[i%len(parts)]
			if _, err := s.Put(ctx, fmt.Sprintf("data/%s/single%02d", p, i), strings.NewReader("single"), nil); err != nil {
				t.Errorf("single put %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for w := range writers {
		for _, p := range parts {
			for i := range files {
				path := fmt.Sprintf("data/%s/w%d-f%02d", p, w, i)
				_, got, err := s.Get(ctx, path)
				if err != nil || string(got) != fmt.Sprintf("w%d", w) {
					t.Fatalf("%s = %q, %v; want w%d's", path, got, err, w)
				}
			}
		}
	}
	feeds := feedsSince(t, s, cur)
	for _, p := range parts {
		if f, want := feeds[p], writers*files+singles/len(parts); f.changes != want || f.seq != uint64(want) {
			t.Fatalf("%s: %d paths in its feed, head %d; want %d and %d", p, f.changes, f.seq, want, want)
		}
	}
	if left := stagedLeft(t, table); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	headsOwnPositions(t, table)
}
