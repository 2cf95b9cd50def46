package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
)

// DataFeedConfig shapes RunDataFeed.
type DataFeedConfig struct {
	// Table names the tables: Table_files (the datastore) and
	// Table_gsifeed (the seed's design and its quick patch). Both must not
	// exist; they are deleted at the end unless Keep.
	Table string
	// History lists the sizes H of history to measure at, increasing;
	// changes are added between measurements.
	History []int
	// Models is the number of models M the history is spread across.
	Models int
	// Changes is the number of fresh changes each pull finds.
	Changes int
	// Workers fill the history concurrently.
	Workers int
	// Keep keeps the tables.
	Keep bool
}

// FeedRow is one measured pull.
type FeedRow struct {
	History   int
	Design    string // "lake", "seed-gsi", "seed-gsi+filter"
	Pull      string // "one model", "all models", "nothing changed"
	Requests  int64
	ItemsRead int64 // ScannedCount for queries, items for point and batch reads
	Changes   int   // changes the pull found
	ReadUnits float64
	Wall      time.Duration
}

// RunDataFeed fills a datastore and the seed's baseline table with the same
// history and, at each H, measures a pull of the last cfg.Changes changes of
// one model and of all models on each design.
func RunDataFeed(ctx context.Context, api ddb.API, cfg DataFeedConfig, progress io.Writer) ([]FeedRow, error) {
	if len(cfg.History) == 0 || !slices.IsSorted(cfg.History) || cfg.History[0] < 0 || cfg.Models < 1 || cfg.Changes < 1 || cfg.Workers < 1 {
		return nil, fmt.Errorf("%w: need increasing history sizes, models ≥ 1, changes ≥ 1, workers ≥ 1", metastore.ErrInvalidArgument)
	}
	filesTable, gsiTable := cfg.Table+dynamofs.TableSuffix, cfg.Table+GSIFeedSuffix
	if err := dynamofs.Create(ctx, api, filesTable); err != nil {
		return nil, err
	}
	if !cfg.Keep {
		defer api.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(filesTable)})
	}
	if err := createGSIFeed(ctx, api, gsiTable); err != nil {
		return nil, err
	}
	if !cfg.Keep {
		defer api.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(gsiTable)})
	}
	d, err := dynamofs.Open(ctx, api, dynamofs.Options{Table: filesTable})
	if err != nil {
		return nil, err
	}
	s := datastore.New(d)
	seed := &gsiFeed{api: api, table: gsiTable}
	var rows []FeedRow
	filled := 0
	for _, h := range cfg.History {
		fmt.Fprintf(progress, "filling history %d → %d across %d models…\n", filled, h, cfg.Models)
		start := time.Now()
		if err := fill(ctx, s, seed, filled, h, cfg, progress); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "  %.1fs\n", time.Since(start).Seconds())
		filled = h
		got, err := measure(ctx, s, d, seed, h, cfg)
		if err != nil {
			return nil, err
		}
		rows = append(rows, got...)
	}
	return rows, nil
}

// historyPath is the i-th change of the history: a fresh file of model
// i mod models, so that the history holds h files.
func historyPath(i, models int) string {
	return fmt.Sprintf("data/bench/m%04d/res/%08d/raw", i%models, i)
}

// fill writes changes [from, to) to both designs, the datastore in commits
// of its MaxCommit files of one model.
func fill(ctx context.Context, s *datastore.Store, seed *gsiFeed, from, to int, cfg DataFeedConfig, progress io.Writer) error {
	byModel := make([][]string, cfg.Models)
	var all []string
	for i := from; i < to; i++ {
		p := historyPath(i, cfg.Models)
		byModel[i%cfg.Models] = append(byModel[i%cfg.Models], p)
		all = append(all, p)
	}
	if err := seed.load(ctx, all, time.Now().Add(-time.Hour)); err != nil {
		return err
	}
	work := make(chan []string)
	errs := make(chan error, cfg.Workers)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range work {
				if err := commitEmpty(ctx, s, batch); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				before := done
				done += len(batch)
				if done/10000 != before/10000 {
					fmt.Fprintf(progress, "  %d/%d\n", done, to-from)
				}
				mu.Unlock()
			}
		}()
	}
	max := s.Driver().MaxCommit()
feed:
	for _, paths := range byModel {
		for start := 0; start < len(paths); start += max {
			select {
			case work <- paths[start:min(start+max, len(paths))]:
			case err := <-errs:
				close(work)
				wg.Wait()
				return err
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := ctx.Err(); err != nil {
		return err
	}
	return <-errs
}

// commitEmpty commits empty files at paths in one commit.
func commitEmpty(ctx context.Context, s *datastore.Store, paths []string) error {
	entries := make([]datastore.Entry, len(paths))
	for i, p := range paths {
		st, err := s.Upload(ctx, p, strings.NewReader(""), nil)
		if err != nil {
			return err
		}
		entries[i] = datastore.Entry{Put: &st}
	}
	_, err := s.Commit(ctx, nil, entries)
	return err
}

// measure writes cfg.Changes fresh changes (to one model, then spread over
// models) into both designs and times each design's pull of them.
func measure(ctx context.Context, s *datastore.Store, d *dynamofs.Driver, seed *gsiFeed, h int, cfg DataFeedConfig) ([]FeedRow, error) {
	var rows []FeedRow
	lakeRow := func(pull string, fn func() (int, error)) error {
		before := d.Stats()
		start := time.Now()
		n, err := fn()
		if err != nil {
			return err
		}
		c := d.Stats().Sub(before)
		rows = append(rows, FeedRow{History: h, Design: "lake", Pull: pull, Requests: c.TotalRequests(), ItemsRead: c.ItemsRead,
			Changes: n, ReadUnits: c.ReadUnits, Wall: time.Since(start)})
		return nil
	}
	seedRows := func(pull, prefix string, watermark time.Time) error {
		for _, filtered := range []bool{false, true} {
			row, err := seed.pull(ctx, prefix, watermark, filtered)
			if err != nil {
				return err
			}
			row.History, row.Pull = h, pull
			rows = append(rows, row)
		}
		return nil
	}
	// One model: the puller is at model 0's head, 10 changes land there.
	model := "bench/m0000"
	head, err := s.Head(ctx, model)
	if err != nil {
		return nil, err
	}
	watermark := time.Now()
	fresh := make([]string, cfg.Changes)
	for i := range fresh {
		fresh[i] = fmt.Sprintf("data/%s/fresh/h%d-%04d/raw", model, h, i)
	}
	if err := commitEmpty(ctx, s, fresh); err != nil {
		return nil, err
	}
	if err := seed.load(ctx, fresh, time.Now()); err != nil {
		return nil, err
	}
	err = lakeRow("one model", func() (int, error) {
		ch, _, err := s.Changes(ctx, model, head.Seq, datastore.MaxListLimit)
		return len(ch), err
	})
	if err != nil {
		return nil, err
	}
	if err := seedRows("one model", "data/"+model+"/", watermark); err != nil {
		return nil, err
	}
	// All models: the puller holds an unscoped cursor and every partition's
	// position; the changes land in cfg.Changes different models.
	_, cursor, err := s.ChangedPartitions(ctx, "")
	if err != nil {
		return nil, err
	}
	pos := map[string]uint64{}
	parts, err := s.Partitions(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		hd, err := s.Head(ctx, p)
		if err != nil {
			return nil, err
		}
		pos[p] = hd.Seq
	}
	unscoped := func() (int, error) {
		heads, next, err := s.ChangedPartitions(ctx, cursor)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, hd := range heads {
			ch, upTo, err := s.Changes(ctx, hd.Partition, pos[hd.Partition], datastore.MaxListLimit)
			if err != nil {
				return 0, err
			}
			n += len(ch)
			pos[hd.Partition] = upTo
		}
		cursor = next
		return n, nil
	}
	if err := lakeRow("nothing changed", unscoped); err != nil {
		return nil, err
	}
	watermark = time.Now()
	for i := range cfg.Changes {
		p := fmt.Sprintf("data/bench/m%04d/fresh/all-h%d/raw", i%cfg.Models, h)
		if err := commitEmpty(ctx, s, []string{p}); err != nil {
			return nil, err
		}
		if err := seed.load(ctx, []string{p}, time.Now()); err != nil {
			return nil, err
		}
	}
	if err := lakeRow("all models", unscoped); err != nil {
		return nil, err
	}
	if err := seedRows("all models", "", watermark); err != nil {
		return nil, err
	}
	return rows, nil
}

// PrintFeedRows writes rows as an aligned table.
func PrintFeedRows(w io.Writer, rows []FeedRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "H\tdesign\tpull\trequests\titems read\tchanges\tread units\twall ms\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%.1f\t%.1f\t\n", r.History, r.Design, r.Pull, r.Requests, r.ItemsRead,
			r.Changes, r.ReadUnits, float64(r.Wall.Microseconds())/1000)
	}
	return tw.Flush()
}
