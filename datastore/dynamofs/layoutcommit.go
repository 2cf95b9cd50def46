package dynamofs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// CommitIfLayout implements datastore.LayoutCommitter (issue 31): the
// commit's TransactWriteItems carries a ConditionCheck that the layout
// record's item (k#datastore/layout) holds layout, so a sync that files
// paths with the layout its tree remembers needs no read of the record
// first: if the datastore was recreated with another layout (or none), the
// whole commit fails on that check and nothing is written. The check is an
// item of the transaction, not a request. A commit too big for one
// transaction (a staged commit, whole.go) carries it in its first write,
// the first staging transaction, with the registration of its partitions
// and its record's create (firstWrite): a stale layout refuses it before
// anything of it is written; one whose transaction has no room left reads
// the record first instead (one GetItem).
func (d *Driver) CommitIfLayout(ctx context.Context, fence *datastore.Fence, entries []datastore.Entry, now time.Time, layout []byte) ([]datastore.Info, error) {
	return d.commitIfLayout(ctx, fence, entries, now, layout) // commit.go
}

// withLayoutCheck adds the layout record's ConditionCheck to a commit's
// transaction, or, with no room for it, reads the record now (then the
// commit needs no check: the record is written once, and a recreated
// datastore between this read and the commit is the race every commit
// verified by a read had).
func (d *Driver) withLayoutCheck(ctx context.Context, items []types.TransactWriteItem, roles []role, layout []byte) ([]types.TransactWriteItem, []role, error) {
	if layout == nil {
		return items, roles, nil
	}
	if len(items) >= maxTxItems {
		return items, roles, d.checkLayoutRecord(ctx, layout)
	}
	c, err := build(expression.NewBuilder().WithCondition(expression.Name("v").Equal(expression.Value(layout))))
	if err != nil {
		return nil, nil, err
	}
	return append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: &d.table, Key: recordKey(datastore.LayoutKey),
		ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}}), append(roles, roleLayout), nil
}

// checkLayoutRecord reads the layout record and returns an error matching
// datastore.ErrStaleLayout unless it holds layout (nil: no check).
func (d *Driver) checkLayoutRecord(ctx context.Context, layout []byte) error {
	if layout == nil {
		return nil
	}
	v, err := d.GetRecord(ctx, datastore.LayoutKey)
	if err != nil && !errors.Is(err, metastore.ErrNotFound) {
		return err
	}
	if err != nil || !bytes.Equal(v, layout) {
		return staleLayout(layout)
	}
	return nil
}

// staleLayout is the error of a commit refused because the layout record
// does not hold layout.
func staleLayout(layout []byte) error {
	return fmt.Errorf("%w (%s): the commit was refused, nothing of it applied; the datastore records another layout or none", datastore.ErrStaleLayout, layout)
}
