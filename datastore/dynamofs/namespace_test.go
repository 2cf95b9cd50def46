package dynamofs_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
)

// sameShard returns n model partitions that all hash to one shard, so
// that in one namespace their commits move one shard counter.
func sameShard(n int) []string {
	var out []string
	want := dynamofs.ShardOf("m/0")
	for i := 0; len(out) < n; i++ {
		if p := fmt.Sprintf("m/%d", i); dynamofs.ShardOf(p) == want {
			out = append(out, p)
		}
	}
	return out
}

// TestNamespacesNeverContend runs the same load twice: eight writers, each
// committing to its own partition, all eight partitions in one shard. In
// eight namespaces no commit loses a race and no transaction is retried:
// they share no item (each namespace has its own shard counters). In one
// namespace (the negative control) the writers race on the shared shard
// counter and commits are read again and retried.
func TestNamespacesNeverContend(t *testing.T) {
	const writers, commits = 8, 12
	parts := sameShard(writers)
	run := func(t *testing.T, namespace func(w int) string) dynamofs.Stats {
		d := newDriver(t)
		root := datastore.New(d)
		ctx := t.Context()
		// Upload first, so that the writers' commits overlap as much as
		// they can.
		staged := make([][]datastore.Staged, writers)
		stores := make([]*datastore.Store, writers)
		for w := range writers {
			s, err := root.Namespace(namespace(w))
			if err != nil {
				t.Fatal(err)
			}
			stores[w] = s
			for i := range commits {
				st, err := s.Upload(ctx, fmt.Sprintf("data/%s/f%d", parts[w], i%3), strings.NewReader(fmt.Sprint(i)), nil)
				if err != nil {
					t.Fatal(err)
				}
				staged[w] = append(staged[w], st)
			}
		}
		before := d.Stats()
		start := time.Now()
		var wg sync.WaitGroup
		gate := make(chan struct{})
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				<-gate
				for _, st := range staged[w] {
					if _, err := stores[w].Commit(ctx, nil, []datastore.Entry{{Put: &st}}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		close(gate)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		cost := d.Stats().Sub(before)
		t.Logf("%d writers × %d commits: %d commit races, %d transaction retries, %d TransactWriteItems, %d TransactGetItems, %v",
			writers, commits, cost.CommitRaces, cost.TransactRetries, cost.Requests["TransactWriteItems"], cost.Requests["TransactGetItems"],
			time.Since(start).Round(time.Millisecond))
		// Every commit landed once, at dense positions, in its namespace.
		for w, s := range stores {
			if h, err := s.Head(ctx, parts[w]); err != nil || h.Seq != commits {
				t.Fatalf("writer %d's head = %+v, %v; want seq %d", w, h, err, commits)
			}
		}
		return cost
	}
	t.Run("own-namespaces", func(t *testing.T) {
		cost := run(t, func(w int) string { return fmt.Sprintf("w%d", w) })
		if cost.CommitRaces != 0 || cost.TransactRetries != 0 {
			t.Fatalf("writers in their own namespaces contended: %d commit races, %d transaction retries", cost.CommitRaces, cost.TransactRetries)
		}
		if n := cost.Requests["TransactWriteItems"]; n != writers*commits {
			t.Fatalf("%d transactions for %d commits: some were sent again", n, writers*commits)
		}
	})
	t.Run("one-namespace", func(t *testing.T) {
		cost := run(t, func(int) string { return "shared" })
		if cost.CommitRaces == 0 {
			t.Fatalf("writers in one namespace, one shard, never raced: the control does not exercise the shared counter")
		}
	})
}

// TestNamespaceLayout reads the table's items directly: the root keeps the
// original layout (existing tables keep working), a namespace's and the
// catalog scope's items are under "s#NAME#", records are the root's only,
// and each namespace reclaims only its own versions.
func TestNamespaceLayout(t *testing.T) {
	d := newDriver(t)
	ctx := t.Context()
	start := time.Now()
	root := datastore.New(d)
	root.SetClock(func() time.Time { return start })
	alpha, err := root.Namespace("alpha")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := root.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*datastore.Store{root, alpha, alpha, cat} {
		if _, err := s.Put(ctx, "data/m/1/f", strings.NewReader(oneChunk("x")), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := alpha.Records().CASRecord(ctx, "rec/alpha/sync", metastore.ExpectAbsent(), []byte("t")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Namespace("a#b"); err == nil {
		t.Fatal("a namespace with '#' was accepted")
	}
	out, err := ddblocal.Client(t).Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(d.Table())})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string][]string{}
	for _, it := range out.Items {
		pk := attr(it, "pk")
		scope, rest := "", pk
		if after, ok := strings.CutPrefix(pk, "s#"); ok {
			name, r, _ := strings.Cut(after, "#")
			scope, rest = name, r
		}
		kinds[scope] = append(kinds[scope], rest[:2])
	}
	sh := dynamofs.ShardOf("m/1")
	want := map[string]string{
		// Two heads each: the model's, and the claim of m/1 in the
		// partition "data" (claims.go).
		"":         "c# f# k# k# k# n# r# x# x#", // root: its file, a lock record, alpha's namespace record, the layout record
		"alpha":    "c# c# f# g# n# r# x# x#",    // two versions, the first replaced (its reclaim entry)
		"_catalog": "c# f# n# r# x# x#",
	}
	for scope, w := range want {
		slices.Sort(kinds[scope])
		// Intents are consumed by the commits; what remains is the layout.
		if got := strings.Join(kinds[scope], " "); got != w {
			t.Errorf("scope %q holds %s; want %s", scope, got, w)
		}
	}
	if len(kinds) != len(want) {
		t.Errorf("scopes %v; want root, alpha and _catalog", slices.Collect(maps.Keys(kinds)))
	}
	for _, it := range out.Items {
		if pk := attr(it, "pk"); pk == "s#alpha#x#"+sh && attr(it, "sk") != "m/1" {
			t.Errorf("alpha's head of m/1 has sort key %q", attr(it, "sk"))
		}
	}
	// Reclaim in the root does not see alpha's replaced version; alpha's does.
	root.SetClock(func() time.Time { return start.Add(2 * time.Hour) })
	if rs, err := root.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Hour}); err != nil || rs.Versions != 0 {
		t.Fatalf("root Reclaim = %+v, %v; want nothing (the replaced version is alpha's)", rs, err)
	}
	alpha2, _ := root.Namespace("alpha")
	if rs, err := alpha2.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Hour}); err != nil || rs.Versions != 1 || rs.Chunks != 1 {
		t.Fatalf("alpha Reclaim = %+v, %v; want 1 version, 1 chunk", rs, err)
	}
}

func attr(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
