package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/metastore/remotestore"
	"github.com/lakemeta/lake/nodeapi"
)

// NodeMemoryConfig shapes RunNodeMemory.
type NodeMemoryConfig struct {
	// Binary is the lake executable run as the node (`lake serve`).
	Binary string
	// Dir is a scratch directory for the node's bolt file.
	Dir string
	// Values of ValueSize bytes are written under tbl/.
	Values, ValueSize int
	// Clients list the whole prefix at once, Rounds times each, in pages
	// of Limit, and fetch /v1/catalog once a round.
	Clients, Rounds, Limit int
	// Progress receives a line per phase; nil discards them.
	Progress io.Writer
}

// NodeMemoryResult is what RunNodeMemory measured.
type NodeMemoryResult struct {
	Config       NodeMemoryConfig
	IdleRSS      int64 // the node's resident set once ready and idle
	PeakRSS      int64 // its peak while the clients listed
	IdleAnon     int64 // of IdleRSS, anonymous memory (heap, stacks): not the bolt file's mapped pages
	PeakAnon     int64 // the sampled peak of anonymous memory
	Pages        int   // list pages the clients read
	Listed       int64 // key and value bytes the clients received
	CatalogCodes map[int]int
	Wall         time.Duration
}

// RunNodeMemory measures the resident memory of a node (a child process
// running cfg.Binary serve on a scratch bolt file) while cfg.Clients
// clients list cfg.Values values of cfg.ValueSize bytes at once. It reads
// the node's VmRSS and VmHWM from /proc (Linux), resetting the peak after
// the node is idle, and samples VmRSS meanwhile in case the reset is not
// permitted.
func RunNodeMemory(ctx context.Context, cfg NodeMemoryConfig) (NodeMemoryResult, error) {
	res := NodeMemoryResult{Config: cfg, CatalogCodes: map[int]int{}}
	if cfg.Values < 1 || cfg.ValueSize < 0 || cfg.ValueSize > metastore.MaxValueBytes || cfg.Clients < 1 || cfg.Rounds < 1 || cfg.Limit < 1 || cfg.Limit > metastore.MaxListLimit {
		return res, fmt.Errorf("%w: node-memory: need values ≥ 1, 0 ≤ value size ≤ %d, clients ≥ 1, rounds ≥ 1, 1 ≤ limit ≤ %d", metastore.ErrInvalidArgument, metastore.MaxValueBytes, metastore.MaxListLimit)
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		return res, fmt.Errorf("lake: node-memory reads /proc (Linux only): %w", err)
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	path := filepath.Join(cfg.Dir, "lake.db")
	fmt.Fprintf(progress, "writing %d values of %d bytes under tbl/ into %s\n", cfg.Values, cfg.ValueSize, path)
	if err := fillStore(ctx, path, cfg); err != nil {
		return res, err
	}
	addr, err := freeLoopback()
	if err != nil {
		return res, err
	}
	node := exec.CommandContext(ctx, cfg.Binary, "--store", "bolt://"+path, "serve", "--listen", addr, "--log-level", "error")
	node.Env = append(os.Environ(), "LAKE_TOKEN_FILE=")
	var nodeErr bytes.Buffer
	node.Stderr = &nodeErr
	if err := node.Start(); err != nil {
		return res, fmt.Errorf("lake: starting the node: %w", err)
	}
	defer func() {
		node.Process.Signal(syscall.SIGTERM)
		node.Wait()
	}()
	base := "http://" + addr
	if err := waitReady(ctx, base); err != nil {
		return res, fmt.Errorf("%w (node stderr: %s)", err, strings.TrimSpace(nodeErr.String()))
	}
	// Idle: ready, its first catalog refresh done, nothing asked of it.
	time.Sleep(2 * time.Second)
	pid := node.Process.Pid
	if res.IdleRSS, err = procStatus(pid, "VmRSS"); err != nil {
		return res, err
	}
	if res.IdleAnon, err = procStatus(pid, "RssAnon"); err != nil {
		return res, err
	}
	// Reset the peak to the current resident set (Linux 4.0+); if that is
	// not permitted, the sampled maximum below still bounds it from below.
	resetPeak := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
	fmt.Fprintf(progress, "node pid %d idle at %s; %d clients listing tbl/ %d times each\n", pid, mib(res.IdleRSS), cfg.Clients, cfg.Rounds)

	sampled, sampledAnon := res.IdleRSS, res.IdleAnon
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if v, err := procStatus(pid, "VmRSS"); err == nil && v > sampled {
					sampled = v
				}
				if v, err := procStatus(pid, "RssAnon"); err == nil && v > sampledAnon {
					sampledAnon = v
				}
			}
		}
	})
	start := time.Now()
	err = listConcurrently(ctx, base, cfg, &res)
	res.Wall = time.Since(start)
	close(stop)
	sampler.Wait()
	if err != nil {
		return res, err
	}
	res.PeakRSS, res.PeakAnon = sampled, sampledAnon
	if resetPeak {
		if hwm, err := procStatus(pid, "VmHWM"); err == nil && hwm > res.PeakRSS {
			res.PeakRSS = hwm
		}
	}
	return res, nil
}

func fillStore(ctx context.Context, path string, cfg NodeMemoryConfig) error {
	d, err := boltstore.Open(path, &boltstore.Options{Create: true})
	if err != nil {
		return err
	}
	s := metastore.New(d)
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	v := make([]byte, cfg.ValueSize)
	for i := range cfg.Values {
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		if err := s.Put(ctx, fmt.Sprintf("tbl/mem%05d", i), v); err != nil {
			return err
		}
	}
	return nil
}

func listConcurrently(ctx context.Context, base string, cfg NodeMemoryConfig, res *NodeMemoryResult) error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, cfg.Clients)
	for c := range cfg.Clients {
		wg.Go(func() {
			d, err := remotestore.New(base, nil)
			if err != nil {
				errs[c] = err
				return
			}
			s := metastore.New(d)
			defer s.Close()
			for range cfg.Rounds {
				pages, listed, err := drainBytes(ctx, s, cfg.Limit)
				if err != nil {
					errs[c] = err
					return
				}
				code := catalogStatus(ctx, base)
				mu.Lock()
				res.Pages += pages
				res.Listed += listed
				res.CatalogCodes[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// drainBytes lists tbl/ page by page, keeping nothing.
func drainBytes(ctx context.Context, s *metastore.Store, limit int) (pages int, listed int64, err error) {
	cur := ""
	for {
		page, err := s.List(ctx, "tbl/", limit, cur)
		if err != nil {
			return pages, listed, err
		}
		pages++
		for _, it := range page.Items {
			listed += int64(metastore.ItemBytes(it.Key, it.Value))
		}
		if page.Cursor == "" {
			return pages, listed, nil
		}
		cur = page.Cursor
	}
}

// catalogStatus fetches /v1/catalog, reading and discarding its body.
func catalogStatus(ctx context.Context, base string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+nodeapi.CatalogPath, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func waitReady(ctx context.Context, base string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + nodeapi.ReadyPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.New("lake: the node did not become ready within 30 s")
}

// procStatus returns a "kB" field of /proc/PID/status, in bytes.
func procStatus(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("lake: reading the node's memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("lake: /proc/%d/status %s: %q", pid, field, rest)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("lake: /proc/%d/status has no %s", pid, field)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// PrintNodeMemory writes the measurement.
func PrintNodeMemory(w io.Writer, r NodeMemoryResult) error {
	c := r.Config
	_, err := fmt.Fprintf(w, `values:            %d × %d bytes under tbl/ (%s)
clients:           %d at once, %d rounds each, pages of at most %d items
listed:            %d pages, %s of keys and values in %v
/v1/catalog:       %v (status: count)
node RSS idle:     %s
node RSS peak:     %s
peak above idle:   %s
of which anonymous (heap, stacks; the rest is the bolt file's mapped pages): idle %s, peak %s, above idle %s
`, c.Values, c.ValueSize, mib(int64(c.Values)*int64(c.ValueSize)), c.Clients, c.Rounds, c.Limit,
		r.Pages, mib(r.Listed), r.Wall.Round(time.Millisecond), r.CatalogCodes,
		mib(r.IdleRSS), mib(r.PeakRSS), mib(r.PeakRSS-r.IdleRSS), mib(r.IdleAnon), mib(r.PeakAnon), mib(r.PeakAnon-r.IdleAnon))
	return err
}
