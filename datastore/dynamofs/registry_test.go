package dynamofs_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/faultapi"
	"github.com/lakemeta/lake/metastore"
)

// TestRegistryInTheCommit (issue 31): a partition's first commit registers
// it in its own transaction and a later commit, from a process that never
// registered it, relies on its head: no UpdateItem either way, and
// Partitions names it.
func TestRegistryInTheCommit(t *testing.T) {
	faulty, s, other := faultyPair(t)
	ctx := t.Context()
	var updates atomic.Int32
	faulty.SetPlan(func(op, _ string) faultapi.Fault {
		if op == "UpdateItem" {
			updates.Add(1)
		}
		return faultapi.None
	})
	if _, err := s.Put(ctx, "data/m/1/a", strings.NewReader("a"), nil); err != nil {
		t.Fatal(err)
	}
	if p, err := other.Partitions(ctx); err != nil || strings.Join(p, ",") != "m/1" {
		t.Fatalf("after a first commit Partitions = %v, %v; want m/1", p, err)
	}
	if _, err := other.Put(ctx, "data/m/1/b", strings.NewReader("b"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "data/m/1/c", strings.NewReader("c"), nil); err != nil {
		t.Fatal(err)
	}
	if n := updates.Load(); n != 0 {
		t.Fatalf("commits made %d UpdateItem requests; want the registration in the commit's transaction", n)
	}
}

// TestRegistryAfterADropByAnotherProcess: a process that registered a
// partition commits to it again after another process dropped it: the
// partition is registered again, although this process's cache says it
// was (the commit reads the head, which the drop deleted).
func TestRegistryAfterADropByAnotherProcess(t *testing.T) {
	_, s, other := faultyPair(t)
	ctx := t.Context()
	if _, err := s.Put(ctx, "data/m/1/a", strings.NewReader("a"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := other.DropPartition(ctx, nil, "m/1"); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Partitions(ctx); err != nil || len(p) != 0 {
		t.Fatalf("after the drop Partitions = %v, %v", p, err)
	}
	if _, err := s.Put(ctx, "data/m/1/again", strings.NewReader("a"), nil); err != nil {
		t.Fatal(err)
	}
	if p, err := other.Partitions(ctx); err != nil || strings.Join(p, ",") != "m/1" {
		t.Fatalf("after a commit to the partition another process dropped Partitions = %v, %v; want m/1", p, err)
	}
}

// TestDropRacingAFirstCommit: a drop of a partition with no head (so no seq
// to condition on) races the partition's first commit, landed by another
// process just before the drop's transaction: the drop is refused, and the
// partition stays registered with its file (a drop used to take it out of
// the registry, leaving it live but unlisted).
func TestDropRacingAFirstCommit(t *testing.T) {
	faulty, s, other := faultyPair(t)
	ctx := t.Context()
	var once sync.Once
	faulty.SetPlan(func(op, _ string) faultapi.Fault {
		if op == "TransactWriteItems" {
			once.Do(func() {
				if _, err := other.Put(ctx, "data/m/9/late", strings.NewReader("late"), nil); err != nil {
					t.Errorf("racing commit: %v", err)
				}
			})
		}
		return faultapi.None
	})
	_, err := s.DropPartition(ctx, nil, "m/9")
	if !errors.Is(err, metastore.ErrConflict) || datastore.IsFenceConflict(err) {
		t.Fatalf("drop raced by a first commit: %v; want a conflict that is not the fence's", err)
	}
	faulty.SetPlan(nil)
	if p, err := other.Partitions(ctx); err != nil || strings.Join(p, ",") != "m/9" {
		t.Fatalf("after the refused drop Partitions = %v, %v; want m/9", p, err)
	}
	if _, got, err := s.Get(ctx, "data/m/9/late"); err != nil || string(got) != "late" {
		t.Fatalf("the racing commit's file reads %q, %v", got, err)
	}
}

// TestRegistryDeletedByAForeignWriter: another client of the table deletes
// a registry shard's item. Commits to the partition (whose head says it
// was registered) do not write it back, but nothing lake answers from the
// heads is fooled: pulls (ChangedPartitions) still name the partition, and
// Check reports the unregistered partition and --repair registers it.
func TestRegistryDeletedByAForeignWriter(t *testing.T) {
	raw, table, s := rawStore(t)
	ctx := t.Context()
	if _, err := s.Put(ctx, "data/m/1/a", strings.NewReader("a"), nil); err != nil {
		t.Fatal(err)
	}
	_, cursor, err := s.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	k := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "r#" + shardOf("m/1")}, "sk": &types.AttributeValueMemberS{Value: "r"}}
	if _, err := raw.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: k}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "data/m/1/b", strings.NewReader("b"), nil); err != nil {
		t.Fatal(err)
	}
	heads, _, err := s.ChangedPartitions(ctx, cursor)
	if err != nil || len(heads) != 1 || heads[0].Partition != "m/1" {
		t.Fatalf("a pull after the foreign delete reads %v, %v; want m/1 changed", heads, err)
	}
	rep, err := s.Check(ctx, datastore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := slices.ContainsFunc(rep.Problems, func(p datastore.Problem) bool {
		return strings.Contains(p.String(), "partition m/1 holds files but is not registered")
	})
	if !found {
		t.Fatalf("check did not report the unregistered partition: %v", rep.Problems)
	}
	if _, err := s.Check(ctx, datastore.CheckOptions{Repair: true}); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Partitions(ctx); err != nil || strings.Join(p, ",") != "m/1" {
		t.Fatalf("after the repair Partitions = %v, %v; want m/1", p, err)
	}
}
