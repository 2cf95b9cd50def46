package dynamostore

// Reading the v1 table's stream since a mark, shard lineage followed (the
// shard-level reads are in streams.go).

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// StreamChanges is what the stream shows since a mark.
type StreamChanges struct {
	// Keys are the user keys any writer put, updated or deleted in v1
	// since the mark, each once.
	Keys []string
	// Records counts the records read; Shards the shards read.
	Records, Shards int
	// End marks where the read stopped: reading from it continues.
	End StreamMark
}

// StreamChangesSince reads every record of the v1 table's stream after
// mark, following shard lineage from parent to child, and returns the keys
// they name. Each shard is read to its end, or to its tip, or to the first
// record created after upTo (by ApproximateCreationDateTime, which
// DynamoDB rounds down, so no record created before upTo ends the read):
// on a busy table a read never chases the tip forever, and whatever comes
// after where it stopped is read by the next read, from End. A zero upTo
// reads to the tip. A partial read also stops at the first short page
// (fewer records than a full page: near the tip): for a read that need not
// reach the tip, because another read goes on from End. It fails with an error matching ErrStreamGap when the records
// since the mark cannot all be read: the stream disabled or replaced, a
// marked shard gone, a record trimmed (kept 24 hours), or an open shard
// that descends from none of the marked ones.
func (p Primitives) StreamChangesSince(ctx context.Context, mark StreamMark, upTo time.Time, partial bool) (StreamChanges, error) {
	d := p.d
	var res StreamChanges
	gap := func(format string, args ...any) (StreamChanges, error) {
		return res, fmt.Errorf("%w: "+format, append([]any{ErrStreamGap}, args...)...)
	}
	if d.streams == nil {
		return gap("this store has no DynamoDB Streams client")
	}
	if mark.Arn == "" {
		return gap("the verify recorded no stream position")
	}
	arn, err := d.streamArn(ctx)
	if err != nil {
		return res, err
	}
	switch {
	case arn == "":
		return gap("the stream of %q is disabled", d.v1)
	case arn != mark.Arn:
		return gap("the stream of %q was replaced since the verify (now %s, the verify marked %s)", d.v1, arn, mark.Arn)
	}
	shards, status, err := d.listShards(ctx, arn)
	if err != nil {
		return res, err
	}
	if status != stypes.StreamStatusEnabled {
		return gap("the stream of %q is %s", d.v1, status)
	}
	byID := map[string]stypes.Shard{}
	children := map[string][]string{}
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		byID[id] = sh
		if parent := aws.ToString(sh.ParentShardId); parent != "" {
			children[parent] = append(children[parent], id)
		}
	}
	// Start from the marked shards; a mark taken before the stream had a
	// shard starts from the roots, each of which must be a true root (a
	// shard whose parent was trimmed away leaves a gap).
	type start struct{ id, after string }
	var queue []start
	for _, sm := range mark.Shards {
		if _, ok := byID[sm.ID]; !ok {
			return gap("shard %s, open at the verify, is no longer in the stream (records are kept 24 hours)", sm.ID)
		}
		queue = append(queue, start{sm.ID, sm.After})
	}
	if len(mark.Shards) == 0 {
		for _, sh := range shards {
			if aws.ToString(sh.ParentShardId) == "" {
				queue = append(queue, start{id: aws.ToString(sh.ShardId)})
			}
		}
	}
	seen, stopped := map[string]bool{}, map[string]bool{}
	keys := map[string]bool{}
	res.End = StreamMark{Arn: arn}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		if seen[st.id] {
			continue
		}
		seen[st.id] = true
		r := shardRead{arn: arn, shard: byID[st.id], after: st.after, strict: true, upTo: upTo, partial: partial}
		if err := d.readShard(ctx, &r, keys); err != nil {
			return res, err
		}
		res.Records += r.records
		res.Shards++
		if !r.closed || r.stopped {
			res.End.Shards = append(res.End.Shards, ShardMark{ID: st.id, After: r.last})
		}
		if r.stopped {
			stopped[st.id] = true
			continue // its children come after what was left unread
		}
		for _, c := range children[st.id] {
			queue = append(queue, start{id: c})
		}
	}
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		open := sh.SequenceNumberRange == nil || sh.SequenceNumberRange.EndingSequenceNumber == nil
		if open && !seen[id] && !under(id, byID, stopped) {
			return gap("open shard %s descends from no shard the verify marked (parent %q)", id, aws.ToString(sh.ParentShardId))
		}
	}
	for k := range keys {
		res.Keys = append(res.Keys, k)
	}
	res.End.At = time.Now().UTC()
	return res, nil
}

// under reports whether shard id descends from a shard whose read stopped
// early (the next read reaches it through that shard).
func under(id string, byID map[string]stypes.Shard, stopped map[string]bool) bool {
	for range len(byID) {
		sh, ok := byID[id]
		if !ok {
			return false
		}
		if id = aws.ToString(sh.ParentShardId); id == "" {
			return false
		}
		if stopped[id] {
			return true
		}
	}
	return false
}
