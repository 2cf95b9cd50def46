// Package bench measures what lake's layouts cost, as figures anyone can
// reproduce: backend requests, items evaluated (DynamoDB's ScannedCount),
// items returned and capacity units, next to wall time.
package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
)

// PrefixReadConfig shapes RunPrefixRead.
type PrefixReadConfig struct {
	// Table names the tables the benchmark creates: Table (v1) and
	// Table_prefix_v2 (v2). They must not exist; they are deleted at the
	// end unless Keep is set.
	Table string
	// Catalog is the number of catalog keys under tbl/.
	Catalog int
	// Retained lists the sizes R of retained records to measure at, in
	// increasing order; records are added between measurements.
	Retained []int
	// PageSize is the page size of the paged refresh.
	PageSize int
	// Keep keeps the tables.
	Keep bool
}

// Row is one measurement: one full tbl/ refresh of one layout at one R.
type Row struct {
	Layout     dynamostore.Layout
	Retained   int
	PageSize   int
	Requests   int64
	Evaluated  int64
	Returned   int64
	ReadUnits  float64
	Wall       time.Duration
	TableItems int
}

// Ratio is items evaluated per item returned.
func (r Row) Ratio() float64 {
	if r.Returned == 0 {
		return 0
	}
	return float64(r.Evaluated) / float64(r.Returned)
}

// retainedKey returns the i-th retained record: half append operations, a
// quarter manifests, the rest leases and tombstones.
func retainedKey(i, catalog int) string {
	t := i % max(catalog, 1)
	switch i % 8 {
	case 0, 1, 2, 3:
		return fmt.Sprintf("append-operation/t%05d/%09d", t, i)
	case 4, 5:
		return fmt.Sprintf("lance-manifest/t%05d/%09d", t, i)
	case 6:
		return fmt.Sprintf("lease/t%05d/%09d", t, i)
	default:
		return fmt.Sprintf("tombstone/t%05d/%09d", t, i)
	}
}

// RunPrefixRead loads v1 and v2 with the same data and measures a full tbl/
// refresh on each, at every R of cfg.Retained, in pages of
// metastore.DefaultPageSize and of cfg.PageSize. Progress goes to progress.
func RunPrefixRead(ctx context.Context, api ddb.API, cfg PrefixReadConfig, progress io.Writer) ([]Row, error) {
	if cfg.Catalog < 1 || cfg.PageSize < 1 || cfg.PageSize > metastore.MaxListLimit || len(cfg.Retained) == 0 {
		return nil, fmt.Errorf("%w: need catalog ≥ 1, 1 ≤ page size ≤ %d and at least one R", metastore.ErrInvalidArgument, metastore.MaxListLimit)
	}
	if !slices.IsSorted(cfg.Retained) || cfg.Retained[0] < 0 {
		return nil, fmt.Errorf("%w: retained sizes must be non-negative and increasing", metastore.ErrInvalidArgument)
	}
	var drivers []*dynamostore.Driver
	for _, layout := range []dynamostore.Layout{dynamostore.LayoutV1, dynamostore.LayoutV2} {
		opts := dynamostore.Options{Table: cfg.Table, Layout: layout}
		if err := dynamostore.Create(ctx, api, opts); err != nil {
			return nil, err
		}
		d, err := dynamostore.Open(ctx, api, opts)
		if err != nil {
			return nil, err
		}
		drivers = append(drivers, d)
	}
	if !cfg.Keep {
		defer func() {
			for _, name := range []string{cfg.Table, cfg.Table + dynamostore.V2Suffix} {
				api.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
			}
		}()
	}
	catalog := make([]metastore.Item, cfg.Catalog)
	for i := range catalog {
		catalog[i] = metastore.Item{Key: fmt.Sprintf("tbl/t%05d", i), Value: []byte(`{"schema":"…","location":"s3://lake/t"}`)}
	}
	for _, d := range drivers {
		if err := d.Load(ctx, catalog); err != nil {
			return nil, err
		}
	}
	var rows []Row
	loaded := 0
	for _, r := range cfg.Retained {
		batch := make([]metastore.Item, 0, r-loaded)
		for i := loaded; i < r; i++ {
			batch = append(batch, metastore.Item{Key: retainedKey(i, cfg.Catalog), Value: []byte("retained record")})
		}
		for _, d := range drivers {
			fmt.Fprintf(progress, "loading %d retained records into %s (%s)…\n", len(batch), d.Table(), d.Layout())
			start := time.Now()
			if err := d.Load(ctx, batch); err != nil {
				return nil, err
			}
			fmt.Fprintf(progress, "  %.1fs\n", time.Since(start).Seconds())
		}
		loaded = r
		for _, d := range drivers {
			for _, page := range []int{metastore.DefaultPageSize, cfg.PageSize} {
				row, err := refresh(ctx, d, page)
				if err != nil {
					return nil, err
				}
				if row.Returned != int64(cfg.Catalog) {
					return nil, fmt.Errorf("lake: %s refresh returned %d catalog keys, want %d", d.Layout(), row.Returned, cfg.Catalog)
				}
				row.Retained, row.TableItems = r, cfg.Catalog+r
				rows = append(rows, row)
			}
		}
	}
	return rows, nil
}

// refresh drains tbl/ in pages of page and returns its cost.
func refresh(ctx context.Context, d *dynamostore.Driver, page int) (Row, error) {
	s := metastore.New(d)
	before := d.Stats()
	start := time.Now()
	cur := ""
	for {
		p, err := s.List(ctx, "tbl/", page, cur)
		if err != nil {
			return Row{}, err
		}
		if cur = p.Cursor; cur == "" {
			break
		}
	}
	wall := time.Since(start)
	c := d.Stats().Sub(before)
	return Row{Layout: d.Layout(), PageSize: page, Requests: c.TotalRequests(), Evaluated: c.ItemsEvaluated,
		Returned: c.ItemsReturned, ReadUnits: c.ReadCapacity, Wall: wall}, nil
}

// PrintRows writes rows as an aligned table.
func PrintRows(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "layout\tR\tpage\trequests\tevaluated\treturned\tevaluated/returned\tread units\twall ms\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.1f\t%.1f\t\n", r.Layout, r.Retained, r.PageSize, r.Requests,
			r.Evaluated, r.Returned, r.Ratio(), r.ReadUnits, float64(r.Wall.Microseconds())/1000)
	}
	return tw.Flush()
}
