package dynamofs

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultapi"
)

// TestSnapshotReadIsWhole: a writer lake did not write (the raw SDK)
// moves a head and files in one TransactWriteItems each time, the head
// first in the request; lake's snapshot read must see each transaction
// whole: up to 100 keys every item at one value, past 100 (the split read)
// no file older than the head read. Every third TransactGetItems is refused
// with an injected TransactionConflict, which the read retries. A plain
// BatchGetItem of the same keys is counted for contrast, not asserted:
// DynamoDB Local shows it mixed states, which is why the commit's reads no
// longer use it.
func TestSnapshotReadIsWhole(t *testing.T) {
	raw := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, raw, TableInput(table))
	// Each reader has its own driver over its own fault injector, which
	// refuses every third of its TransactGetItems: a refused read is
	// retried, and no reader is refused twice in a row (with one counter
	// for all, readers in lockstep left one refused every time, past the
	// retryer's attempts).
	var apis []*faultapi.API
	reader := func() *Driver {
		var calls atomic.Int64
		api := faultapi.New(ddb.NewClient(ddblocal.Config(t), ""), func(op, _ string) faultapi.Fault {
			if op == "TransactGetItems" && calls.Add(1)%3 == 0 {
				return faultapi.TxConflict
			}
			return faultapi.None
		})
		apis = append(apis, api)
		d, err := Open(t.Context(), api, Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := reader()
	head := d.headKey("m/1")
	var files []item
	for i := range 150 {
		files = append(files, key(d.filePK("m/1"), fmt.Sprintf("data/m/1/f%03d", i)))
	}
	moved := []item{head, files[0], files[50], files[98], files[99], files[120], files[149]}
	const rounds = 150
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		defer done.Store(true)
		for i := 1; i <= rounds; i++ {
			var tx []types.TransactWriteItem
			for _, k := range moved {
				tx = append(tx, types.TransactWriteItem{Update: &types.Update{TableName: &table, Key: k,
					UpdateExpression:          aws.String("SET v = :v"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(uint64(i))}}})
			}
			if _, err := raw.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: tx}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	value := func(its []item, k item) uint64 {
		for _, it := range its {
			if itemID(it) == itemID(k) {
				v, _ := strconv.ParseUint(getNString(it, "v"), 10, 64)
				return v
			}
		}
		return 0
	}
	var reads, split, mixedBatch atomic.Int64
	for range 3 {
		d := reader()
		wg.Go(func() {
			for !done.Load() {
				got, err := d.snapshotRead(t.Context(), nil, moved)
				if err != nil {
					t.Error(err)
					return
				}
				h := value(got, head)
				for _, k := range moved {
					if v := value(got, k); v != h {
						t.Errorf("one snapshot read saw %s at %d and the head at %d", getS(k, attrSK), v, h)
						return
					}
				}
				reads.Add(1)
				got, err = d.snapshotRead(t.Context(), []item{head}, files)
				if err != nil {
					t.Error(err)
					return
				}
				h = value(got, head)
				for _, k := range moved[1:] {
					if v := value(got, k); v < h {
						t.Errorf("a split read saw %s at %d, older than the head it read first (%d)", getS(k, attrSK), v, h)
						return
					}
				}
				split.Add(1)
				got, err = d.batchGet(t.Context(), moved)
				if err == nil {
					h := value(got, head)
					for _, k := range moved {
						if value(got, k) != h {
							mixedBatch.Add(1)
							break
						}
					}
				}
			}
		})
	}
	wg.Wait()
	if reads.Load() == 0 || split.Load() == 0 {
		t.Fatalf("no read finished (%d whole, %d split)", reads.Load(), split.Load())
	}
	injected := 0
	for _, api := range apis {
		injected += api.Injected()[faultapi.TxConflict]
	}
	if injected == 0 {
		t.Fatal("no TransactionConflict was injected")
	}
	t.Logf("%d whole reads, %d split reads, %d conflicts retried; BatchGetItem mixed two states %d times", reads.Load(), split.Load(),
		injected, mixedBatch.Load())
}

func getNString(it item, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}
