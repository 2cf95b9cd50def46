package dynamostore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/keyspace"
	"github.com/lakemeta/lake/metastore"
)

// Position formats, the first byte of a cursor position; the migration
// epoch follows as a uvarint.
// NB: must not change meaning; a new format gets a new byte.
const (
	posV1 = 1 // posV1 | uvarint epoch | last evaluated pk
	posV2 = 2 // posV2 | uvarint epoch | uvarint len(family) | family | uvarint shard | last pk ("" = shard start)
)

// List returns one page of prefix in the read authority's order. A cursor
// issued in another epoch, or by the other layout, is refused with
// ErrCursorExpired: the listing must restart.
func (d *Driver) List(ctx context.Context, prefix string, limit int, pos []byte) ([]metastore.Item, []byte, error) {
	snap, err := d.state(ctx, false)
	if err != nil {
		return nil, nil, err
	}
	layout, epoch := d.readLayout(snap.m), uint64(snap.m.Epoch)
	format := byte(posV1)
	if layout == LayoutV2 {
		format = posV2
	}
	var rest []byte
	if pos != nil {
		if pos[0] != posV1 && pos[0] != posV2 {
			return nil, nil, fmt.Errorf("%w: unknown position format", metastore.ErrInvalidCursor)
		}
		e, k := binary.Uvarint(pos[1:])
		if k <= 0 {
			return nil, nil, fmt.Errorf("%w: malformed position", metastore.ErrInvalidCursor)
		}
		if pos[0] != format || e != epoch {
			return nil, nil, fmt.Errorf("%w: issued in migration epoch %d on layout %d, the store is now in epoch %d", metastore.ErrCursorExpired, e, pos[0], epoch)
		}
		rest = pos[1+k:]
	}
	var items []metastore.Item
	var next []byte
	if layout == LayoutV2 {
		items, next, err = d.listV2(ctx, prefix, limit, pos != nil, rest)
	} else {
		items, next, err = d.listV1(ctx, prefix, limit, pos != nil, rest)
	}
	if err != nil || next == nil {
		return items, nil, err
	}
	head := binary.AppendUvarint([]byte{format}, epoch)
	return items, append(head, next...), nil
}

// ScanPositions reports whether cursor positions are scan positions: true
// on v1, whose position is the last evaluated key of a Scan and may be any
// key of the table, matching or not.
func (d *Driver) ScanPositions() bool {
	snap, err := d.state(context.Background(), false)
	return err == nil && d.readLayout(snap.m) == LayoutV1
}

// listV1 is one Scan: Limit counts evaluated items, before the filter.
func (d *Driver) listV1(ctx context.Context, prefix string, limit int, resume bool, pos []byte) ([]metastore.Item, []byte, error) {
	in := &dynamodb.ScanInput{
		TableName:              aws.String(d.v1),
		Limit:                  aws.Int32(int32(limit)),
		ConsistentRead:         aws.Bool(true),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
	if resume {
		if len(pos) == 0 {
			return nil, nil, fmt.Errorf("%w: empty v1 scan position", metastore.ErrInvalidCursor)
		}
		in.ExclusiveStartKey = map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: string(pos)}}
	}
	filter := expression.Not(expression.BeginsWith(expression.Name(attrPK), metastore.ControlPrefix))
	if prefix != "" {
		filter = expression.And(expression.BeginsWith(expression.Name(attrPK), prefix), filter)
	}
	expr, err := expression.NewBuilder().WithFilter(filter).
		WithProjection(expression.NamesList(expression.Name(attrPK), expression.Name(attrValue))).Build()
	if err != nil {
		return nil, nil, fmt.Errorf("lake: build filter: %w", err)
	}
	in.FilterExpression, in.ProjectionExpression = expr.Filter(), expr.Projection()
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = expr.Names(), expr.Values()
	var out *dynamodb.ScanOutput
	err = d.retry(ctx, func(int) error {
		out, err = d.api.Scan(ctx, in)
		return err
	})
	if err != nil {
		return nil, nil, d.classify(err, d.v1)
	}
	d.meter.request("Scan", out.ScannedCount, out.Count, ccOf(out.ConsumedCapacity)...)
	items, err := decodeItems(out.Items)
	if err != nil {
		return nil, nil, err
	}
	var next []byte
	if lek, ok := out.LastEvaluatedKey[attrPK].(*types.AttributeValueMemberS); ok {
		next = []byte(lek.Value)
	}
	if n := fitPage(items, 0, 0); n < len(items) {
		// The page ends at the byte budget: the scan resumes after the
		// last item kept (a scan position may be any key of the table).
		items, next = items[:n], []byte(items[n-1].Key)
	}
	return items, next, nil
}

// fitPage returns how many of items fit a page that already holds n items
// of used bytes (metastore.PageFull): all of them, or fewer at the budget.
func fitPage(items []metastore.Item, n, used int) int {
	for i, it := range items {
		b := metastore.ItemBytes(it.Key, it.Value)
		if metastore.PageFull(n+i, used, b) {
			return i
		}
		used += b
	}
	return len(items)
}

type v2pos struct {
	family string
	shard  int
	last   string
}

func (p v2pos) encode() []byte {
	b := binary.AppendUvarint(nil, uint64(len(p.family)))
	b = append(b, p.family...)
	b = binary.AppendUvarint(b, uint64(p.shard))
	return append(b, p.last...)
}

func decodeV2pos(b []byte) (v2pos, error) {
	bad := fmt.Errorf("%w: not a v2 query position", metastore.ErrInvalidCursor)
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return v2pos{}, bad
	}
	fam := string(b[k : k+int(n)])
	b = b[k+int(n):]
	shard, k := binary.Uvarint(b)
	if k <= 0 || shard > keyspace.MaxShards {
		return v2pos{}, bad
	}
	return v2pos{family: fam, shard: int(shard), last: string(b[k:])}, nil
}

// listV2 queries the candidate families' shards in order, each request with
// a Limit of what remains of the page.
func (d *Driver) listV2(ctx context.Context, prefix string, limit int, resume bool, pos []byte) ([]metastore.Item, []byte, error) {
	families, err := d.candidateFamilies(ctx, prefix)
	if err != nil {
		return nil, nil, err
	}
	at := v2pos{}
	if len(families) > 0 {
		at.family = families[0]
	}
	if resume {
		if at, err = decodeV2pos(pos); err != nil {
			return nil, nil, err
		}
		if err := d.checkV2pos(at, prefix); err != nil {
			return nil, nil, err
		}
	}
	// Families are visited in sorted order; a position names its family, so
	// a family registered mid-listing shifts nothing.
	fi, _ := slices.BinarySearch(families, at.family)
	var items []metastore.Item
	used := 0
	for fi < len(families) {
		if fam := families[fi]; fam != at.family {
			at = v2pos{family: fam}
		}
		remaining := limit - len(items)
		if remaining == 0 || len(items) > 0 && used >= metastore.MaxPageBytes {
			return items, at.encode(), nil
		}
		page, lek, err := d.queryShard(ctx, prefix, at, remaining)
		if err != nil {
			return nil, nil, err
		}
		if n := fitPage(page, len(items), used); n < len(page) {
			// The page ends at the byte budget: the next one resumes in
			// this shard, after the last item kept (or where this query
			// began, if none of its items fit).
			items = append(items, page[:n]...)
			if n > 0 {
				at.last = page[n-1].Key
			}
			return items, at.encode(), nil
		}
		for _, it := range page {
			used += metastore.ItemBytes(it.Key, it.Value)
		}
		items = append(items, page...)
		switch {
		case lek != "":
			at.last = lek
		case at.shard+1 < d.params.Shards(at.family):
			at = v2pos{family: at.family, shard: at.shard + 1}
		default:
			fi++
		}
	}
	return items, nil, nil
}

// checkV2pos refuses a position that could not have been issued for prefix.
func (d *Driver) checkV2pos(at v2pos, prefix string) error {
	if f, pinned := keyspace.PinnedFamily(prefix); pinned && at.family != f || !pinned && !keyspace.FamilyMatches(at.family, prefix) {
		return fmt.Errorf("%w: position in family %q lies outside prefix %q", metastore.ErrInvalidCursor, at.family, prefix)
	}
	if at.shard >= d.params.Shards(at.family) {
		return fmt.Errorf("%w: shard %d out of range for family %q", metastore.ErrInvalidCursor, at.shard, at.family)
	}
	if at.last != "" && (!strings.HasPrefix(at.last, prefix) || d.params.BucketOf(at.last) != keyspace.Bucket(at.family, at.shard)) {
		return fmt.Errorf("%w: position %q lies outside prefix %q", metastore.ErrInvalidCursor, at.last, prefix)
	}
	return nil
}

// queryShard is one Query of one shard; it returns the items and the last
// evaluated pk when the shard has more.
func (d *Driver) queryShard(ctx context.Context, prefix string, at v2pos, limit int) ([]metastore.Item, string, error) {
	bucket := keyspace.Bucket(at.family, at.shard)
	kc := expression.Key(attrBucket).Equal(expression.Value(bucket))
	if prefix != "" {
		kc = kc.And(expression.Key(attrPK).BeginsWith(prefix))
	}
	expr, err := expression.NewBuilder().WithKeyCondition(kc).
		WithProjection(expression.NamesList(expression.Name(attrPK), expression.Name(attrValue))).Build()
	if err != nil {
		return nil, "", fmt.Errorf("lake: build key condition: %w", err)
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(d.v2),
		KeyConditionExpression:    expr.KeyCondition(),
		ProjectionExpression:      expr.Projection(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		Limit:                     aws.Int32(int32(limit)),
		ConsistentRead:            aws.Bool(true),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	}
	if at.last != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			attrBucket: &types.AttributeValueMemberS{Value: bucket},
			attrPK:     &types.AttributeValueMemberS{Value: at.last},
		}
	}
	var out *dynamodb.QueryOutput
	err = d.retry(ctx, func(int) error {
		out, err = d.api.Query(ctx, in)
		return err
	})
	if err != nil {
		return nil, "", d.classify(err, d.v2)
	}
	d.meter.request("Query", out.ScannedCount, out.Count, ccOf(out.ConsumedCapacity)...)
	items, err := decodeItems(out.Items)
	if err != nil {
		return nil, "", err
	}
	lek := ""
	if v, ok := out.LastEvaluatedKey[attrPK].(*types.AttributeValueMemberS); ok {
		lek = v.Value
	}
	return items, lek, nil
}

// candidateFamilies returns, sorted, the families whose keys can start with
// prefix: the pinned family, or the root family and the registered families
// whose names start with prefix.
func (d *Driver) candidateFamilies(ctx context.Context, prefix string) ([]string, error) {
	if f, ok := keyspace.PinnedFamily(prefix); ok {
		return []string{f}, nil
	}
	registered, err := d.registeredFamilies(ctx)
	if err != nil {
		return nil, err
	}
	out := []string{metastore.RootFamily}
	for _, f := range registered {
		if keyspace.FamilyMatches(f, prefix) && f != metastore.RootFamily {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out, nil
}

func decodeItems(raw []map[string]types.AttributeValue) ([]metastore.Item, error) {
	items := make([]metastore.Item, 0, len(raw))
	for _, it := range raw {
		pk, ok1 := it[attrPK].(*types.AttributeValueMemberS)
		v, ok2 := it[attrValue].(*types.AttributeValueMemberB)
		if !ok1 || !ok2 {
			return nil, errors.New("lake: an item lacks its string pk or binary value attribute")
		}
		items = append(items, metastore.Item{Key: pk.Value, Value: v.Value})
	}
	return items, nil
}
