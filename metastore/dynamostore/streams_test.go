package dynamostore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
)

// shapes wraps the real streams client and reshapes what it answers, to
// show what DynamoDB Local never does (its stream has one shard that never
// splits): closed shards with children, trimmed records, vanished shards.
// Everything it does not reshape comes from DynamoDB Local.
type shapes struct {
	next dynamostore.StreamsAPI

	mu sync.Mutex
	// closeReal marks every real shard closed (at its last record), so
	// that lineage continues in the injected children.
	closeReal bool
	// extra are injected shards, with their records' keys.
	extra []injected
	// hide removes real shards from DescribeStream (trimmed away).
	hide bool
	// trimmed makes GetShardIterator fail as DynamoDB does when the
	// position is older than the retention.
	trimmed bool
}

type injected struct {
	id, parent string
	open       bool
	keys       []string
}

func (s *shapes) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	out, err := s.next.DescribeStream(ctx, in, o...)
	if err != nil {
		return out, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	desc := *out.StreamDescription
	var shards []stypes.Shard
	for _, sh := range desc.Shards {
		if s.hide {
			continue
		}
		if s.closeReal {
			r := *sh.SequenceNumberRange
			r.EndingSequenceNumber = aws.String("99999999999999999999999")
			sh.SequenceNumberRange = &r
		}
		shards = append(shards, sh)
	}
	for _, x := range s.extra {
		r := &stypes.SequenceNumberRange{StartingSequenceNumber: aws.String("1")}
		if !x.open {
			r.EndingSequenceNumber = aws.String("9")
		}
		sh := stypes.Shard{ShardId: aws.String(x.id), SequenceNumberRange: r}
		if x.parent != "" {
			sh.ParentShardId = aws.String(x.parent)
		}
		shards = append(shards, sh)
	}
	desc.Shards = shards
	out.StreamDescription = &desc
	return out, nil
}

func (s *shapes) injected(id string) (injected, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.extra {
		if x.id == id {
			return x, true
		}
	}
	return injected{}, false
}

func (s *shapes) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	s.mu.Lock()
	trimmed := s.trimmed
	s.mu.Unlock()
	if trimmed {
		return nil, &stypes.TrimmedDataAccessException{Message: aws.String("the requested sequence number is beyond the trim horizon")}
	}
	if _, ok := s.injected(aws.ToString(in.ShardId)); ok {
		return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String("injected:" + aws.ToString(in.ShardId))}, nil
	}
	return s.next.GetShardIterator(ctx, in, o...)
}

func (s *shapes) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	if id, ok := strings.CutPrefix(aws.ToString(in.ShardIterator), "injected:"); ok {
		x, _ := s.injected(id)
		out := &dynamodbstreams.GetRecordsOutput{}
		for i, k := range x.keys {
			out.Records = append(out.Records, stypes.Record{EventName: stypes.OperationTypeRemove, Dynamodb: &stypes.StreamRecord{
				SequenceNumber: aws.String(string(rune('1' + i))),
				Keys:           map[string]stypes.AttributeValue{"pk": &stypes.AttributeValueMemberS{Value: k}},
			}})
		}
		if x.open {
			out.NextShardIterator = aws.String("injected-end:" + id)
		}
		return out, nil
	}
	if strings.HasPrefix(aws.ToString(in.ShardIterator), "injected-end:") {
		return &dynamodbstreams.GetRecordsOutput{NextShardIterator: in.ShardIterator}, nil
	}
	out, err := s.next.GetRecords(ctx, in, o...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.closeReal && len(out.Records) == 0 {
		out.NextShardIterator = nil // the end of a closed shard
	}
	return out, err
}

// streamEnv is a v1 table with its stream enabled, and a raw client.
type streamEnv struct {
	t   *testing.T
	api *dynamodb.Client
	p   dynamostore.Primitives
	s   *metastore.Store
	sh  *shapes
	tbl string
}

func newStreamEnv(t *testing.T) *streamEnv {
	api := client(t)
	opts := newTables(t, api, dynamostore.LayoutV1)
	sh := &shapes{next: dynamostore.StreamsClientOf(api)}
	opts.Streams = sh
	d := openDriver(t, api, opts)
	e := &streamEnv{t: t, api: api, p: d.Primitives(), s: metastore.New(d), sh: sh, tbl: opts.Table}
	if _, err := e.p.EnableStream(t.Context()); err != nil {
		t.Fatalf("EnableStream: %v", err)
	}
	return e
}

func (e *streamEnv) key(k string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: k}}
}

func (e *streamEnv) mark() dynamostore.StreamMark {
	e.t.Helper()
	m, err := e.p.StreamMarkNow(e.t.Context())
	if err != nil {
		e.t.Fatalf("StreamMarkNow: %v", err)
	}
	return m
}

func (e *streamEnv) since(m dynamostore.StreamMark) (dynamostore.StreamChanges, error) {
	ch, err := e.p.StreamChangesSince(e.t.Context(), m, time.Time{}, false)
	slices.Sort(ch.Keys)
	return ch, err
}

// TestStreamSeesEveryWriterSinceTheMark (DynamoDB Local): the stream
// names exactly the keys written after the mark, by lake or by a raw SDK
// client, PutItem, UpdateItem and DeleteItem alike; reading on from where
// a read stopped names only what came after.
func TestStreamSeesEveryWriterSinceTheMark(t *testing.T) {
	e := newStreamEnv(t)
	ctx := t.Context()
	for _, k := range []string{"tbl/before", "tbl/upd", "tbl/del"} {
		if err := e.s.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	m := e.mark()
	if m.Arn == "" || len(m.Shards) != 1 || m.Shards[0].After == "" {
		t.Fatalf("mark after three writes: %+v", m)
	}
	if err := e.s.Put(ctx, "tbl/lake", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.tbl), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "tbl/put"}, "v": &types.AttributeValueMemberB{Value: []byte("p")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(e.tbl), Key: e.key("tbl/upd"),
		UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberB{Value: []byte("u")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(e.tbl), Key: e.key("tbl/del")}); err != nil {
		t.Fatal(err)
	}
	ch, err := e.since(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"tbl/del", "tbl/lake", "tbl/put", "tbl/upd"}; !slices.Equal(ch.Keys, want) || ch.Records != 4 {
		t.Fatalf("changes since the mark: %q (%d records), want %q", ch.Keys, ch.Records, want)
	}
	if err := e.s.Put(ctx, "tbl/after", []byte("z")); err != nil {
		t.Fatal(err)
	}
	ch2, err := e.since(ch.End)
	if err != nil || !slices.Equal(ch2.Keys, []string{"tbl/after"}) {
		t.Fatalf("changes since the first read's end: %q, %v", ch2.Keys, err)
	}
	// A second EnableStream keeps the stream: the mark stays readable.
	if _, err := e.p.EnableStream(ctx); err != nil {
		t.Fatal(err)
	}
	if ch3, err := e.since(m); err != nil || len(ch3.Keys) != 5 {
		t.Fatalf("after a second EnableStream: %q, %v", ch3.Keys, err)
	}
}

// TestStreamKeepsAnExistingStream (DynamoDB Local): a stream someone else
// enabled, of another view type, is kept as it is.
func TestStreamKeepsAnExistingStream(t *testing.T) {
	api := client(t)
	opts := newTables(t, api, dynamostore.LayoutV1)
	if _, err := api.UpdateTable(t.Context(), &dynamodb.UpdateTableInput{TableName: aws.String(opts.Table),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}}); err != nil {
		t.Fatal(err)
	}
	before, err := api.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(opts.Table)})
	if err != nil {
		t.Fatal(err)
	}
	d := openDriver(t, api, opts)
	m, err := d.Primitives().EnableStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	after, err := api.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(opts.Table)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Arn != aws.ToString(before.Table.LatestStreamArn) || aws.ToString(after.Table.LatestStreamArn) != m.Arn ||
		after.Table.StreamSpecification.StreamViewType != types.StreamViewTypeNewAndOldImages {
		t.Fatalf("existing stream not kept: mark %s, before %s, after %s (%s)", m.Arn,
			aws.ToString(before.Table.LatestStreamArn), aws.ToString(after.Table.LatestStreamArn), after.Table.StreamSpecification.StreamViewType)
	}
}

// TestStreamFollowsLineage: the marked shard closes and is continued by a
// child, itself continued by an open grandchild; every record along the
// lineage is read, and an old closed shard outside it is ignored.
func TestStreamFollowsLineage(t *testing.T) {
	e := newStreamEnv(t)
	ctx := t.Context()
	if err := e.s.Put(ctx, "tbl/before", []byte("x")); err != nil {
		t.Fatal(err)
	}
	m := e.mark()
	if err := e.s.Put(ctx, "tbl/in-parent", []byte("x")); err != nil {
		t.Fatal(err)
	}
	e.sh.mu.Lock()
	e.sh.closeReal = true
	e.sh.extra = []injected{
		{id: "shardId-child", parent: m.Shards[0].ID, keys: []string{"tbl/in-child"}},
		{id: "shardId-grandchild", parent: "shardId-child", open: true, keys: []string{"tbl/in-grandchild", "tbl/in-grandchild"}},
		{id: "shardId-ancient", parent: "shardId-trimmed-long-ago", keys: []string{"tbl/ancient"}},
	}
	e.sh.mu.Unlock()
	ch, err := e.since(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"tbl/in-child", "tbl/in-grandchild", "tbl/in-parent"}; !slices.Equal(ch.Keys, want) || ch.Shards != 3 {
		t.Fatalf("lineage read: %q over %d shards, want %q over 3", ch.Keys, ch.Shards, want)
	}
	if len(ch.End.Shards) != 1 || ch.End.Shards[0].ID != "shardId-grandchild" {
		t.Fatalf("the read should end in the open grandchild: %+v", ch.End)
	}
}

// TestStreamRefusesWhatItCannotProve: a trimmed position, a marked shard
// gone from the stream, an open shard outside the marked lineage, and a
// stream disabled or replaced (the last two on DynamoDB Local itself) all
// fail with ErrStreamGap, never with a partial answer.
func TestStreamRefusesWhatItCannotProve(t *testing.T) {
	e := newStreamEnv(t)
	ctx := t.Context()
	if err := e.s.Put(ctx, "tbl/a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	m := e.mark()
	gap := func(what string, wantIn string) {
		t.Helper()
		_, err := e.since(m)
		if !errors.Is(err, dynamostore.ErrStreamGap) || !strings.Contains(err.Error(), wantIn) {
			t.Fatalf("%s: %v, want ErrStreamGap mentioning %q", what, err, wantIn)
		}
	}
	e.sh.mu.Lock()
	e.sh.trimmed = true
	e.sh.mu.Unlock()
	gap("trimmed records", "trimmed")

	e.sh.mu.Lock()
	e.sh.trimmed, e.sh.hide = false, true
	e.sh.mu.Unlock()
	gap("the marked shard gone", "no longer in the stream")

	e.sh.mu.Lock()
	e.sh.hide = false
	e.sh.extra = []injected{{id: "shardId-stranger", parent: "shardId-unknown", open: true, keys: []string{"tbl/x"}}}
	e.sh.mu.Unlock()
	gap("an open shard outside the lineage", "descends from no shard")

	e.sh.mu.Lock()
	e.sh.extra = nil
	e.sh.mu.Unlock()
	if _, err := e.since(m); err != nil {
		t.Fatalf("with every shape removed: %v", err)
	}
	if _, err := e.api.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(e.tbl),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(false)}}); err != nil {
		t.Fatal(err)
	}
	gap("a disabled stream", "disabled")
	n, err := e.p.EnableStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Arn == m.Arn {
		t.Fatalf("re-enabling kept the ARN %s", n.Arn)
	}
	gap("a replaced stream", "replaced")
}

// TestStreamReadStopsAtUpToAndLosesNothing (DynamoDB Local): a read bounded
// by upTo stops at the first record created after it (so a busy table
// never keeps a read chasing the tip), and the next read, from where it
// stopped, names what it left.
func TestStreamReadStopsAtUpToAndLosesNothing(t *testing.T) {
	e := newStreamEnv(t)
	ctx := t.Context()
	m := e.mark()
	for _, k := range []string{"tbl/a", "tbl/b"} {
		if err := e.s.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// DynamoDB Local rounds record times down to the minute: two minutes
	// back is before every record written now.
	early, err := e.since2(m, time.Now().Add(-2*time.Minute))
	if err != nil || len(early.Keys) != 0 || len(early.End.Shards) != 1 {
		t.Fatalf("a read bounded before every record: %q, %+v, %v", early.Keys, early.End, err)
	}
	rest, err := e.since(early.End)
	if err != nil || !slices.Equal(rest.Keys, []string{"tbl/a", "tbl/b"}) {
		t.Fatalf("the read from where the bounded one stopped: %q, %v", rest.Keys, err)
	}
}

func (e *streamEnv) since2(m dynamostore.StreamMark, upTo time.Time) (dynamostore.StreamChanges, error) {
	for attempt := 0; ; attempt++ {
		c, err := e.p.StreamChangesSince(e.t.Context(), m, upTo, false)
		// DynamoDB Local sometimes answers TrimmedDataAccessException for
		// the start of a shard opened a second before (two CI runs in
		// ten, seconds at a time): try again for a while, and if the
		// emulator keeps refusing a stream no record of which can have
		// been trimmed (streams keep 24 hours), say so and skip rather
		// than call it a gap.
		if err != nil && strings.Contains(err.Error(), "TrimmedDataAccessException") {
			if attempt < 8 {
				time.Sleep(time.Second)
				continue
			}
			e.t.Skipf("DynamoDB Local refused a stream created seconds ago as trimmed, %d times over %d s (an emulator quirk): %v", attempt+1, attempt, err)
		}
		return c, err
	}
}
