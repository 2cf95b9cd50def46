package lock

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
)

// TestTTLBackstopOnDynamoDB: on DynamoDB the lock and expiry records carry
// the TTL attribute "expires" (the one the table's TTL is enabled on) a
// BackstopAfter past their last write or expiry, the generation counter
// never does, and a holder re-stamps its unchanged lock record every
// restampEvery, so the backstop never deletes the record of a held lock.
// Both layouts: v2 writes single items and transactions (renewals), v1 the
// same on its own table.
func TestTTLBackstopOnDynamoDB(t *testing.T) {
	defer func(d time.Duration) { restampEvery = d }(restampEvery)
	restampEvery = 200 * time.Millisecond
	for _, layout := range []dynamostore.Layout{dynamostore.LayoutV2, dynamostore.LayoutV1} {
		t.Run(string(layout), func(t *testing.T) {
			api, opts := newDynamoTables(t, layout)
			table := opts.Table
			if layout == dynamostore.LayoutV2 {
				table += dynamostore.V2Suffix
			}
			ttl, err := api.(*dynamodb.Client).DescribeTimeToLive(t.Context(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
			if err != nil {
				t.Fatal(err)
			}
			if d := ttl.TimeToLiveDescription; d == nil || aws.ToString(d.AttributeName) != "expires" || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
				t.Fatalf("TTL of %s: %+v", table, d)
			}
			d, err := dynamostore.Open(context.Background(), api, opts)
			if err != nil {
				t.Fatal(err)
			}
			s := metastore.New(d)
			defer s.Close()
			l, err := New(Metastore(s), &Options{Lease: 600 * time.Millisecond, Heartbeat: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			ls, err := l.Acquire(t.Context(), "ttl/a")
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(700 * time.Millisecond) // renewals, and a re-stamp
			items := scanLockItems(t, api.(*dynamodb.Client), table)
			rec, exp, gen := items["lock/rec/ttl/a"], items["lock/exp/ttl/a"], items["lock/gen/ttl"]
			if rec == nil || exp == nil || gen == nil {
				t.Fatalf("lock items not found: %v", keysOf(items))
			}
			week := time.Now().Add(BackstopAfter)
			if at := ttlAttr(t, rec); at.Before(week.Add(-time.Minute)) || at.After(week.Add(time.Minute)) {
				t.Fatalf("lock record expires at %v, want about %v", at, week)
			}
			if at := ttlAttr(t, exp); at.Before(week.Add(-time.Minute)) || at.After(week.Add(time.Minute)) {
				t.Fatalf("expiry record expires at %v, want about %v", at, week)
			}
			if _, ok := gen["expires"]; ok {
				t.Fatal("the generation counter carries a TTL")
			}
			// The lock record was written again after its acquisition (a
			// re-stamp), with the same bytes: the holder's fence still holds.
			if written := writeTime(t, rec); !written.After(start.Add(restampEvery)) {
				t.Fatalf("lock record last written %v, not re-stamped after %v", written, start.Add(restampEvery))
			}
			if err := ls.Write(t.Context(), metastore.Mutation{Key: "tbl/x", Expect: metastore.ExpectAbsent(), Value: []byte("v")}); err != nil {
				t.Fatalf("fenced write after a re-stamp: %v", err)
			}
			if err := ls.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func scanLockItems(t *testing.T, c *dynamodb.Client, table string) map[string]map[string]types.AttributeValue {
	t.Helper()
	out := map[string]map[string]types.AttributeValue{}
	p := dynamodb.NewScanPaginator(c, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			if pk, ok := it["pk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, KeyPrefix) {
				out[pk.Value] = it
			}
		}
	}
	return out
}

func keysOf(m map[string]map[string]types.AttributeValue) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func ttlAttr(t *testing.T, it map[string]types.AttributeValue) time.Time {
	t.Helper()
	n, ok := it["expires"].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("no expires attribute: %v", it)
	}
	s, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(s, 0)
}

func writeTime(t *testing.T, it map[string]types.AttributeValue) time.Time {
	t.Helper()
	n, ok := it["t"].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("no write time: %v", it)
	}
	ms, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.UnixMilli(ms)
}
