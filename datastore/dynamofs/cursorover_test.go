package dynamofs_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dstest"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultapi"
)

// TestChangedPartitionsOverOwnCommit (issue 31): right after its own
// commit, a process knows the partitions changed past the cursor it last
// read without a read of the index, and only when that answer is provable:
// it is then what ChangedPartitions returns; a commit of another process
// or a raw SDK client's counter bump on the commit's shard, a cursor the
// process did not last read answer ok false; another process's commit on
// another shard is left past the cursor returned, and the next
// ChangedPartitions reports it; a staged commit, whose index entries its
// roll-forward moves in one transaction, is answered as a read would.
func TestChangedPartitionsOverOwnCommit(t *testing.T) {
	ctx := t.Context()
	raw := ddblocal.Client(t)
	table, opener := tableOpener(t)
	open := func(maxCommit int) *datastore.Store { return datastore.New(opener(maxCommit)) }
	s, other := open(0), open(0)
	// Models sharing a shard, and one on another shard.
	var same []string
	var elsewhere string
	for i := 0; len(same) < 2 || elsewhere == ""; i++ {
		m := fmt.Sprintf("m/%d", i)
		switch {
		case len(same) == 0 || dynamofs.ShardOf(m) == dynamofs.ShardOf(same[0]):
			if len(same) < 2 {
				same = append(same, m)
			}
		case elsewhere == "":
			elsewhere = m
		}
	}
	mine, sameShard := same[0], same[1]
	dstest.CommitFiles(t, s, mine, 1)
	dstest.CommitFiles(t, s, elsewhere, 1)

	// Nothing else in between: the answer is the read's.
	cur := dstest.ReadCursor(t, s)
	own := dstest.CommitFiles(t, s, mine, 2)
	heads, next, ok := s.ChangedPartitionsOver(cur, own)
	if !ok {
		t.Fatal("own commit right after a read: not answered")
	}
	rh, rnext, err := s.ChangedPartitions(ctx, cur)
	if err != nil || dstest.HeadNames(heads) != dstest.HeadNames(rh) || next != rnext {
		t.Fatalf("answered %s (cursor %x), a read says %s (cursor %x, %v)", dstest.HeadNames(heads), next, dstest.HeadNames(rh), rnext, err)
	}

	// Another process's commit on the same shard first: not answered.
	cur = dstest.ReadCursor(t, s)
	dstest.CommitFiles(t, other, sameShard, 1)
	own = dstest.CommitFiles(t, s, mine, 1)
	if _, _, ok := s.ChangedPartitionsOver(cur, own); ok {
		t.Fatal("answered over another process's commit on the same shard")
	}

	// A raw SDK client bumps the shard's counter: not answered.
	cur = dstest.ReadCursor(t, s)
	ns := "n#" + dynamofs.ShardOf(mine)
	if _, err := raw.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table,
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: ns}, "sk": &types.AttributeValueMemberS{Value: "n"}},
		UpdateExpression:          aws.String("ADD n :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}}}); err != nil {
		t.Fatal(err)
	}
	own = dstest.CommitFiles(t, s, mine, 1)
	if _, _, ok := s.ChangedPartitionsOver(cur, own); ok {
		t.Fatal("answered over a foreign bump of the shard's counter")
	}

	// A cursor this process did not last read: not answered.
	old := dstest.ReadCursor(t, s)
	dstest.CommitFiles(t, s, elsewhere, 1)
	dstest.ReadCursor(t, s)
	own = dstest.CommitFiles(t, s, mine, 1)
	if _, _, ok := s.ChangedPartitionsOver(old, own); ok {
		t.Fatal("answered from a cursor the process did not last read")
	}

	// Another process's commit on another shard: answered without it,
	// and the next read reports it.
	cur = dstest.ReadCursor(t, s)
	theirs := dstest.CommitFiles(t, other, elsewhere, 1)
	own = dstest.CommitFiles(t, s, mine, 1)
	heads, next, ok = s.ChangedPartitionsOver(cur, own)
	if !ok || dstest.HeadNames(heads) != fmt.Sprintf("%s@%d", mine, own[0].Pos) {
		t.Fatalf("with another shard's commit between: %s, %v; want %s@%d", dstest.HeadNames(heads), ok, mine, own[0].Pos)
	}
	rh, _, err = s.ChangedPartitions(ctx, next)
	if err != nil || dstest.HeadNames(rh) != fmt.Sprintf("%s@%d", elsewhere, theirs[0].Pos) {
		t.Fatalf("the read after the answer: %s, %v; want %s@%d", dstest.HeadNames(rh), err, elsewhere, theirs[0].Pos)
	}

	// A staged commit (more entries than one transaction) of two
	// partitions: answered as a read would.
	staged := open(2)
	_, cur, err = staged.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var es []datastore.Entry
	for i, m := range []string{mine, elsewhere, mine, elsewhere, mine} {
		st, err := staged.Upload(ctx, fmt.Sprintf("data/%s/staged%d", m, i), strings.NewReader("s"), nil)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, datastore.Entry{Put: &st})
	}
	own, err = staged.Commit(ctx, nil, es)
	if err != nil {
		t.Fatal(err)
	}
	heads, next, ok = staged.ChangedPartitionsOver(cur, own)
	rh, rnext, err = staged.ChangedPartitions(ctx, cur)
	if !ok || err != nil || dstest.HeadNames(heads) != dstest.HeadNames(rh) || next != rnext {
		t.Fatalf("staged commit: answered %s (%v), a read says %s (%v)", dstest.HeadNames(heads), ok, dstest.HeadNames(rh), err)
	}

	// Another process commits to the staged commit's shard between its
	// staging transactions: not answered.
	var txs atomic.Int32
	faulty := faultapi.New(ddb.NewClient(ddblocal.Config(t), ""), func(op, _ string) faultapi.Fault {
		if op == "TransactWriteItems" && txs.Add(1) == 2 {
			if _, err := other.Put(ctx, fmt.Sprintf("data/%s/between", sameShard), strings.NewReader("b"), nil); err != nil {
				t.Error(err)
			}
		}
		return faultapi.None
	})
	d, err := dynamofs.Open(ctx, faulty, dynamofs.Options{Table: table, MaxCommit: 2})
	if err != nil {
		t.Fatal(err)
	}
	interleaved := datastore.New(d)
	_, cur, err = interleaved.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	es = nil
	for i := range 5 {
		st, err := interleaved.Upload(ctx, fmt.Sprintf("data/%s/inter%d", mine, i), strings.NewReader("s"), nil)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, datastore.Entry{Put: &st})
	}
	txs.Store(0)
	if own, err = interleaved.Commit(ctx, nil, es); err != nil {
		t.Fatal(err)
	}
	if txs.Load() < 2 {
		t.Fatalf("the staged commit made %d transactions; the other commit went nowhere between them", txs.Load())
	}
	if _, _, ok := interleaved.ChangedPartitionsOver(cur, own); ok {
		t.Fatal("answered over a staged commit another process's commit interleaved on its shard")
	}
}
