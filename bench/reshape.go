package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/reshape"
)

// ReshapeConfig shapes RunReshape.
type ReshapeConfig struct {
	// Table is the demo table the benchmark creates (it must not exist);
	// it is deleted at the end unless Keep is set.
	Table string
	// Comments is about how many old comments the table holds (rounded
	// to whole workspaces of 4 documents × 50 comments).
	Comments int
	Segments int
	PageSize int
	Keep     bool
}

// ReshapePass is one timed pass over the table.
type ReshapePass struct {
	Name     string
	Items    int64 // items scanned
	Written  int64 // items written
	Wall     time.Duration
	WCU, RCU float64
}

// ItemsPerSecond is the pass's scan rate.
func (p ReshapePass) ItemsPerSecond() float64 { return float64(p.Items) / max(p.Wall.Seconds(), 1e-9) }

// ReshapeResult holds the figures of RunReshape.
type ReshapeResult struct {
	Items, Comments int
	IndexWait       time.Duration
	Passes          []ReshapePass // raw scan, apply, apply again, verify
}

// ReshapeAPI is what RunReshape needs of DynamoDB: reshape's API and
// DeleteTable for the cleanup.
type ReshapeAPI interface {
	reshape.API
	DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
}

// RunReshape creates the demo table with cfg.Comments old comments and
// measures, with the same segments and page size: a raw parallel Scan of the
// table (no handler, no writes: the ceiling of any sweep), apply's sweep (one
// conditional UpdateItem per comment, the index existing, so each write
// also writes the index), apply again (everything converted: a pass that
// only reads) and verify (strongly consistent, with its index check).
func RunReshape(ctx context.Context, api ReshapeAPI, cfg ReshapeConfig, progress io.Writer) (ReshapeResult, error) {
	var res ReshapeResult
	perWS := 4 * 50
	ws := max(1, (cfg.Comments+perWS-1)/perWS)
	fmt.Fprintf(progress, "bench reshape: creating %s with %d comments\n", cfg.Table, ws*perWS)
	demo, err := reshape.Demo(ctx, api, cfg.Table, reshape.DemoOptions{Workspaces: ws, DocsPerWS: 4, CommentsPerDoc: 50, TableWaitPeriod: 100 * time.Millisecond})
	if !cfg.Keep {
		defer func() {
			api.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(cfg.Table)})
		}()
	}
	if err != nil {
		return res, err
	}
	res.Items, res.Comments = demo.Items, demo.Comments
	spec, err := reshape.DemoSpec(cfg.Table)
	if err != nil {
		return res, err
	}
	r, err := reshape.New(ctx, api, spec)
	if err != nil {
		return res, err
	}
	start := time.Now()
	if _, err := r.EnsureIndex(ctx, reshape.IndexOptions{PollInterval: 100 * time.Millisecond}); err != nil {
		return res, err
	}
	res.IndexWait = time.Since(start)

	fmt.Fprintln(progress, "bench reshape: raw scan")
	// A first scan warms the server up (DynamoDB Local's JIT and page
	// cache); the second is the one compared against.
	if _, err := rawScan(ctx, api, cfg); err != nil {
		return res, err
	}
	raw, err := rawScan(ctx, api, cfg)
	if err != nil {
		return res, err
	}
	res.Passes = append(res.Passes, raw)
	for _, name := range []string{"apply (converts every comment)", "apply again (nothing to write)"} {
		fmt.Fprintf(progress, "bench reshape: %s\n", name)
		a, err := r.Apply(ctx, reshape.ApplyOptions{Segments: cfg.Segments, PageSize: cfg.PageSize})
		if err != nil {
			return res, err
		}
		s := a.Sweep
		res.Passes = append(res.Passes, ReshapePass{Name: name, Items: s.Scanned, Written: s.Counts["wrote"] + s.Counts["repaired"], Wall: s.Elapsed, WCU: s.WriteUnits, RCU: s.ReadUnits})
	}
	fmt.Fprintln(progress, "bench reshape: verify")
	start = time.Now()
	v, err := r.Verify(ctx, reshape.VerifyOptions{Segments: cfg.Segments, PageSize: cfg.PageSize})
	if err != nil {
		return res, err
	}
	if !v.Complete {
		return res, v.Err()
	}
	res.Passes = append(res.Passes, ReshapePass{Name: "verify (consistent, index check)", Items: v.Total.Scanned, Wall: time.Since(start), RCU: v.ReadUnits})
	return res, nil
}

// rawScan scans the table in parallel segments with nothing else.
func rawScan(ctx context.Context, api reshape.API, cfg ReshapeConfig) (ReshapePass, error) {
	p := ReshapePass{Name: fmt.Sprintf("raw Scan (%d segments)", max(cfg.Segments, 1))}
	segs := max(cfg.Segments, 1)
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
	)
	start := time.Now()
	for seg := range segs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last map[string]types.AttributeValue
			for {
				in := &dynamodb.ScanInput{TableName: aws.String(cfg.Table), Limit: aws.Int32(int32(cfg.PageSize)), ExclusiveStartKey: last,
					ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal}
				if segs > 1 {
					in.Segment, in.TotalSegments = aws.Int32(int32(seg)), aws.Int32(int32(segs))
				}
				out, err := api.Scan(ctx, in)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				p.Items += int64(out.ScannedCount)
				if out.ConsumedCapacity != nil {
					p.RCU += aws.ToFloat64(out.ConsumedCapacity.CapacityUnits)
				}
				mu.Unlock()
				if len(out.LastEvaluatedKey) == 0 {
					return
				}
				last = out.LastEvaluatedKey
			}
		}()
	}
	wg.Wait()
	p.Wall = time.Since(start)
	return p, firstErr
}

// PrintReshape prints the passes, each against the raw scan.
func PrintReshape(w io.Writer, r ReshapeResult) error {
	fmt.Fprintf(w, "table: %d items, %d old comments; index added and ACTIVE in %s\n", r.Items, r.Comments, r.IndexWait.Round(time.Millisecond))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pass\titems\twritten\tseconds\titems/s\tvs raw scan\tWCU\tWCU/written item\tRCU\t")
	var raw float64
	for i, p := range r.Passes {
		if i == 0 {
			raw = p.ItemsPerSecond()
		}
		perItem := "-"
		if p.Written > 0 {
			perItem = strconv.FormatFloat(p.WCU/float64(p.Written), 'f', 2, 64)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.0f\t%.2f\t%.1f\t%s\t%.1f\t\n", p.Name, p.Items, p.Written, p.Wall.Seconds(), p.ItemsPerSecond(), p.ItemsPerSecond()/max(raw, 1e-9), p.WCU, perItem, p.RCU)
	}
	return tw.Flush()
}
