package dynamofs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// GetChunk reads one chunk with a strongly consistent GetItem.
func (d *Driver) GetChunk(ctx context.Context, version string, i int) ([]byte, error) {
	it, err := d.getItem(ctx, d.chunkKey(version, i))
	if err != nil {
		return nil, err
	}
	if it == nil {
		return nil, fmt.Errorf("%w: chunk %d of version %s", metastore.ErrNotFound, i, version)
	}
	return getB(it, "d"), nil
}

// Stat looks the paths up directly: up to 100 in one TransactGetItems, so
// that a commit is seen whole (snapshot.go); more 100 keys to a
// BatchGetItem, each commit's paths then possibly seen in two states.
func (d *Driver) Stat(ctx context.Context, paths []string) (map[string]datastore.Info, error) {
	keys := make([]item, len(paths))
	for i, p := range paths {
		keys[i] = key(d.filePK(d.partition(p)), p)
	}
	got, ahead := d.aheadStat(ctx, keys) // readahead.go
	var err error
	if !ahead {
		if got, err = d.snapshotRead(ctx, nil, keys); err != nil {
			return nil, err
		}
	}
	if got, err = d.visible(ctx, got); err != nil { // whole.go
		return nil, err
	}
	out := make(map[string]datastore.Info, len(got))
	for _, it := range got {
		info := fileInfo(it)
		out[info.Path] = info
	}
	return out, nil
}

// pinned returns the one partition every path under prefix belongs to, if
// there is one. Under LayoutModels no prefix under data/ pins one (a
// deeper path may name a deeper model), so List reads the registry.
func (d *Driver) pinned(prefix string) (string, bool) {
	if rest, ok := strings.CutPrefix(prefix, datastore.ModelPrefix); ok {
		if d.layout != datastore.LayoutTypeID {
			return "", false
		}
		segs := strings.SplitN(rest, "/", 3)
		if len(segs) == 3 {
			return segs[0] + "/" + segs[1], true
		}
		return "", false
	}
	first, _, ok := strings.Cut(prefix, "/")
	return first, ok
}

// listPos is a List position: the partition being read and the last path
// read in it ("" at its start).
type listPos struct {
	Part string `json:"p"`
	Last string `json:"k,omitempty"`
}

// List queries one partition at a time: the one the prefix pins, or every
// registered partition whose paths can start with it, in order. One call is
// one Query.
func (d *Driver) List(ctx context.Context, prefix string, limit int, pos []byte) ([]datastore.Info, []byte, error) {
	var parts []string
	if p, ok := d.pinned(prefix); ok {
		parts = []string{p}
	} else {
		all, err := d.Partitions(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, p := range all {
			if datastore.PrefixMayMatch(p, prefix) {
				parts = append(parts, p)
			}
		}
	}
	var at listPos
	i := 0
	if pos != nil {
		if err := json.Unmarshal(pos, &at); err != nil {
			return nil, nil, fmt.Errorf("%w: not a dynamodb list position", metastore.ErrInvalidCursor)
		}
		for i < len(parts) && parts[i] < at.Part {
			i++
		}
		if i == len(parts) || parts[i] != at.Part {
			return nil, nil, fmt.Errorf("%w: partition %q is not under prefix %q", metastore.ErrInvalidCursor, at.Part, prefix)
		}
	}
	if len(parts) == 0 {
		return nil, nil, nil
	}
	part := parts[i]
	kc := expression.Key(attrPK).Equal(expression.Value(d.filePK(part)))
	if len(prefix) > len(datastore.PartitionPrefix(part)) {
		kc = kc.And(expression.Key(attrSK).BeginsWith(prefix))
	}
	e, err := build(expression.NewBuilder().WithKeyCondition(kc))
	if err != nil {
		return nil, nil, err
	}
	in := &dynamodb.QueryInput{KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(),
		ExpressionAttributeValues: e.Values(), Limit: aws32(limit)}
	if at.Last != "" {
		in.ExclusiveStartKey = key(d.filePK(part), at.Last)
	}
	out, err := d.query(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	its, err := d.visible(ctx, out.Items) // whole.go
	if err != nil {
		return nil, nil, err
	}
	var files []datastore.Info
	for _, it := range its {
		if info := fileInfo(it); !info.Deleted {
			files = append(files, info)
		}
	}
	var next *listPos
	switch {
	case out.LastEvaluatedKey != nil:
		next = &listPos{Part: part, Last: getS(out.LastEvaluatedKey, attrSK)}
	case i+1 < len(parts):
		next = &listPos{Part: parts[i+1]}
	}
	if next == nil {
		return files, nil, nil
	}
	raw, _ := json.Marshal(next)
	return files, raw, nil
}

func aws32(n int) *int32 {
	v := int32(n)
	return &v
}

var _ types.AttributeValue
