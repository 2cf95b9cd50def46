package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/remotestore"
	"github.com/lakemeta/lake/server"
)

// NodeConfig shapes RunNode.
type NodeConfig struct {
	// Ops is the number of operations of one run, shared by its clients.
	Ops int
	// Clients lists the concurrency levels to measure.
	Clients []int
	// Keys is the number of keys the operations touch.
	Keys int
	// WriteRatio is the fraction of operations that are writes (CAS
	// increments); the rest are Gets.
	WriteRatio float64
}

// StoreHasUserKeys reports whether store holds any user key: the
// benchmark's caller refuses such a store unless told otherwise, since the
// benchmark writes (and then deletes) keys of its own in it.
func StoreHasUserKeys(ctx context.Context, store *metastore.Store) (bool, error) {
	cur := ""
	// A page may be empty while its cursor is not (a v1 scan whose items
	// all failed the filter); a few pages are enough to find a key in any
	// store that is not nearly empty, and a drain of a big table is not.
	for range 100 {
		page, err := store.List(ctx, "", 100, cur)
		if err != nil {
			return false, err
		}
		if len(page.Items) > 0 {
			return true, nil
		}
		if page.Cursor == "" {
			return false, nil
		}
		cur = page.Cursor
	}
	return true, nil
}

// NodeRow is one run: a backend, straight or through a node, at one
// concurrency.
type NodeRow struct {
	Backend   string
	Path      string // "direct" or "node"
	Clients   int
	Ops       int
	Errors    int
	Wall      time.Duration
	P50, P99  time.Duration
	Conflicts int
}

// OpsPerSecond is the run's throughput.
func (r NodeRow) OpsPerSecond() float64 { return float64(r.Ops) / max(r.Wall.Seconds(), 1e-9) }

// RunNode measures the same operations straight on store and through a
// node serving it (an HTTP server on a loopback port and the remote store),
// at each concurrency of cfg.Clients.
func RunNode(ctx context.Context, name string, store *metastore.Store, cfg NodeConfig) ([]NodeRow, error) {
	if cfg.Ops < 1 || cfg.Keys < 1 || len(cfg.Clients) == 0 || cfg.WriteRatio < 0 || cfg.WriteRatio > 1 {
		return nil, fmt.Errorf("%w: need ops ≥ 1, keys ≥ 1, clients, 0 ≤ write ratio ≤ 1", metastore.ErrInvalidArgument)
	}
	// The benchmark's keys are created, never overwritten (a key of the
	// same name that exists is someone's data), and deleted at the end.
	var created []string
	defer func() {
		cctx := context.WithoutCancel(ctx)
		for _, k := range created {
			if v, err := store.Get(cctx, k); err == nil {
				store.Delete(cctx, k, v)
			}
		}
	}()
	for i := range cfg.Keys {
		err := store.CAS(ctx, benchKey(i), metastore.ExpectAbsent(), []byte("0"))
		if errors.Is(err, metastore.ErrConflict) {
			return nil, fmt.Errorf("%w: key %s exists; the benchmark creates and deletes its own keys, so run it on a scratch store", metastore.ErrRefused, benchKey(i))
		}
		if err != nil {
			return nil, err
		}
		created = append(created, benchKey(i))
	}
	srv, err := server.New(store, &server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	url, hs, err := server.ServeLoopback(srv)
	if err != nil {
		return nil, err
	}
	defer hs.Close()
	rd, err := remotestore.New(url, nil)
	if err != nil {
		return nil, err
	}
	remote := metastore.New(rd)
	defer remote.Close()
	var rows []NodeRow
	for _, clients := range cfg.Clients {
		for _, path := range []struct {
			name string
			s    *metastore.Store
		}{{"direct", store}, {"node", remote}} {
			row := runMix(ctx, path.s, cfg, clients)
			row.Backend, row.Path = name, path.name
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func benchKey(i int) string { return fmt.Sprintf("tbl/bench%05d", i) }

// runMix runs cfg.Ops operations split over clients goroutines.
func runMix(ctx context.Context, s *metastore.Store, cfg NodeConfig, clients int) NodeRow {
	var mu sync.Mutex
	var lat []time.Duration
	row := NodeRow{Clients: clients, Ops: cfg.Ops}
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		n := cfg.Ops / clients
		if c < cfg.Ops%clients {
			n++
		}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			local := make([]time.Duration, 0, n)
			errs, conflicts := 0, 0
			for range n {
				k := benchKey(rng.IntN(cfg.Keys))
				t0 := time.Now()
				cur, err := s.Get(ctx, k)
				if err == nil && rng.Float64() < cfg.WriteRatio {
					err = s.CAS(ctx, k, metastore.ExpectValue(cur), append(cur, '+'))
				}
				local = append(local, time.Since(t0))
				switch {
				case err == nil:
				case isConflict(err):
					conflicts++
				default:
					errs++
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			row.Errors += errs
			row.Conflicts += conflicts
			mu.Unlock()
		})
	}
	wg.Wait()
	row.Wall = time.Since(start)
	slices.Sort(lat)
	if len(lat) > 0 {
		row.P50, row.P99 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return row
}

// PrintNodeRows writes rows as a table, with the node's throughput as a
// fraction of the direct path's.
func PrintNodeRows(w io.Writer, rows []NodeRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tpath\tclients\tops\tops/s\tp50\tp99\tnode/direct\terrors\t")
	direct := map[string]float64{}
	for _, r := range rows {
		ratio := ""
		key := fmt.Sprintf("%s/%d", r.Backend, r.Clients)
		if r.Path == "direct" {
			direct[key] = r.OpsPerSecond()
		} else if d := direct[key]; d > 0 {
			ratio = fmt.Sprintf("%.2f", r.OpsPerSecond()/d)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%v\t%v\t%s\t%d\t\n", r.Backend, r.Path, r.Clients, r.Ops, r.OpsPerSecond(),
			r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), ratio, r.Errors)
	}
	return tw.Flush()
}

func isConflict(err error) bool { return errors.Is(err, metastore.ErrConflict) }
