package dynamofs_test

import (
	"context"
	"fmt"
	"regexp"
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
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// shardQueries records the Queries of the reclaim shards (pk g#NN), by
// kind: "g#03 t#".
type shardQueries struct {
	ddb.API
	mu   sync.Mutex
	seen []string
}

var shardPK = regexp.MustCompile(`^g#\d\d$`)

func (q *shardQueries) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	var pk, kind string
	for _, v := range in.ExpressionAttributeValues {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			switch {
			case shardPK.MatchString(s.Value):
				pk = s.Value
			case len(s.Value) == 2 && strings.HasSuffix(s.Value, "#"):
				kind = s.Value
			}
		}
	}
	if pk != "" {
		q.mu.Lock()
		q.seen = append(q.seen, pk+" "+kind)
		q.mu.Unlock()
	}
	return q.API.Query(ctx, in, o...)
}

func (q *shardQueries) take() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.seen
	q.seen = nil
	return out
}

// TestReclaimReadsOnlyShardsThatCanBeDue (issue 31): a reclaim reads the 48
// reclaim shards (3 kinds × 16) only where an entry can be due: right after
// a reclaim, none; once the grace has passed, all of them, and it reclaims
// what it did without the mark. The hostile peer: a mark forged with read
// times in the future does not hold a shard back; entries of shapes lake
// does not write are left alone (one of them had crashed the reclaim);
// an intent a reclaim could not remove (held by a staged commit) is looked
// at again by the next reclaim, in its shard alone.
func TestReclaimReadsOnlyShardsThatCanBeDue(t *testing.T) {
	ctx := t.Context()
	raw := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, raw, dynamofs.TableInput(table))
	q := &shardQueries{API: ddb.NewClient(ddblocal.Config(t), "")}
	d, err := dynamofs.Open(ctx, q, dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	big := strings.Repeat("x", 5000) // chunked, so that its replacement is due in g#
	for _, p := range []string{"data/a/m/f", "data/a/m/f", "data/a/m/g"} {
		if _, err := s.Put(ctx, p, strings.NewReader(big), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Delete(ctx, "data/a/m/g"); err != nil {
		t.Fatal(err)
	}
	const grace = 2 * time.Second
	o := datastore.ReclaimOptions{Grace: grace, UploadGrace: grace, Horizon: grace}
	reclaim := func(what string) (datastore.ReclaimStats, []string) {
		t.Helper()
		st, err := d.Reclaim(ctx, time.Now(), o)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return st, q.take()
	}
	q.take()
	if st, got := reclaim("first reclaim"); len(got) != 48 || st.Versions+st.Tombstones != 0 {
		t.Fatalf("first reclaim (no mark yet): %d shard Queries, want 48; %+v reclaimed, want nothing due", len(got), st)
	}
	if _, got := reclaim("second reclaim"); len(got) != 0 {
		t.Fatalf("a reclaim right after another read %d shards (%v), want none: nothing can be due before the grace has passed", len(got), got)
	}
	time.Sleep(grace + 100*time.Millisecond)
	st, got := reclaim("reclaim after the grace")
	if len(got) < 48 || st.Versions != 2 || st.Tombstones != 1 {
		t.Fatalf("after the grace: %d shard Queries, want every shard; reclaimed %+v, want the 2 versions replaced and deleted and the tombstone", len(got), st)
	}

	// The hostile peer forges the mark: every shard read an hour from now.
	forged := map[string]types.AttributeValue{}
	for i := range dynamofs.Shards {
		for _, k := range []string{"i#", "g#", "t#"} {
			forged[fmt.Sprintf("%s%02d", k, i)] = &types.AttributeValueMemberN{Value: fmt.Sprint(time.Now().Add(time.Hour).UnixMilli())}
		}
	}
	if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "g#"}, "sk": &types.AttributeValueMemberS{Value: "due"},
		"read": &types.AttributeValueMemberM{Value: forged}, "earliest": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, got := reclaim("reclaim under a forged mark"); len(got) != 48 {
		t.Fatalf("under a mark of read times in the future: %d shard Queries, want all 48 (not believed)", len(got))
	}

	// Entries of shapes lake does not write, and an intent held by a staged
	// commit, all due long ago.
	old := time.Now().Add(-time.Hour).UnixMilli()
	for _, sk := range []string{"i#0000000000000", "g#" + fmt.Sprint(old), "t#x", fmt.Sprintf("i#%d#held", old)} {
		it := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "g#05"}, "sk": &types.AttributeValueMemberS{Value: sk}}
		if strings.HasSuffix(sk, "held") {
			it["tx"] = &types.AttributeValueMemberS{Value: "a staged commit"}
		}
		if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	// Written after the last read with times before it, they wait for
	// that read's grace (the mark's one delay).
	if _, got := reclaim("reclaim right after foreign entries"); len(got) != 0 {
		t.Fatalf("right after a reclaim: %d shard Queries, want none", len(got))
	}
	time.Sleep(grace + 100*time.Millisecond)
	st, got = reclaim("reclaim with foreign entries")
	if !slices.Contains(got, "g#05 i#") || st.Uploads != 0 {
		t.Fatalf("foreign entries: %d shard Queries, %+v; want g#05 read and nothing removed", len(got), st)
	}
	_, got = reclaim("reclaim after the held intent")
	if len(got) == 0 || slices.ContainsFunc(got, func(q string) bool { return q != "g#05 i#" }) {
		t.Fatalf("the next reclaim read %v; want the held intent's shard and kind alone (g#05 i#, a page or two)", got)
	}
	for _, sk := range []string{"i#0000000000000", "t#x", fmt.Sprintf("i#%d#held", old)} {
		out, err := raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "g#05"}, "sk": &types.AttributeValueMemberS{Value: sk}}})
		if err != nil || len(out.Item) == 0 {
			t.Fatalf("the foreign entry %s is gone (%v): left alone, it should stay", sk, err)
		}
	}
}
