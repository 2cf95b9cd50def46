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
	raw := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, raw, dynamofs.TableInput(table))
	ctx := t.Context()
	root, ns := rootAndNamespace(t, ddb.NewClient(ddblocal.Config(t), ""), table, "ns")
	known, other := "m/0", ""
	for i := 1; other == ""; i++ {
		if m := fmt.Sprintf("m/%d", i); dynamofs.ShardOf(m) == dynamofs.ShardOf(known) {
			other = m
		}
	}
	put := func(part, name string) {
		t.Helper()
		if _, err := ns.Put(ctx, "data/"+part+"/"+name, strings.NewReader(name), nil); err != nil {
			t.Fatal(err)
		}
	}
	put(known, "a")
	put(other, "a")
	_, cursor, err := ns.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
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
	rep, err := ns.Check(ctx, datastore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].What, "is also the head of") {
		t.Fatalf("check of a head at another's index position: %v, want it named", rep.Problems)
	}
	if rep, err = ns.Check(ctx, datastore.CheckOptions{Repair: true}); err != nil || len(rep.Problems) != 1 || !rep.Problems[0].Repaired {
		t.Fatalf("repair: %v, %v", rep.Problems, err)
	}
	if rep, err := ns.Check(ctx, datastore.CheckOptions{}); err != nil || len(rep.Problems) != 0 {
		t.Errorf("check after the repair: %v, %v; want clean", rep.Problems, err)
	}
	actx, err := root.ReadAhead(datastore.WithKnownPartitions(ctx, ns, []string{known}), []*datastore.Store{ns}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	heads, _, err := ns.ChangedPartitions(actx, cursor)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, h := range heads {
		parts = append(parts, h.Partition)
	}
	slices.Sort(parts)
	if want := []string{known, other}; !slices.Equal(parts, want) {
		t.Errorf("after the repair a reader that knows %s reads %v, want %v", known, parts, want)
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
	raw := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, raw, dynamofs.TableInput(table))
	ctx := t.Context()
	root, ns := rootAndNamespace(t, ddb.NewClient(ddblocal.Config(t), ""), table, "ns")
	known, other := "m/0", ""
	for i := 1; other == ""; i++ {
		if m := fmt.Sprintf("m/%d", i); dynamofs.ShardOf(m) == dynamofs.ShardOf(known) {
			other = m
		}
	}
	put := func(part, name string) {
		t.Helper()
		if _, err := ns.Put(ctx, "data/"+part+"/"+name, strings.NewReader(name), nil); err != nil {
			t.Fatal(err)
		}
	}
	put(known, "a")
	put(other, "a")
	_, cursor, err := ns.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
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
	readKnowing := func() []string {
		t.Helper()
		actx, err := root.ReadAhead(datastore.WithKnownPartitions(ctx, ns, []string{known}), []*datastore.Store{ns}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		heads, _, err := ns.ChangedPartitions(actx, cursor)
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
	// What the forgery does, so that the check below is checked against
	// a list that hides a move.
	if got := readKnowing(); !slices.Equal(got, []string{known}) {
		t.Fatalf("with the forged list a reader that knows %s reads %v; the forgery hides nothing, and the test checks nothing", known, got)
	}
	rep, err := ns.Check(ctx, datastore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].What, "remembers index position") {
		t.Fatalf("check of a head remembering another's index position: %v, want it named", rep.Problems)
	}
	if rep, err = ns.Check(ctx, datastore.CheckOptions{Repair: true}); err != nil || len(rep.Problems) != 1 || !rep.Problems[0].Repaired {
		t.Fatalf("repair: %v, %v", rep.Problems, err)
	}
	if rep, err := ns.Check(ctx, datastore.CheckOptions{}); err != nil || len(rep.Problems) != 0 {
		t.Errorf("check after the repair: %v, %v; want clean", rep.Problems, err)
	}
	if got, want := readKnowing(), []string{known, other}; !slices.Equal(got, want) {
		t.Errorf("after the repair a reader that knows %s reads %v, want %v", known, got, want)
	}
}
