package reshape

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// gapAPI runs a hook before each GetItem of one key: a dual-write landing
// between verify's read of an old item and its read of the copy.
type gapAPI struct {
	RewriteAPI
	key    atomic.Pointer[string]
	hook   func()
	inHook atomic.Bool
	gets   atomic.Int32
	atOnce atomic.Int32
}

func (g *gapAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if k := g.key.Load(); k != nil && *k == KeyString(in.Key) && g.inHook.CompareAndSwap(false, true) {
		g.gets.Add(1)
		g.hook()
		g.inHook.Store(false)
	}
	return g.RewriteAPI.GetItem(ctx, in, o...)
}

func (g *gapAPI) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	g.atOnce.Add(1)
	return g.RewriteAPI.TransactGetItems(ctx, in, o...)
}

// TestVerifyReadsAPairAtOnce: a dual-writer that edits one comment between
// verify's read of the old item and its read of the copy, every time it
// reads that copy alone, does not make verify report the pair different:
// the second look reads both in one TransactGetItems. (Read one at a time,
// three looks all fell across an edit: TestRewriteLiveWritersKillsConverge
// failed so under load, its writers editing the same items without pause.)
func TestVerifyReadsAPairAtOnce(t *testing.T) {
	ctx := t.Context()
	opts := DemoOptions{Workspaces: 1, MembersPerWS: 2, DocsPerWS: 1, CommentsPerDoc: 4}
	var g *gapAPI
	_, rw := rewriteDemo(t, opts, func(a RewriteAPI) RewriteAPI { g = &gapAPI{RewriteAPI: a}; return g })
	if _, err := rw.Apply(ctx, fastRewrite); err != nil {
		t.Fatal(err)
	}
	cm := demoComments(opts)[0]
	newKey, err := rw.NewKey(cm)
	if err != nil {
		t.Fatal(err)
	}
	edits := 0
	g.hook = func() {
		next := map[string]types.AttributeValue{}
		for k, v := range cm {
			next[k] = v
		}
		edits++
		next["body"] = &types.AttributeValueMemberS{Value: fmt.Sprintf("edit %d", edits)}
		if err := rw.Replace(ctx, cm, next); err != nil {
			t.Errorf("dual-write: %v", err)
			return
		}
		cm = next
	}
	k := KeyString(newKey)
	g.key.Store(&k)
	rep, err := rw.VerifyRewrite(ctx, VerifyOptions{Segments: 1, PageSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	if g.gets.Load() == 0 || edits == 0 {
		t.Fatalf("no dual-write landed between verify's reads (%d gets of the copy, %d edits)", g.gets.Load(), edits)
	}
	if !rep.Clean || rep.Counts[OutDifferent] != 0 {
		t.Fatalf("verify with a dual-write between its reads of a pair: %v %v", rep.Counts, rep.Problems)
	}
	if g.atOnce.Load() == 0 {
		t.Fatalf("verify never read a pair at once (%v)", rep.Counts)
	}
	t.Logf("%d edits between reads, %d pair reads at once: %v", edits, g.atOnce.Load(), rep.Counts)
}
