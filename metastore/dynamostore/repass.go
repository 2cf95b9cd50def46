package dynamostore

import (
	"bytes"
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/lakemeta/lake/metastore"
)

// This file holds the repairs that run after the first backfill pass: a
// v1 writer lake does not know (a legacy binary) may overwrite, create or
// delete v1 items at any time, and the backfill's cursor has moved past
// them. Every repair converges a key from an atomic read of both copies and
// writes v2 under conditions on both (see converge): v1 is never written.

// ConvergeKeys makes v2 converge to v1 for each of keys, each from a fresh
// atomic read of both copies: created, validated, repaired or removed (a v2
// copy of a key v1 no longer has, deleted only while v1 still lacks it).
func (p Primitives) ConvergeKeys(ctx context.Context, keys []string) (BackfillPageResult, error) {
	d := p.d
	var res BackfillPageResult
	families := map[string]bool{}
	for _, k := range keys {
		families[metastore.Family(k)] = true
	}
	for _, f := range slices.Sorted(maps.Keys(families)) {
		if err := d.registerFamilyNow(ctx, f); err != nil {
			return res, err
		}
	}
	err := d.convergeAll(ctx, keys, &res)
	res.Scanned = int64(len(keys))
	return res, err
}

// convergeAll converges keys from fresh reads, backfillWorkers at a time,
// and adds the outcomes to res.
func (d *Driver) convergeAll(ctx context.Context, keys []string, res *BackfillPageResult) error {
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, backfillWorkers)
	var wg sync.WaitGroup
	for _, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			o, err := d.converge(ctx, k, nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = cmp.Or(firstErr, err)
				return
			}
			switch o {
			case outcomeCreated:
				res.Created++
			case outcomeValidated:
				res.Validated++
			case outcomeRepaired:
				res.Repaired++
			case outcomeRemoved:
				res.Removed++
			}
		})
	}
	wg.Wait()
	return firstErr
}

// RepassV1Page is one page of a full re-pass over v1 (`backfill --again`):
// it scans at most limit v1 items after from, reads their v2 copies, counts
// the equal ones as validated and converges every other key from a fresh
// atomic read. Next is empty when v1 is done.
func (p Primitives) RepassV1Page(ctx context.Context, from string, limit int) (BackfillPageResult, error) {
	d := p.d
	items, next, err := d.scanPage(ctx, tV1, Segment{}, from, limit, nil)
	if err != nil {
		return BackfillPageResult{}, err
	}
	res := BackfillPageResult{Next: next}
	var keys []string
	byKey := map[string][]byte{}
	families := map[string]bool{}
	for _, it := range items {
		k := pkOf(it)
		if k == "" || metastore.IsControlKey(k) {
			continue
		}
		keys = append(keys, k)
		byKey[k] = valueOf(it)
		families[metastore.Family(k)] = true
	}
	for _, f := range slices.Sorted(maps.Keys(families)) {
		if err := d.registerFamilyNow(ctx, f); err != nil {
			return res, err
		}
	}
	res.Scanned = int64(len(keys))
	copies, err := d.batchGet(ctx, tV2, keys)
	if err != nil {
		return res, err
	}
	var differ []string
	for _, k := range keys {
		if c, ok := copies[k]; ok && bytes.Equal(valueOf(c), byKey[k]) {
			res.Validated++
			continue
		}
		differ = append(differ, k)
	}
	return res, d.convergeAll(ctx, differ, &res)
}

// RepassV2Page is one page of the re-pass over v2: it scans at most limit
// v2 user items after from (a position RepassV2Page returned) and, for
// every key v1 does not have, removes the v2 copy under the condition that
// v1 still lacks the key and v2 still holds what was read. Keys v1 has are
// left to the v1 pass. Next is empty when v2 is done.
func (p Primitives) RepassV2Page(ctx context.Context, from string, limit int) (BackfillPageResult, error) {
	d := p.d
	f := expression.Not(expression.BeginsWith(expression.Name(attrBucket), metastore.ControlPrefix))
	items, next, err := d.scanPage(ctx, tV2, Segment{}, from, limit, &f)
	if err != nil {
		return BackfillPageResult{}, err
	}
	res := BackfillPageResult{Next: next}
	var keys []string
	for _, it := range items {
		if k := pkOf(it); k != "" {
			keys = append(keys, k)
		}
	}
	res.Scanned = int64(len(keys))
	inV1, err := d.batchGet(ctx, tV1, keys)
	if err != nil {
		return res, err
	}
	var orphans []string
	for _, k := range keys {
		if _, ok := inV1[k]; ok {
			continue // the v1 pass compares its value
		}
		orphans = append(orphans, k)
	}
	return res, d.convergeAll(ctx, orphans, &res)
}
