package reshape

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
)

// IndexStatus is the state of the new index while apply waits for it.
type IndexStatus struct {
	// Status is DynamoDB's IndexStatus: CREATING, UPDATING, ACTIVE, ...
	// ("" while the table does not list the index yet).
	Status string
	// Backfilling says DynamoDB is still copying existing items into it.
	Backfilling bool
	ItemCount   int64
	SizeBytes   int64
	Elapsed     time.Duration
}

// Ready says the index is ACTIVE and done backfilling.
func (s IndexStatus) Ready() bool {
	return s.Status == string(types.IndexStatusActive) && !s.Backfilling
}

// IndexOptions configure EnsureIndex.
type IndexOptions struct {
	// PollInterval is the time between two DescribeTable calls while
	// waiting (DefaultPollInterval).
	PollInterval time.Duration
	// Progress, when set, is called after each DescribeTable while waiting.
	Progress func(IndexStatus)
	// MaxWait bounds the wait for the table to accept the new index and
	// for the index to become ACTIVE (DefaultMaxWait); past it EnsureIndex
	// fails naming the last status it saw. Building an index on a large
	// table takes hours: a resumed apply waits again.
	MaxWait time.Duration
}

// Defaults of IndexOptions.
const (
	DefaultPollInterval = 5 * time.Second
	DefaultMaxWait      = 12 * time.Hour
)

// IndexExists reports whether the table has the spec's index, as last
// described.
func (r *Reshaper) IndexExists() bool { return r.tab().index(r.spec.Index.Name) != nil }

// EnsureIndex adds the spec's global secondary index to the live table with
// UpdateTable if the table does not have it yet, then waits, reporting
// progress, while the index is CREATING or backfilling, until it is ACTIVE.
// It returns whether it created the index. DynamoDB builds the index online:
// the table keeps serving reads and writes meanwhile. The index's own
// backfill copies only items that already hold its key attributes; the
// sweep adds them to the others.
func (r *Reshaper) EnsureIndex(ctx context.Context, opts IndexOptions) (bool, error) {
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	created := false
	if !r.IndexExists() {
		if err := r.createIndex(ctx, opts); err != nil {
			return false, err
		}
		created = true
	}
	return created, r.waitIndex(ctx, opts)
}

func (r *Reshaper) createIndex(ctx context.Context, opts IndexOptions) error {
	s := r.spec
	gsi := &types.CreateGlobalSecondaryIndexAction{
		IndexName:  aws.String(s.Index.Name),
		KeySchema:  s.keySchema(),
		Projection: &types.Projection{ProjectionType: types.ProjectionType(s.Index.Projection)},
	}
	if s.Index.Projection == "INCLUDE" {
		gsi.Projection.NonKeyAttributes = s.Index.Include
	}
	if bm := r.tab().desc.BillingModeSummary; bm == nil || bm.BillingMode != types.BillingModePayPerRequest {
		// A PROVISIONED table (no summary also means PROVISIONED) needs the
		// index's throughput: the spec's, else the table's.
		c := s.Index.Provisioned
		if c == nil && r.tab().desc.ProvisionedThroughput != nil {
			pt := r.tab().desc.ProvisionedThroughput
			c = &Capacity{Read: max(aws.ToInt64(pt.ReadCapacityUnits), 1), Write: max(aws.ToInt64(pt.WriteCapacityUnits), 1)}
		}
		if c != nil {
			gsi.ProvisionedThroughput = &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(c.Read), WriteCapacityUnits: aws.Int64(c.Write)}
		}
	}
	var defs []types.AttributeDefinition
	for _, k := range s.indexKeys() {
		defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(k.Attribute), AttributeType: types.ScalarAttributeType(k.Type)})
	}
	in := &dynamodb.UpdateTableInput{
		TableName:                   aws.String(s.Table),
		AttributeDefinitions:        defs,
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: gsi}},
	}
	start := time.Now()
	for {
		_, err := r.api.UpdateTable(ctx, in)
		if err == nil {
			return nil
		}
		var inUse *types.ResourceInUseException
		var le *types.LimitExceededException
		if !errors.As(err, &inUse) && !errors.As(err, &le) && !alreadyExists(err) {
			return fmt.Errorf("lake: reshape: add index %s to %s: %w", s.Index.Name, s.Table, err)
		}
		// Another apply added it, or the table is busy with another update:
		// look again.
		if err := r.refresh(ctx); err != nil {
			return err
		}
		if r.IndexExists() {
			return nil
		}
		if opts.Progress != nil {
			opts.Progress(IndexStatus{Status: "table busy: " + err.Error(), Elapsed: time.Since(start)})
		}
		if time.Since(start) > opts.MaxWait {
			return fmt.Errorf("lake: reshape: add index %s to %s: the table stayed busy for %s (last: %v); run apply again later", s.Index.Name, s.Table, opts.MaxWait, err)
		}
		if err := ddb.Sleep(ctx, opts.PollInterval); err != nil {
			return err
		}
	}
}

func alreadyExists(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "already exists")
}

// waitIndex polls DescribeTable until the index is ACTIVE and not
// backfilling.
func (r *Reshaper) waitIndex(ctx context.Context, opts IndexOptions) error {
	start := time.Now()
	for {
		if err := r.refresh(ctx); err != nil {
			return err
		}
		st := IndexStatus{Elapsed: time.Since(start)}
		if g := r.tab().index(r.spec.Index.Name); g != nil {
			st.Status = string(g.IndexStatus)
			st.Backfilling = aws.ToBool(g.Backfilling)
			st.ItemCount = aws.ToInt64(g.ItemCount)
			st.SizeBytes = aws.ToInt64(g.IndexSizeBytes)
		}
		if st.Status == string(types.IndexStatusDeleting) {
			return fmt.Errorf("%w: reshape: index %s of %s is being deleted", metastore.ErrRefused, r.spec.Index.Name, r.spec.Table)
		}
		if opts.Progress != nil {
			opts.Progress(st)
		}
		if st.Ready() {
			return nil
		}
		if st.Elapsed > opts.MaxWait {
			return fmt.Errorf("lake: reshape: index %s of %s is still %s after %s (backfilling %v, %d items); run apply again to wait on", r.spec.Index.Name, r.spec.Table, st.Status, opts.MaxWait, st.Backfilling, st.ItemCount)
		}
		if err := ddb.Sleep(ctx, opts.PollInterval); err != nil {
			return err
		}
	}
}

// refresh describes the table again (the checks of New included).
func (r *Reshaper) refresh(ctx context.Context) error {
	t, err := describe(ctx, r.api, r.spec)
	if err != nil {
		return err
	}
	r.table.Store(t)
	return nil
}
