package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/migrate"
)

// MigrationConfig shapes RunMigration.
type MigrationConfig struct {
	// Table names the tables the benchmark creates (Table, Table_prefix_v2
	// and Table_rawcopy); they must not exist and are deleted at the end
	// unless Keep is set.
	Table string
	// Records is the number of v1 records to migrate.
	Records int
	// PageSize is the backfill page size.
	PageSize int
	// Mutations is how many CAS writes measure each mode's cost.
	Mutations int
	Keep      bool
}

// MutationCost is the mean cost of one CAS in one mode.
type MutationCost struct {
	Mode       string
	Requests   float64
	WriteUnits float64
	ReadUnits  float64
	P50, P99   time.Duration
}

// MigrationResult holds the figures of RunMigration.
type MigrationResult struct {
	Records   int
	Backfill  time.Duration
	RawCopy   time.Duration
	Mutations []MutationCost
	Verify    time.Duration
	// Written counts the keys written after the verify; Legacy the raw
	// SDK writes among them (the rest were lake's).
	Written, Legacy int
	// Detection is what each check's precheck found after those writes.
	Detection []Detection
	// Finalize compares finalize's check strategies on the same changes.
	Finalize       []FinalizeFigures
	BackfillCounts dynamostore.BackfillProgress
}

// RunMigration loads cfg.Records records into a v1 table and measures: a
// raw unconditional copy of the table (Scan + BatchWriteItem, the practical
// ceiling), the backfill of the same records, the cost of a CAS in state v1
// and in dual mode, and finalize after cfg.Mutations keys written since the
// verify, a fifth of them by a raw SDK client: which check detects them, and
// the precheck time and write pause of each check strategy, side by side
// (finalize_bench.go).
func RunMigration(ctx context.Context, api ddb.API, cfg MigrationConfig, progress io.Writer) (MigrationResult, error) {
	res := MigrationResult{Records: cfg.Records}
	if cfg.Records < 1 || cfg.Mutations < 1 || cfg.PageSize < 1 || cfg.PageSize > metastore.MaxListLimit {
		return res, fmt.Errorf("%w: need records ≥ 1, mutations ≥ 1 and 1 ≤ page size ≤ %d", metastore.ErrInvalidArgument, metastore.MaxListLimit)
	}
	raw := cfg.Table + "_rawcopy"
	if !cfg.Keep {
		defer func() {
			for _, name := range []string{cfg.Table, cfg.Table + dynamostore.V2Suffix, raw} {
				api.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
			}
		}()
	}
	if err := createLoadedV1(ctx, api, cfg.Table, cfg.Records, progress); err != nil {
		return res, err
	}
	d, err := dynamostore.Open(ctx, api, dynamostore.Options{Table: cfg.Table})
	if err != nil {
		return res, err
	}
	s := metastore.New(d)
	cost, err := measureCAS(ctx, s, d, "v1 (state v1)", cfg.Mutations)
	if err != nil {
		return res, err
	}
	res.Mutations = append(res.Mutations, cost)

	fmt.Fprintf(progress, "raw copy of %s…\n", cfg.Table)
	if res.RawCopy, err = rawCopy(ctx, api, cfg.Table, raw); err != nil {
		return res, err
	}
	m, err := migrate.New(d, &migrate.Options{PageSize: cfg.PageSize, Progress: progress})
	if err != nil {
		return res, err
	}
	if err := m.Run(ctx, "dual"); err != nil {
		return res, err
	}
	time.Sleep(d.Refresh())
	if cost, err = measureCAS(ctx, s, d, "dual (v1 + v2 + barrier)", cfg.Mutations); err != nil {
		return res, err
	}
	res.Mutations = append(res.Mutations, cost)
	start := time.Now()
	if err := m.Run(ctx, "backfill"); err != nil {
		return res, err
	}
	res.Backfill = time.Since(start)
	st, err := m.Status(ctx)
	if err != nil {
		return res, err
	}
	res.BackfillCounts = st.Backfill
	start = time.Now()
	if err := m.Run(ctx, "verify"); err != nil {
		return res, err
	}
	res.Verify = time.Since(start)
	// Writes between the verify and the barrier are what finalize
	// re-checks: lake's, and a legacy writer's (raw SDK) it did not make.
	legacy, err := afterVerify(ctx, api, s, cfg)
	if err != nil {
		return res, err
	}
	res.Written, res.Legacy = cfg.Mutations, legacy
	if res.Detection, err = detect(ctx, d, m, cfg); err != nil {
		return res, err
	}
	if _, err := m.Repair(ctx); err != nil {
		return res, err
	}
	for _, c := range []struct {
		name     string
		opts     migrate.Options
		complete bool
	}{
		{"change log alone (before issue 10; misses legacy writes)", migrate.Options{ChangeLogOnly: true}, false},
		{"full scans (--full-reverify)", migrate.Options{FullReverify: true}, false},
		{"change log + stream (default)", migrate.Options{}, true},
	} {
		f, err := finalizeWith(ctx, d, cfg, c.opts, c.complete, progress)
		if err != nil {
			return res, fmt.Errorf("finalize with %s: %w", c.name, err)
		}
		f.Strategy = c.name
		res.Finalize = append(res.Finalize, f)
	}
	time.Sleep(d.Refresh())
	if cost, err = measureCAS(ctx, s, d, "v2-authoritative (v2 + v1 mirror)", cfg.Mutations); err != nil {
		return res, err
	}
	res.Mutations = append(res.Mutations, cost)
	return res, nil
}

// measureCAS does n CAS increments on one key and returns the mean cost.
func measureCAS(ctx context.Context, s *metastore.Store, d *dynamostore.Driver, mode string, n int) (MutationCost, error) {
	key := "tbl/bench-counter"
	if err := s.Put(ctx, key, []byte("0")); err != nil {
		return MutationCost{}, err
	}
	before := d.Stats()
	lat := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		err := s.CAS(ctx, key, metastore.ExpectValue([]byte(strconv.Itoa(i))), []byte(strconv.Itoa(i+1)))
		if err != nil {
			return MutationCost{}, fmt.Errorf("CAS in %s: %w", mode, err)
		}
		lat = append(lat, time.Since(start))
	}
	c := d.Stats().Sub(before)
	slices.Sort(lat)
	return MutationCost{Mode: mode, Requests: float64(c.TotalRequests()) / float64(n),
		WriteUnits: c.WriteCapacity / float64(n), ReadUnits: c.ReadCapacity / float64(n),
		P50: lat[n/2], P99: lat[min(n-1, n*99/100)]}, nil
}

// rawCopy copies table into a fresh table dst with Scan and BatchWriteItem,
// no conditions: the practical ceiling of any copy.
func rawCopy(ctx context.Context, api ddb.API, table, dst string) (time.Duration, error) {
	_, err := api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(dst),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		return 0, err
	}
	if err := dynamodb.NewTableExistsWaiter(api).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(dst)}, time.Minute); err != nil {
		return 0, err
	}
	start := time.Now()
	var esk map[string]types.AttributeValue
	for {
		// Both requests are idempotent (a read, unconditional puts): a
		// connection dropped mid-response is retried, as any copy would.
		var out *dynamodb.ScanOutput
		err := retryTransport(ctx, func() (err error) {
			out, err = api.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ExclusiveStartKey: esk, Limit: aws.Int32(1000)})
			return err
		})
		if err != nil {
			return 0, err
		}
		for i := 0; i < len(out.Items); i += 25 {
			var reqs []types.WriteRequest
			for _, it := range out.Items[i:min(i+25, len(out.Items))] {
				reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
			}
			pending := map[string][]types.WriteRequest{dst: reqs}
			for len(pending) > 0 {
				var w *dynamodb.BatchWriteItemOutput
				err := retryTransport(ctx, func() (err error) {
					w, err = api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
					return err
				})
				if err != nil {
					return 0, err
				}
				pending = w.UnprocessedItems
			}
		}
		if esk = out.LastEvaluatedKey; esk == nil {
			return time.Since(start), nil
		}
	}
}

// PrintMigration writes r for people.
func PrintMigration(w io.Writer, r MigrationResult) error {
	rate := func(d time.Duration) float64 { return float64(r.Records) / max(d.Seconds(), 1e-9) }
	fmt.Fprintf(w, "records:           %d\n", r.Records)
	fmt.Fprintf(w, "raw copy:          %v (%.0f items/s) — Scan + BatchWriteItem, no conditions\n", r.RawCopy.Round(time.Millisecond), rate(r.RawCopy))
	fmt.Fprintf(w, "backfill:          %v (%.0f items/s, %.2f× the raw copy's time) — created %d, validated %d, repaired %d\n",
		r.Backfill.Round(time.Millisecond), rate(r.Backfill), r.Backfill.Seconds()/max(r.RawCopy.Seconds(), 1e-9),
		r.BackfillCounts.Created, r.BackfillCounts.Validated, r.BackfillCounts.Repaired)
	fmt.Fprintf(w, "verify (online):   %v\n", r.Verify.Round(time.Millisecond))
	printFinalize(w, r)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CAS in mode\trequests/op\twrite units/op\tread units/op\tp50\tp99\tp50 vs v1")
	for _, c := range r.Mutations {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%v\t%v\t%.2f×\n", c.Mode, c.Requests, c.WriteUnits, c.ReadUnits,
			c.P50.Round(10*time.Microsecond), c.P99.Round(10*time.Microsecond), float64(c.P50)/float64(r.Mutations[0].P50))
	}
	return tw.Flush()
}

// createLoadedV1 creates the v1 table and loads records retained records
// into it (the migration's source), the same for every migration bench.
func createLoadedV1(ctx context.Context, api ddb.API, table string, records int, progress io.Writer) error {
	if err := dynamostore.Create(ctx, api, dynamostore.Options{Table: table, Layout: dynamostore.LayoutV1}); err != nil {
		return err
	}
	if records == 0 {
		return nil
	}
	loader, err := dynamostore.Open(ctx, api, dynamostore.Options{Table: table, Layout: dynamostore.LayoutV1})
	if err != nil {
		return err
	}
	items := make([]metastore.Item, records)
	for i := range items {
		items[i] = metastore.Item{Key: retainedKey(i, 200), Value: []byte("retained record " + strconv.Itoa(i))}
	}
	fmt.Fprintf(progress, "loading %d records into %s…\n", records, table)
	return loader.Load(ctx, items)
}
