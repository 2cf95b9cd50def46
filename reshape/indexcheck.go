package reshape

import (
	"context"
	"fmt"
	"maps"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// checkIndex queries the index for each sampled value and compares what it
// returns with the items the table holds under that value.
func (r *Reshaper) checkIndex(ctx context.Context, s *sampler, opts VerifyOptions, out *IndexCheck) error {
	g := r.tab().index(r.spec.Index.Name)
	if g == nil {
		out.Skipped = fmt.Sprintf("index %s does not exist (run apply)", r.spec.Index.Name)
		return nil
	}
	if g.IndexStatus != types.IndexStatusActive || aws.ToBool(g.Backfilling) {
		out.Skipped = fmt.Sprintf("index %s is %s (backfilling: %v), not ACTIVE yet", r.spec.Index.Name, g.IndexStatus, aws.ToBool(g.Backfilling))
		return nil
	}
	for _, e := range s.values() {
		out.Checked++
		want := maps.Clone(e.keys)
		delay := opts.RetryDelay
		for attempt := 0; ; attempt++ {
			got, err := r.queryIndex(ctx, e.value)
			if err != nil {
				return err
			}
			missing, extra, err := r.resolve(ctx, e.value, want, got)
			if err != nil {
				return err
			}
			if len(missing) == 0 && len(extra) == 0 {
				out.Matched++
				break
			}
			if attempt >= opts.IndexRetries {
				out.Mismatches = append(out.Mismatches, IndexMismatch{Value: scalarText(e.value), Missing: missing, Extra: extra})
				break
			}
			out.Retries++
			if err := sleep(ctx, delay); err != nil {
				return err
			}
			delay *= 2
		}
	}
	return nil
}

// queryIndex returns the primary keys of every item the index holds under
// value.
func (r *Reshaper) queryIndex(ctx context.Context, value types.AttributeValue) (map[string]map[string]types.AttributeValue, error) {
	keyCond := expression.Key(r.spec.Index.PartitionKey.Attribute).Equal(expression.Value(value))
	proj := expression.NamesList(expression.Name(r.tab().keyNames[0]))
	for _, k := range r.tab().keyNames[1:] {
		proj = proj.AddNames(expression.Name(k))
	}
	expr, err := expression.NewBuilder().WithKeyCondition(keyCond).WithProjection(proj).Build()
	if err != nil {
		return nil, fmt.Errorf("lake: reshape: build index query: %w", err)
	}
	got := map[string]map[string]types.AttributeValue{}
	var start map[string]types.AttributeValue
	for {
		out, err := r.api.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(r.spec.Table),
			IndexName:                 aws.String(r.spec.Index.Name),
			KeyConditionExpression:    expr.KeyCondition(),
			ProjectionExpression:      expr.Projection(),
			ExpressionAttributeNames:  expr.Names(),
			ExpressionAttributeValues: expr.Values(),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, fmt.Errorf("lake: reshape: query index %s: %w", r.spec.Index.Name, err)
		}
		for _, it := range out.Items {
			k := r.tab().key(it)
			got[KeyString(k)] = k
		}
		if len(out.LastEvaluatedKey) == 0 {
			return got, nil
		}
		start = out.LastEvaluatedKey
	}
}

// resolve compares the index's answer with what the table held when it was
// scanned, re-reading each differing item: an item deleted or moved since
// the scan leaves want, one written since joins it. It returns what still
// differs after that, sorted.
func (r *Reshaper) resolve(ctx context.Context, value types.AttributeValue, want, got map[string]map[string]types.AttributeValue) (missing, extra []string, err error) {
	check := func(k map[string]types.AttributeValue) (bool, error) {
		item, err := r.read(ctx, k)
		if err != nil || item == nil {
			return false, err
		}
		v, ok := r.indexValue(item)
		return ok && sameScalar(v, value), nil
	}
	for ks, k := range want {
		if _, ok := got[ks]; ok {
			continue
		}
		in, err := check(k)
		if err != nil {
			return nil, nil, err
		}
		if in {
			missing = append(missing, ks)
		} else {
			delete(want, ks)
		}
	}
	for ks, k := range got {
		if _, ok := want[ks]; ok {
			continue
		}
		in, err := check(k)
		if err != nil {
			return nil, nil, err
		}
		if in {
			want[ks] = k
		} else {
			extra = append(extra, ks)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return missing, extra, nil
}
