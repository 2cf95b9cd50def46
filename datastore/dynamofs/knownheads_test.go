package dynamofs_test

import (
	"context"
	"fmt"
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

// TestChangedPartitionsFromKnownHeads (issue 31): a read-ahead made with
// the partitions a reader knows (datastore.WithKnownPartitions) reads
// their heads with the shard counters, in the same BatchGetItem, and
// ChangedPartitions answers a changed shard from them, without its Query,
// when they hold every index position the shard's counter moved through.
// Its answer is the one the Queries give, in each case: known partitions
// each changed once (no Query), a partition it does not know changed
// (that shard is queried), a known partition changed twice (its earlier
// position is gone: queried), every one changed by another process.
func TestChangedPartitionsFromKnownHeads(t *testing.T) {
	raw := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, raw, dynamofs.TableInput(table))
	var queries atomic.Int32
	counting := faultapi.New(ddb.NewClient(ddblocal.Config(t), ""), func(op, _ string) faultapi.Fault {
		if op == "Query" {
			queries.Add(1)
		}
		return faultapi.None
	})
	ctx := t.Context()
	root, ns := rootAndNamespace(t, counting, table, "ns")
	_, other := rootAndNamespace(t, ddb.NewClient(ddblocal.Config(t), ""), table, "ns")
	put := func(s *datastore.Store, part, name string) {
		t.Helper()
		p := "data/" + part + "/" + name
		if _, err := s.Put(ctx, p, strings.NewReader(p), nil); err != nil {
			t.Fatal(err)
		}
	}
	var known []string
	for i := range 40 {
		part := fmt.Sprintf("m/%d", i)
		known = append(known, part)
		put(ns, part, "a")
	}
	_, cursor, err := ns.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}

	// read returns ChangedPartitions after cursor served by a read-ahead
	// made with the known partitions, and the Queries it sent; and the
	// same call without a read-ahead, which queries every changed shard.
	read := func(when string) (withKnown, plain []datastore.Head, queried int32, next string) {
		t.Helper()
		actx, err := root.ReadAhead(datastore.WithKnownPartitions(ctx, ns, known), []*datastore.Store{ns}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		before := queries.Load()
		withKnown, next, err = ns.ChangedPartitions(actx, cursor)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		queried = queries.Load() - before
		plain, plainNext, err := ns.ChangedPartitions(context.Background(), cursor)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if plainNext != next {
			t.Errorf("%s: cursor %q from the known heads, %q from the Queries", when, next, plainNext)
		}
		byPart := func(a, b datastore.Head) int { return strings.Compare(a.Partition, b.Partition) }
		slices.SortFunc(withKnown, byPart)
		slices.SortFunc(plain, byPart)
		if !slices.Equal(withKnown, plain) {
			t.Errorf("%s: changed partitions from the known heads %v, from the Queries %v", when, withKnown, plain)
		}
		return withKnown, plain, queried, next
	}

	// Ten known partitions, each changed once by another process.
	for i := range 10 {
		put(other, known[i*4], "b")
	}
	got, _, queried, next := read("ten known partitions changed once")
	if len(got) != 10 || queried != 0 {
		t.Errorf("ten known partitions changed once: %d changed, %d Queries; want 10 and none", len(got), queried)
	}
	cursor = next

	// A partition the reader does not know: its shard is queried.
	put(other, "m/new", "a")
	put(other, known[1], "b")
	got, _, queried, next = read("a partition not known")
	if len(got) != 2 || queried == 0 {
		t.Errorf("a partition not known changed: %d changed, %d Queries; want 2 and its shard queried", len(got), queried)
	}
	cursor = next

	// A known partition changed twice: its first position is no head's
	// now, but the head remembers it (prevpos.go).
	put(other, known[2], "b")
	put(other, known[2], "c")
	got, _, queried, next = read("a known partition changed twice")
	if len(got) != 1 || queried != 0 {
		t.Errorf("a known partition changed twice: %d changed, %d Queries; want 1 and none", len(got), queried)
	}
	cursor = next

	// Changed five times: more moves than its head remembers.
	for _, n := range []string{"d", "e", "f", "g", "h"} {
		put(other, known[3], n)
	}
	got, _, queried, _ = read("a known partition changed five times")
	if len(got) != 1 || queried != 1 {
		t.Errorf("a known partition changed five times: %d changed, %d Queries; want 1 and one", len(got), queried)
	}
}

// TestForgedIndexPositionIsChecked: a foreign writer (a raw UpdateItem,
// as boto3 would make) gives a head the index position another head of
// its shard holds. A reader that knows only the first would take the
// other's move for it (a Query of the shard returns both); lake data
// check names the second head of the pair (which one was forged cannot be
// told) and --repair moves it to the shard's next position, after which
// that reader, from the same cursor, reads both.
func TestForgedIndexPositionIsChecked(t *testing.T) {
	ctx := t.Context()
	f := twoInOneShard(t)
	raw, table, known, other, put, cursor := f.raw, f.table, f.known, f.other, f.put, f.cursor
	put(other, "b")
	headPK := "s#ns#x#" + dynamofs.ShardOf(known)
	get := func(sk string) map[string]types.AttributeValue {
		t.Helper()
		out, err := raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: headPK}, "sk": &types.AttributeValueMemberS{Value: sk}}})
		if err != nil || out.Item == nil {
			t.Fatalf("raw GetItem of %s's head: %v, %v", sk, out, err)
		}
		return out.Item
	}
	pos := get(other)["pos"]
	e, err := expression.NewBuilder().WithUpdate(expression.Set(expression.Name("pos"), expression.Value(pos))).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table,
		Key:              map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: headPK}, "sk": &types.AttributeValueMemberS{Value: known}},
		UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}); err != nil {
		t.Fatal(err)
	}
	f.checkRepairs(t, "is also the head of")
	if got, want := f.readKnowing(t, cursor), []string{known, other}; !slices.Equal(got, want) {
		t.Errorf("after the repair a reader that knows %s reads %v, want %v", known, got, want)
	}
}

// shardPair is a datastore on a fresh table (and a raw client of it) with
// namespace ns, two partitions of one shard holding a file each, a put of
// a file into one, and the cursor after those files.
type shardPair struct {
	raw          *dynamodb.Client
	table        string
	root, ns     *datastore.Store
	known, other string
	put          func(part, name string)
	cursor       string // ChangedPartitions' after a file put in each
}

// twoInOneShard makes a shardPair: the hostile peers of the index
// positions forge one head's position after the other's.
func twoInOneShard(t *testing.T) shardPair {
	t.Helper()
	f := shardPair{raw: ddblocal.Client(t), table: ddblocal.TableName(t), known: "m/0"}
	ddblocal.CreateTable(t, f.raw, dynamofs.TableInput(f.table))
	f.root, f.ns = rootAndNamespace(t, ddb.NewClient(ddblocal.Config(t), ""), f.table, "ns")
	for i := 1; f.other == ""; i++ {
		if m := fmt.Sprintf("m/%d", i); dynamofs.ShardOf(m) == dynamofs.ShardOf(f.known) {
			f.other = m
		}
	}
	f.put = func(part, name string) {
		t.Helper()
		if _, err := f.ns.Put(t.Context(), "data/"+part+"/"+name, strings.NewReader(name), nil); err != nil {
			t.Fatal(err)
		}
	}
	f.put(f.known, "a")
	f.put(f.other, "a")
	var err error
	if _, f.cursor, err = f.ns.ChangedPartitions(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	return f
}

// readKnowing returns the partitions ChangedPartitions names after cursor
// to a reader that knows f.known alone (its head read with the counters).
func (f shardPair) readKnowing(t *testing.T, cursor string) []string {
	t.Helper()
	ctx := t.Context()
	actx, err := f.root.ReadAhead(datastore.WithKnownPartitions(ctx, f.ns, []string{f.known}), []*datastore.Store{f.ns}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	heads, _, err := f.ns.ChangedPartitions(actx, cursor)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, h := range heads {
		parts = append(parts, h.Partition)
	}
	slices.Sort(parts)
	return parts
}

// checkRepairs wants lake data check to name one problem (what says
// what), --repair to repair it, and a check after it to be clean.
func (f shardPair) checkRepairs(t *testing.T, what string) {
	t.Helper()
	ctx := t.Context()
	rep, err := f.ns.Check(ctx, datastore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].What, what) {
		t.Fatalf("check: %v, want one problem naming %q", rep.Problems, what)
	}
	if rep, err = f.ns.Check(ctx, datastore.CheckOptions{Repair: true}); err != nil || len(rep.Problems) != 1 || !rep.Problems[0].Repaired {
		t.Fatalf("repair: %v, %v", rep.Problems, err)
	}
	if rep, err := f.ns.Check(ctx, datastore.CheckOptions{}); err != nil || len(rep.Problems) != 0 {
		t.Errorf("check after the repair: %v, %v; want clean", rep.Problems, err)
	}
}

// rootAndNamespace opens a datastore on table through api, as a process
// does, and its namespace name.
func rootAndNamespace(t *testing.T, api ddb.API, table, name string) (root, ns *datastore.Store) {
	t.Helper()
	d, err := dynamofs.Open(t.Context(), api, dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	root, err = datastore.Open(t.Context(), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ns, err = root.Namespace(name); err != nil {
		t.Fatal(err)
	}
	return root, ns
}

// TestForgedEarlierPositionIsChecked (the hostile peer of prevpos.go): a
// foreign writer (a raw UpdateItem, as boto3 would make) writes into a
// head's earlier index positions the position another head of its shard
// holds now. A reader that knows only the first would take the other's
// move for one of its own, and not read it; lake data check names the
// forged list and --repair removes it, after which that reader, from the
// same cursor, reads both.
func TestForgedEarlierPositionIsChecked(t *testing.T) {
	ctx := t.Context()
	f := twoInOneShard(t)
	raw, table, known, other, put, cursor := f.raw, f.table, f.known, f.other, f.put, f.cursor
	put(other, "b")
	put(known, "b")
	headPK := "s#ns#x#" + dynamofs.ShardOf(known)
	key := func(sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: headPK}, "sk": &types.AttributeValueMemberS{Value: sk}}
	}
	out, err := raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true), Key: key(other)})
	if err != nil || out.Item == nil {
		t.Fatalf("raw GetItem of %s's head: %v, %v", other, out, err)
	}
	e, err := expression.NewBuilder().WithUpdate(expression.Set(expression.Name("prev"), expression.Value(&types.AttributeValueMemberL{Value: []types.AttributeValue{out.Item["pos"]}}))).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key(known),
		UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}); err != nil {
		t.Fatal(err)
	}
	// What the forgery does, so that the check below is checked against
	// a list that hides a move.
	if got := f.readKnowing(t, cursor); !slices.Equal(got, []string{known}) {
		t.Fatalf("with the forged list a reader that knows %s reads %v; the forgery hides nothing, and the test checks nothing", known, got)
	}
	f.checkRepairs(t, "remembers index position")
	if got, want := f.readKnowing(t, cursor), []string{known, other}; !slices.Equal(got, want) {
		t.Errorf("after the repair a reader that knows %s reads %v, want %v", known, got, want)
	}
}
