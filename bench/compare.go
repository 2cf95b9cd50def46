package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/migrate"
	"golang.org/x/sync/errgroup"
)

// CompareConfig shapes RunCompare.
type CompareConfig struct {
	// Table names the tables the benchmark creates: Table (v1),
	// Table_prefix_v2, Table_rawcopy and Table_solo with its v2 companion
	// (a standalone v2 store). They must not exist and are deleted at the
	// end unless Keep is set.
	Table string
	// Ops is the number of operations of each kind measured per state, for
	// lake and for the raw SDK each.
	Ops int
	// Records is the number of v1 records the backfill copies; 0 skips the
	// backfill figures (and measures the states without data).
	Records int
	// PageSize and Segments shape the backfill.
	PageSize, Segments int
	Keep               bool
	// ServerPID, when > 0, is the DynamoDB server's process (on this
	// machine): each copy's CPU, the server's and this process's, is
	// measured into CompareResult.CPU.
	ServerPID int
}

// OpCost is one operation's figures, lake's beside the raw SDK's.
type OpCost struct {
	Op                  string
	LakeP50, LakeP99    time.Duration
	RawP50, RawP99      time.Duration
	LakeUnits, RawUnits float64 // capacity units per operation
	LakeRequests        float64 // requests per operation
	// RawRequests are the raw SDK's requests per operation: the fewest
	// one step of this kind needs (one conditional write, one read), the
	// minimum lake's figure is judged against.
	RawRequests float64
}

// RequestRatio is lake's requests per operation over the minimum (the raw
// SDK's); 0 when the raw side sent none.
func (o OpCost) RequestRatio() float64 {
	if o.RawRequests == 0 {
		return 0
	}
	return o.LakeRequests / o.RawRequests
}

// UnitRatio is lake's capacity units per operation over the raw SDK's; 0
// when the raw side consumed none.
func (o OpCost) UnitRatio() float64 {
	if o.RawUnits == 0 {
		return 0
	}
	return o.LakeUnits / o.RawUnits
}

// StateCosts are the figures of one layout or migration state.
type StateCosts struct {
	State string
	Ops   []OpCost
}

// CompareResult holds the figures of RunCompare.
type CompareResult struct {
	States  []StateCosts
	Records int
	RawCopy time.Duration
	// RawTxCopy is the raw SDK doing what the backfill does without lake:
	// the same segments, pages and batches of TransactWriteItems, each key a
	// ConditionCheck on the source and a Put if absent.
	RawTxCopy time.Duration
	Backfill  time.Duration
	Counts    dynamostore.BackfillProgress
	CPU       *CompareCPU // with CompareConfig.ServerPID and records: each copy's CPU
}

// RawAPI is the client RunCompare needs: the store's, plus the DeleteItem
// the raw side's deletes use (a *dynamodb.Client is one).
type RawAPI interface {
	ddb.API
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// RunCompare measures lake against the raw aws-sdk-go-v2 in one run, on the
// same tables: in each layout and migration state (v1, dual, backfill,
// v2-authoritative, v2-only, standalone v2), cfg.Ops strongly consistent
// point reads, creates if absent, CAS and deletes, each lake operation
// followed by its raw counterpart (GetItem, conditional PutItem, conditional
// DeleteItem) on the authority's table, and the backfill of cfg.Records
// records against a raw copy of them (Scan + BatchWriteItem).
func RunCompare(ctx context.Context, api RawAPI, cfg CompareConfig, progress io.Writer) (CompareResult, error) {
	res := CompareResult{Records: cfg.Records}
	if cfg.Ops < 2 || cfg.Records < 0 || cfg.PageSize < 1 || cfg.PageSize > metastore.MaxListLimit {
		return res, fmt.Errorf("%w: need ops ≥ 2, records ≥ 0 and 1 ≤ page size ≤ %d", metastore.ErrInvalidArgument, metastore.MaxListLimit)
	}
	raw, rawtx, solo := cfg.Table+"_rawcopy", cfg.Table+"_rawtx", cfg.Table+"_solo"
	if !cfg.Keep {
		defer func() {
			for _, name := range []string{cfg.Table, cfg.Table + dynamostore.V2Suffix, raw, rawtx, solo + dynamostore.V2Suffix} {
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
	zero := time.Duration(0)
	m, err := migrate.New(d, &migrate.Options{PageSize: cfg.PageSize, Segments: cfg.Segments, Progress: progress, Retention: &zero})
	if err != nil {
		return res, err
	}
	measure := func(state string, t string, v2 bool) error {
		fmt.Fprintf(progress, "measuring %s…\n", state)
		time.Sleep(d.Refresh()) // every cached state is the new one
		ops, err := compareOps(ctx, api, s, d, t, v2, cfg.Ops)
		if err != nil {
			return fmt.Errorf("%s: %w", state, err)
		}
		res.States = append(res.States, StateCosts{State: state, Ops: ops})
		return nil
	}
	v2 := cfg.Table + dynamostore.V2Suffix
	if err := measure("v1", cfg.Table, false); err != nil {
		return res, err
	}
	var cpu CompareCPU
	if cfg.ServerPID > 0 && cfg.Records > 0 {
		res.CPU = &cpu
	}
	// withCPU runs one copy and, when CPU is measured, stores what it cost.
	withCPU := func(into *CopyCPU, copy func() error) error {
		if res.CPU == nil {
			return copy()
		}
		before, err := sampleCPU(cfg.ServerPID)
		if err != nil {
			return err
		}
		if err := copy(); err != nil {
			return err
		}
		*into, err = cpuSince(before, cfg.ServerPID)
		return err
	}
	if cfg.Records > 0 {
		fmt.Fprintf(progress, "raw copy of %s…\n", cfg.Table)
		if err := withCPU(&cpu.RawCopy, func() (err error) {
			res.RawCopy, err = rawCopy(ctx, api, cfg.Table, raw)
			return err
		}); err != nil {
			return res, err
		}
		fmt.Fprintf(progress, "raw conditioned copy of %s…\n", cfg.Table)
		if err := withCPU(&cpu.RawTxCopy, func() (err error) {
			res.RawTxCopy, err = rawTxCopy(ctx, api, cfg.Table, rawtx, cfg.Segments, cfg.PageSize)
			return err
		}); err != nil {
			return res, err
		}
	}
	if err := m.Run(ctx, "dual"); err != nil {
		return res, err
	}
	if err := measure("dual", cfg.Table, false); err != nil {
		return res, err
	}
	start := time.Now()
	if err := withCPU(&cpu.Backfill, func() error { return m.Run(ctx, "backfill") }); err != nil {
		return res, err
	}
	res.Backfill = time.Since(start)
	st, err := m.Status(ctx)
	if err != nil {
		return res, err
	}
	res.Counts = st.Backfill
	if err := measure("backfill", cfg.Table, false); err != nil {
		return res, err
	}
	for _, step := range []string{"verify", "finalize"} {
		if err := m.Run(ctx, step); err != nil {
			return res, err
		}
	}
	if err := measure("v2-authoritative", v2, true); err != nil {
		return res, err
	}
	if err := m.Run(ctx, "retire-v1"); err != nil {
		return res, err
	}
	if err := measure("v2-only", v2, true); err != nil {
		return res, err
	}
	if err := dynamostore.Create(ctx, api, dynamostore.Options{Table: solo, Layout: dynamostore.LayoutV2}); err != nil {
		return res, err
	}
	sd, err := dynamostore.Open(ctx, api, dynamostore.Options{Table: solo})
	if err != nil {
		return res, err
	}
	fmt.Fprintf(progress, "measuring standalone v2…\n")
	ops, err := compareOps(ctx, api, metastore.New(sd), sd, solo+dynamostore.V2Suffix, true, cfg.Ops)
	if err != nil {
		return res, fmt.Errorf("standalone v2: %w", err)
	}
	res.States = append(res.States, StateCosts{State: "standalone v2", Ops: ops})
	return res, nil
}

// rawTxCopy copies table into a fresh table dst as the backfill does, with
// the raw SDK: segments parallel scan segments of pages of pageSize, each
// page in batches of 50 keys, each batch one TransactWriteItems of a
// ConditionCheck that the source still holds the scanned value and a Put if
// absent per key, 8 batches of a page in flight.
func rawTxCopy(ctx context.Context, api RawAPI, table, dst string, segments, pageSize int) (time.Duration, error) {
	if err := createPKTable(ctx, api, dst); err != nil {
		return 0, err
	}
	equals := func(v types.AttributeValue) expression.Expression {
		e, _ := expression.NewBuilder().WithCondition(expression.Name("v").Equal(expression.Value(v))).Build()
		return e
	}
	absent, _ := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name("pk"))).Build()
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for seg := range segments {
		g.Go(func() error {
			var esk map[string]types.AttributeValue
			for {
				in := &dynamodb.ScanInput{TableName: aws.String(table), ExclusiveStartKey: esk, Limit: aws.Int32(int32(pageSize)), ConsistentRead: aws.Bool(true)}
				if segments > 1 {
					in.Segment, in.TotalSegments = aws.Int32(int32(seg)), aws.Int32(int32(segments))
				}
				out, err := api.Scan(gctx, in)
				if err != nil {
					return err
				}
				pg, pctx := errgroup.WithContext(gctx)
				pg.SetLimit(8)
				for i := 0; i < len(out.Items); i += 50 {
					batch := out.Items[i:min(i+50, len(out.Items))]
					pg.Go(func() error {
						var tx []types.TransactWriteItem
						for _, it := range batch {
							if it["v"] == nil {
								continue
							}
							e := equals(it["v"])
							tx = append(tx,
								types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table),
									Key: map[string]types.AttributeValue{"pk": it["pk"]}, ConditionExpression: e.Condition(),
									ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}},
								types.TransactWriteItem{Put: &types.Put{TableName: aws.String(dst), Item: it, ConditionExpression: absent.Condition(),
									ExpressionAttributeNames: absent.Names(), ExpressionAttributeValues: absent.Values()}})
						}
						if len(tx) == 0 {
							return nil
						}
						_, err := api.TransactWriteItems(pctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
						return err
					})
				}
				if err := pg.Wait(); err != nil {
					return err
				}
				if esk = out.LastEvaluatedKey; esk == nil {
					return nil
				}
			}
		})
	}
	err := g.Wait()
	return time.Since(start), err
}

// createPKTable creates a table keyed by "pk" alone and waits for it.
func createPKTable(ctx context.Context, api ddb.API, name string) error {
	_, err := api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		return err
	}
	return dynamodb.NewTableExistsWaiter(api).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute)
}

// rawKey is the primary key the raw SDK writes in table: its own keys, in a
// bucket of their own on a v2 table, so they never meet lake's.
func rawKey(v2 bool, i int) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("raw/%06d", i)}}
	if v2 {
		k["bucket"] = &types.AttributeValueMemberS{Value: "raw#bench"}
	}
	return k
}

// sample collects latencies and capacity of one operation.
type sample struct {
	lat   []time.Duration
	units float64
	// calls counts the operations that completed: each raw operation is
	// one request, so for the raw side it is the requests sent.
	calls int
}

func (s *sample) time(f func() (float64, error)) error {
	start := time.Now()
	u, err := f()
	s.lat = append(s.lat, time.Since(start))
	s.units += u
	if err == nil {
		s.calls++
	}
	return err
}

func (s *sample) pct(p int) time.Duration {
	slices.Sort(s.lat)
	return s.lat[min(len(s.lat)-1, len(s.lat)*p/100)]
}

func units(cc *types.ConsumedCapacity) float64 {
	if cc == nil {
		return 0
	}
	return aws.ToFloat64(cc.CapacityUnits)
}

// compareOps measures n of each operation, lake on s and the raw SDK on
// table, interleaved so that both see the same machine.
func compareOps(ctx context.Context, api RawAPI, s *metastore.Store, d *dynamostore.Driver, table string, v2 bool, n int) ([]OpCost, error) {
	lakeKey := func(i int) string { return fmt.Sprintf("tbl/bench-%06d", i) }
	val := func(gen, i int) []byte {
		return fmt.Appendf(nil, "value %d of %d, about the size of a catalog entry", gen, i)
	}
	cond := func(c expression.ConditionBuilder) expression.Expression {
		e, _ := expression.NewBuilder().WithCondition(c).Build()
		return e
	}
	absent := cond(expression.AttributeNotExists(expression.Name("pk")))
	equals := func(v []byte) expression.Expression {
		return cond(expression.Name("v").Equal(expression.Value(&types.AttributeValueMemberB{Value: v})))
	}
	rawPut := func(i int, v []byte, e expression.Expression) (float64, error) {
		item := rawKey(v2, i)
		item["v"] = &types.AttributeValueMemberB{Value: v}
		out, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item,
			ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil {
			return 0, err
		}
		return units(out.ConsumedCapacity), nil
	}
	// The family registry is written once per family per process: not a
	// per-operation cost.
	if err := s.Put(ctx, "tbl/bench-warm", []byte("x")); err != nil {
		return nil, err
	}
	type kind struct {
		name string
		lake func(i int) error
		raw  func(i int) (float64, error)
	}
	kinds := []kind{
		{"create if absent",
			func(i int) error { return s.CAS(ctx, lakeKey(i), metastore.ExpectAbsent(), val(0, i)) },
			func(i int) (float64, error) { return rawPut(i, val(0, i), absent) }},
		{"point read (strong)",
			func(i int) error { _, err := s.Get(ctx, lakeKey(i)); return err },
			func(i int) (float64, error) {
				out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: rawKey(v2, i),
					ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
				if err == nil && out.Item == nil {
					err = errors.New("raw GetItem found nothing")
				}
				if err != nil {
					return 0, err
				}
				return units(out.ConsumedCapacity), nil
			}},
		{"CAS",
			func(i int) error { return s.CAS(ctx, lakeKey(i), metastore.ExpectValue(val(0, i)), val(1, i)) },
			func(i int) (float64, error) { return rawPut(i, val(1, i), equals(val(0, i))) }},
		{"delete",
			func(i int) error { return s.Delete(ctx, lakeKey(i), val(1, i)) },
			func(i int) (float64, error) {
				e := equals(val(1, i))
				out, err := api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: rawKey(v2, i),
					ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
					ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
				if err != nil {
					return 0, err
				}
				return units(out.ConsumedCapacity), nil
			}},
	}
	var out []OpCost
	for _, k := range kinds {
		var l, r sample
		before := d.Stats()
		for i := range n {
			if err := l.time(func() (float64, error) { return 0, k.lake(i) }); err != nil {
				return nil, fmt.Errorf("lake %s: %w", k.name, err)
			}
			if err := r.time(func() (float64, error) { return k.raw(i) }); err != nil {
				return nil, fmt.Errorf("raw %s: %w", k.name, err)
			}
		}
		c := d.Stats().Sub(before)
		out = append(out, OpCost{Op: k.name,
			LakeP50: l.pct(50), LakeP99: l.pct(99), RawP50: r.pct(50), RawP99: r.pct(99),
			LakeUnits: (c.ReadCapacity + c.WriteCapacity) / float64(n), RawUnits: r.units / float64(n),
			LakeRequests: float64(c.TotalRequests()) / float64(n), RawRequests: float64(r.calls) / float64(n)})
	}
	return out, nil
}

// PrintCompare writes r for people.
func PrintCompare(w io.Writer, r CompareResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "state\toperation\tlake p50\traw p50\tp50 ratio\tlake p99\traw p99\tlake units/op\traw units/op\tunits ratio\tlake requests/op\tminimum\trequests ratio\t")
	us := func(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) + " µs" }
	for _, st := range r.States {
		for _, o := range st.Ops {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f×\t%s\t%s\t%.2f\t%.2f\t%.2f×\t%.2f\t%.2f\t%.2f×\t\n", st.State, o.Op,
				us(o.LakeP50), us(o.RawP50), float64(o.LakeP50)/float64(max(o.RawP50, 1)), us(o.LakeP99), us(o.RawP99),
				o.LakeUnits, o.RawUnits, o.UnitRatio(), o.LakeRequests, o.RawRequests, o.RequestRatio())
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Records > 0 {
		rate := func(d time.Duration) float64 { return float64(r.Records) / max(d.Seconds(), 1e-9) }
		fmt.Fprintf(w, "\nraw copy:  %d records in %v, %.0f items/s (Scan + BatchWriteItem, no conditions)\n", r.Records, r.RawCopy.Round(time.Millisecond), rate(r.RawCopy))
		fmt.Fprintf(w, "raw conditioned copy: %d records in %v, %.0f items/s (the backfill's segments, pages and transactions through the raw SDK: ConditionCheck on v1 + Put if absent per key)\n", r.Records, r.RawTxCopy.Round(time.Millisecond), rate(r.RawTxCopy))
		fmt.Fprintf(w, "backfill:  %d records in %v, %.0f items/s, %.0f%% of the raw copy (created %d, validated %d, repaired %d)\n",
			r.Records, r.Backfill.Round(time.Millisecond), rate(r.Backfill), 100*rate(r.Backfill)/max(rate(r.RawCopy), 1e-9),
			r.Counts.Created, r.Counts.Validated, r.Counts.Repaired)
	}
	return nil
}
