package reshape

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
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
		// prev holds the items that differed at the previous attempt, as
		// read then: a difference counts only if its item did not change
		// from one attempt to the next (across the query between them),
		// so that a writer moving items in and out of the key while the
		// check runs is not taken for an index fault.
		var prev map[string]map[string]types.AttributeValue
		for attempt := 0; ; attempt++ {
			got, err := r.queryIndex(ctx, e.value)
			if err != nil {
				return err
			}
			missing, extra, reads, err := r.resolve(ctx, e.value, want, got)
			if err != nil {
				return err
			}
			if len(missing) == 0 && len(extra) == 0 {
				out.Matched++
				break
			}
			stable := func(keys []string) []string {
				if attempt == 0 {
					return keys // nothing to compare with: every difference counts
				}
				var out []string
				for _, k := range keys {
					if p, ok := prev[k]; ok && reflect.DeepEqual(p, reads[k]) {
						out = append(out, k)
					}
				}
				return out
			}
			if attempt >= opts.IndexRetries {
				sm, se := stable(missing), stable(extra)
				if len(sm)+len(se) > 0 {
					out.Mismatches = append(out.Mismatches, IndexMismatch{Value: scalarText(e.value), Missing: sm, Extra: se})
				} else {
					out.Unsettled++
				}
				break
			}
			prev = reads
			out.Retries++
			if err := ddb.Sleep(ctx, delay); err != nil {
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
	var n attrNames
	keyCond := n.key(r.spec.Index.PartitionKey.Attribute).Equal(expression.Value(value))
	proj := expression.NamesList(n.name(r.tab().keyNames[0]))
	for _, k := range r.tab().keyNames[1:] {
		proj = proj.AddNames(n.name(k))
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
			ExpressionAttributeNames:  n.resolve(expr.Names()),
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
// differs after that, sorted, and the items it read (nil: absent).
func (r *Reshaper) resolve(ctx context.Context, value types.AttributeValue, want, got map[string]map[string]types.AttributeValue) (missing, extra []string, reads map[string]map[string]types.AttributeValue, err error) {
	reads = map[string]map[string]types.AttributeValue{}
	check := func(k map[string]types.AttributeValue) (bool, error) {
		item, err := r.read(ctx, k)
		if err != nil {
			return false, err
		}
		reads[KeyString(k)] = item
		if item == nil {
			return false, nil
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
			return nil, nil, nil, err
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
			return nil, nil, nil, err
		}
		if in {
			want[ks] = k
		} else {
			extra = append(extra, ks)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return missing, extra, reads, nil
}
