package reshape

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/faultapi"
)

// faultRewriteAPI sends the rewrite's transactions through faultapi.
type faultRewriteAPI struct {
	RewriteAPI
	f *faultapi.API
}

func (a faultRewriteAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return a.f.TransactWriteItems(ctx, in, o...)
}

// TestRewriteApplyUnderFaults: transactions cancelled by conflicts are
// re-read and retried in place; a transaction whose response is lost after
// it applied fails the run, and the rerun finds the copy made and converges.
// Dual-writes under the same faults keep both copies equal.
func TestRewriteApplyUnderFaults(t *testing.T) {
	opts := DemoOptions{Workspaces: 1, MembersPerWS: 3, DocsPerWS: 2, CommentsPerDoc: 10}
	var fa *faultapi.API
	c, rw := rewriteDemo(t, opts, func(a RewriteAPI) RewriteAPI {
		fa = faultapi.New(a.(*dynamodb.Client), nil)
		return faultRewriteAPI{RewriteAPI: a, f: fa}
	})
	ctx := t.Context()
	var mu sync.Mutex
	n := 0
	fa.SetPlan(func(op, _ string) faultapi.Fault {
		mu.Lock()
		defer mu.Unlock()
		n++
		switch {
		case n%3 == 0:
			return faultapi.TxConflict
		case n%7 == 0 && n < 60:
			return faultapi.DropResponse
		}
		return faultapi.None
	})
	runs := 0
	for ; ; runs++ {
		if runs > 20 {
			t.Fatal("apply never finished under faults")
		}
		_, err := rw.Apply(ctx, RewriteOptions{Segments: 2, PageSize: 5, Workers: 2})
		if err == nil {
			break
		}
		if !faultapi.IsInjected(err) {
			t.Fatalf("apply: %v", err)
		}
	}
	// Dual-writes under the same faults: a lost response is the caller's
	// to retry, as with any write.
	for i, cm := range demoComments(opts)[:8] {
		next := map[string]types.AttributeValue{}
		for k, v := range cm {
			next[k] = v
		}
		next["body"] = &types.AttributeValueMemberS{Value: "faulty edit"}
		for try := 0; ; try++ {
			err := rw.Put(ctx, next)
			if err == nil {
				break
			}
			if !faultapi.IsInjected(err) || try > 5 {
				t.Fatalf("put %d: %v", i, err)
			}
		}
	}
	inj := fa.Injected()
	if inj[faultapi.TxConflict] == 0 || inj[faultapi.DropResponse] == 0 || runs == 0 {
		t.Fatalf("faults injected %v in %d failed runs: the test did not exercise them", inj, runs)
	}
	fa.SetPlan(nil)
	rep, err := rw.VerifyRewrite(ctx, VerifyOptions{})
	if err != nil || !rep.Clean || rep.Counts[OutEqual] != 20 {
		t.Fatalf("verify after faults: %v %+v", err, rep)
	}
	if n := len(scanAll(t, c, rw.Spec().Table)); n != len(DemoItems(opts))+20 {
		t.Fatalf("%d items, want the demo's %d and 20 copies", n, len(DemoItems(opts)))
	}
	t.Logf("faults %v, %d failed apply runs", inj, runs)
}
