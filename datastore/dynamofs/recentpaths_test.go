package dynamofs_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultapi"
)

// feedsByKeys is a datastore on a fresh table with namespace ns, as three
// processes open it: a reader whose requests are counted, a writer, and a
// second reader that never reads the heads' recent paths (its own
// ChangedPartitions calls offer it nothing: it reads every feed by its
// Query, as a lake before issue 31's recent paths did).
type feedsByKeys struct {
	raw              *dynamodb.Client
	table            string
	reader, writer   *datastore.Store
	plain            *datastore.Store
	queries, batches atomic.Int32
}

func newFeedsByKeys(t *testing.T, writerOpts dynamofs.Options) *feedsByKeys {
	t.Helper()
	f := &feedsByKeys{raw: ddblocal.Client(t), table: ddblocal.TableName(t)}
	ddblocal.CreateTable(t, f.raw, dynamofs.TableInput(f.table))
	counting := faultapi.New(ddb.NewClient(ddblocal.Config(t), ""), func(op, _ string) faultapi.Fault {
		switch op {
		case "Query":
			f.queries.Add(1)
		case "BatchGetItem":
			f.batches.Add(1)
		}
		return faultapi.None
	})
	_, f.reader = rootAndNamespace(t, counting, f.table, "ns")
	_, f.plain = rootAndNamespace(t, ddb.NewClient(ddblocal.Config(t), ""), f.table, "ns")
	writerOpts.Table = f.table
	d, err := dynamofs.Open(t.Context(), ddb.NewClient(ddblocal.Config(t), ""), writerOpts)
	if err != nil {
		t.Fatal(err)
	}
	root, err := datastore.Open(t.Context(), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.writer, err = root.Namespace("ns"); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *feedsByKeys) put(t *testing.T, path, content string) {
	t.Helper()
	if _, err := f.writer.Put(t.Context(), path, strings.NewReader(content), nil); err != nil {
		t.Fatal(err)
	}
}

func (f *feedsByKeys) del(t *testing.T, path string) {
	t.Helper()
	if _, err := f.writer.Delete(t.Context(), path); err != nil {
		t.Fatal(err)
	}
}

// position is where a reader stands: a ChangedPartitions cursor and each
// partition's feed position.
type position struct {
	cursor string
	at     map[string]uint64
}

// start is the position after everything written so far.
func (f *feedsByKeys) start(t *testing.T) position {
	t.Helper()
	heads, cursor, err := f.plain.ChangedPartitions(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	p := position{cursor: cursor, at: map[string]uint64{}}
	for _, h := range heads {
		p.at[h.Partition] = h.Seq
	}
	return p
}

// read reads the changes after from by the counted reader (its
// ChangedPartitions, then ChangesOfHeads) and returns them with the Queries
// and BatchGetItems ChangesOfHeads sent; and wants the same heads' feeds
// read by the plain reader (Queries only) to be the same. between runs
// after the heads were read, before their feeds are.
func (f *feedsByKeys) read(t *testing.T, from position, limit int, between func()) (map[string]datastore.HeadChanges, int32, int32, position) {
	t.Helper()
	ctx := t.Context()
	heads, next, err := f.reader.ChangedPartitions(ctx, from.cursor)
	if err != nil {
		t.Fatal(err)
	}
	if between != nil {
		between()
	}
	q, b := f.queries.Load(), f.batches.Load()
	got, err := f.reader.ChangesOfHeads(ctx, heads, from.at, limit)
	if err != nil {
		t.Fatal(err)
	}
	q, b = f.queries.Load()-q, f.batches.Load()-b
	want, err := f.plain.ChangesOfHeads(ctx, heads, from.at, limit)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := describe(got), describe(want); g != w {
		t.Errorf("read by the heads' paths:\n%s\nread by Queries:\n%s", g, w)
	}
	to := position{cursor: next, at: maps.Clone(from.at)}
	for p, hc := range got {
		to.at[p] = hc.UpTo
	}
	return got, q, b, to
}

// describe is a comparable text of what ChangesOfHeads returned.
func describe(m map[string]datastore.HeadChanges) string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(m)) {
		hc := m[p]
		fmt.Fprintf(&b, "%s up to %d horizon %v:", p, hc.UpTo, hc.Horizon)
		for _, c := range hc.Changes {
			fmt.Fprintf(&b, " %d %s del=%v ver=%s inline=%q;", c.Pos, c.Path, c.Deleted, c.Version, c.Inline)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestFeedsReadByTheirHeadsPaths (issue 31, recentpaths.go): a head names
// the paths of its last changes, and a reader of the partitions
// ChangedPartitions named reads their feeds by those paths, every
// partition's in one BatchGetItem, with no Query and no read of the
// floors; its answer is the Queries' in every case: a put, a path put and
// deleted, a commit of three, more changes than a head names (that
// partition queried), a change since the heads were read (to a path the
// head names or another), a staged commit (its head names
// nothing until a plain commit starts a new run), a limit.
func TestFeedsReadByTheirHeadsPaths(t *testing.T) {
	f := newFeedsByKeys(t, dynamofs.Options{MaxCommit: 4})
	for _, m := range []string{"m/0", "m/1", "m/2"} {
		f.put(t, "data/"+m+"/a", "first")
	}
	pos := f.start(t)

	f.put(t, "data/m/0/b", "b")
	f.put(t, "data/m/1/a", "again")
	f.del(t, "data/m/1/a")
	var entries []datastore.Entry
	for _, n := range []string{"x", "y", "z"} {
		s, err := f.writer.Upload(t.Context(), "data/m/2/"+n, strings.NewReader(n), nil)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, datastore.Entry{Put: &s})
	}
	if _, err := f.writer.Commit(t.Context(), nil, entries); err != nil {
		t.Fatal(err)
	}
	got, q, b, next := f.read(t, pos, 100, nil)
	if len(got) != 3 || q != 0 || b != 1 {
		t.Errorf("three partitions changed: %d read, %d Queries and %d BatchGetItems; want 3, none and 1 (the items; no floors: the items prove the feeds whole)", len(got), q, b)
	}
	if n := len(got["m/1"].Changes); n != 1 || !got["m/1"].Changes[0].Deleted {
		t.Errorf("a path put and deleted: %v; want its deletion alone, as the Query returns it", got["m/1"].Changes)
	}
	pos = next

	// More changes than a head names: that partition is queried.
	for i := range 9 {
		f.put(t, fmt.Sprintf("data/m/0/c%d", i), "c")
	}
	f.put(t, "data/m/1/b", "b")
	got, q, _, next = f.read(t, pos, 100, nil)
	if len(got) != 2 || q != 1 {
		t.Errorf("nine changes of one partition: %d read, %d Queries; want 2 and 1 (that partition's)", len(got), q)
	}
	pos = next

	// A change since the heads were read, to a path its head names: the
	// item is past the head, and left out as the Query leaves it out; to
	// another path: the items the head names are still its own.
	f.put(t, "data/m/0/d", "d")
	f.put(t, "data/m/1/c", "c")
	_, q, _, next = f.read(t, pos, 100, func() {
		f.put(t, "data/m/0/d", "d again")
		f.put(t, "data/m/1/other", "other")
	})
	if q != 0 {
		t.Errorf("a change since the heads were read: %d Queries; want none", q)
	}
	pos = next
	_, _, _, pos = f.read(t, pos, 100, nil)

	// A staged commit (more entries than MaxCommit): its head names
	// nothing of it, and the reader queries; a plain commit after it
	// starts a new run, which a reader from just before it reads.
	entries = nil
	for i := range 6 {
		s, err := f.writer.Upload(t.Context(), fmt.Sprintf("data/m/2/s%d", i), strings.NewReader("s"), nil)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, datastore.Entry{Put: &s})
	}
	if _, err := f.writer.Commit(t.Context(), nil, entries); err != nil {
		t.Fatal(err)
	}
	got, q, _, next = f.read(t, pos, 100, nil)
	if len(got["m/2"].Changes) != 6 || q != 1 {
		t.Errorf("a staged commit: %d changes, %d Queries; want 6 and 1", len(got["m/2"].Changes), q)
	}
	pos = next
	f.put(t, "data/m/2/after", "after")
	if _, q, _, pos = f.read(t, pos, 100, nil); q != 0 {
		t.Errorf("a plain commit after a staged one: %d Queries; want none", q)
	}

	// A limit: the first changes, and the position of the last returned.
	f.put(t, "data/m/1/l1", "l")
	f.put(t, "data/m/1/l2", "l")
	f.put(t, "data/m/1/l3", "l")
	got, q, _, _ = f.read(t, pos, 2, nil)
	if len(got["m/1"].Changes) != 2 || q != 0 {
		t.Errorf("a limit of 2: %d changes, %d Queries; want 2 and none", len(got["m/1"].Changes), q)
	}
}

// TestForgedRecentPathsAreChecked (the hostile peer of recentpaths.go): a
// foreign writer (a raw UpdateItem, as boto3 would make) rewrites a head's
// recent paths. Malformed ones (not a map, a path that is a number, an end
// that is not the head's seq, an empty path) and paths of another
// partition are ignored or refused by the items read: the reader queries
// and reads what the Query does. A well-formed run that names, for the
// change of one path, another path of the run hides that change from a
// reader of the feed by paths (shown, so that the check is checked against
// a forgery that hides something); lake data check names it, --repair
// removes the run, and the reader then reads the change.
func TestForgedRecentPathsAreChecked(t *testing.T) {
	ctx := t.Context()
	f := newFeedsByKeys(t, dynamofs.Options{})
	f.put(t, "data/m/0/a", "a")
	pos := f.start(t)
	f.put(t, "data/m/0/x", "x")
	f.put(t, "data/m/0/y", "y")
	seq := pos.at["m/0"] + 2
	headKey := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "s#ns#x#" + dynamofs.ShardOf("m/0")},
		"sk": &types.AttributeValueMemberS{Value: "m/0"},
	}
	forge := func(v types.AttributeValue) {
		t.Helper()
		e, err := expression.NewBuilder().WithUpdate(expression.Set(expression.Name("recent"), expression.Value(v))).Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.raw.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &f.table, Key: headKey,
			UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}); err != nil {
			t.Fatal(err)
		}
	}
	run := func(to uint64, paths ...types.AttributeValue) types.AttributeValue {
		return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"to": &types.AttributeValueMemberN{Value: fmt.Sprint(to)},
			"p":  &types.AttributeValueMemberL{Value: paths},
		}}
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	// The head as lake wrote it names both: read by paths.
	out, err := f.raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: &f.table, Key: headKey, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item["recent"] == nil {
		t.Fatalf("the head lake wrote: %v, %v; want its recent paths", out, err)
	}
	if _, q, _, _ := f.read(t, pos, 100, nil); q != 0 {
		t.Fatalf("the head as lake wrote it: %d Queries; want none", q)
	}
	for _, c := range []struct {
		name string
		v    types.AttributeValue
	}{
		{"not a map", s("data/m/0/x")},
		{"a path that is a number", run(seq, s("data/m/0/x"), &types.AttributeValueMemberN{Value: "7"})},
		{"an end that is not the head's", run(seq-1, s("data/m/0/x"), s("data/m/0/y"))},
		{"an empty path", run(seq, s(""), s("data/m/0/y"))},
		{"paths of another partition", run(seq, s("data/m/1/x"), s("data/m/1/y"))},
	} {
		forge(c.v)
		if got, q, _, _ := f.read(t, pos, 100, nil); q != 1 || len(got["m/0"].Changes) != 2 {
			t.Errorf("%s: %d Queries, %d changes; want the Query's 2", c.name, q, len(got["m/0"].Changes))
		}
	}
	rep, err := f.writer.Check(ctx, datastore.CheckOptions{})
	if err != nil || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].What, "data/m/1/x") {
		t.Errorf("check of a run naming another partition's paths: %v, %v; want it named", rep.Problems, err)
	}

	// y named for x's change: the reader by paths reads y alone.
	forge(run(seq, s("data/m/0/y"), s("data/m/0/y")))
	heads, _, err := f.reader.ChangedPartitions(ctx, pos.cursor)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.reader.ChangesOfHeads(ctx, heads, pos.at, 100)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got["m/0"].Changes); n != 1 {
		t.Fatalf("with the forged run the reader by paths reads %d changes; the forgery hides nothing, and the test checks nothing", n)
	}
	rep, err = f.writer.Check(ctx, datastore.CheckOptions{})
	if err != nil || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].What, `which is "data/m/0/x"'s`) {
		t.Fatalf("check: %v, %v; want the run naming y for x's change", rep.Problems, err)
	}
	if rep, err = f.writer.Check(ctx, datastore.CheckOptions{Repair: true}); err != nil || len(rep.Problems) != 1 || !rep.Problems[0].Repaired {
		t.Fatalf("repair: %v, %v", rep.Problems, err)
	}
	if rep, err := f.writer.Check(ctx, datastore.CheckOptions{}); err != nil || len(rep.Problems) != 0 {
		t.Errorf("check after the repair: %v, %v; want clean", rep.Problems, err)
	}
	if got, _, _, _ := f.read(t, pos, 100, nil); len(got["m/0"].Changes) != 2 {
		t.Errorf("after the repair the reader reads %d changes; want 2", len(got["m/0"].Changes))
	}
}
