package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/treesync"
)

// SyncLoopOptions shape SyncLoop.
type SyncLoopOptions struct {
	// Iterations of the seed's loop (default 1000).
	Iterations int
	// Files each iteration's method run writes into its fresh model
	// (default 5, plus the model's definition: the seed's six).
	Files int
	// Report lists the iterations printed (default 1, 10, 100, 350, 1000).
	Report []int
	// Cost, when set, returns the backend's request and item counters so
	// far (DynamoDB), printed per sync.
	Cost func() (requests, itemsRead int64)
}

// SyncLoop runs seed 004's loop with two workers taking turns on one
// datastore, each in its own directory and the same namespace: iteration i
// of worker w creates the disposable model w-i (its definition and Files
// data files), runs `lake data run`'s sequence (lock, pull, work, push,
// commit, release), then deletes the model's definition and syncs. Each
// worker's pull therefore reads the other's changes. For the reported
// iterations it prints, per sync, the files the sync changed, the index
// entries it committed, the feed entries its pull read and the files the
// namespace holds (what a sync that rewrote the index would commit).
func SyncLoop(ctx context.Context, w io.Writer, s *datastore.Store, o SyncLoopOptions) error {
	if o.Iterations <= 0 {
		o.Iterations = 1000
	}
	if o.Files <= 0 {
		o.Files = 5
	}
	if o.Report == nil {
		o.Report = []int{1, 10, 100, 350, 1000}
	}
	report := map[int]bool{}
	for _, r := range o.Report {
		report[r] = true
	}
	root, err := os.MkdirTemp("", "lake-syncloop-")
	if err != nil {
		return fmt.Errorf("lake: %w", err)
	}
	defer os.RemoveAll(root)
	var trees [2]*treesync.Tree
	for i := range trees {
		dir := filepath.Join(root, fmt.Sprintf("worker%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("lake: %w", err)
		}
		if trees[i], err = treesync.Open(dir, s, &treesync.Options{Namespace: "syncloop", Lock: &lock.Options{Lease: 10 * time.Second}}); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "%9s %6s %8s %12s %10s %10s %12s %11s", "iteration", "worker", "step", "files changed", "committed", "pull read", "downloaded", "live files")
	if o.Cost != nil {
		fmt.Fprintf(w, " %9s %10s", "requests", "items read")
	}
	fmt.Fprintln(w)
	live := 0
	var total struct{ changed, committed, read, syncs int }
	start := time.Now()
	for it := 1; it <= o.Iterations; it++ {
		for wi, tr := range trees {
			model := fmt.Sprintf("w%d-i%d", wi, it)
			var r0, i0 int64
			if o.Cost != nil {
				r0, i0 = o.Cost()
			}
			rep, err := tr.Run(ctx, treesync.Scope{}, func(ctx context.Context, ls *lock.Lease) error {
				files := map[string]string{fmt.Sprintf("definitions/%s.yaml", model): "type: bench\n"}
				for f := range o.Files {
					files[fmt.Sprintf("data/bench/%s/out%d/1/raw", model, f)] = fmt.Sprintf("%s %d token %s\n", model, f, ls.Token())
				}
				for p, c := range files {
					name := filepath.Join(tr.Dir(), filepath.FromSlash(p))
					if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
						return err
					}
					if err := os.WriteFile(name, []byte(c), 0o644); err != nil {
						return err
					}
				}
				return nil
			}, treesync.RunOptions{})
			if err != nil {
				return fmt.Errorf("iteration %d, worker %d, run: %w", it, wi, err)
			}
			live += o.Files + 1
			print := func(step string, changed int, rep treesync.Report) {
				total.changed += changed
				total.committed += rep.Committed
				total.read += rep.Changes
				total.syncs++
				if !report[it] {
					return
				}
				fmt.Fprintf(w, "%9d %6d %8s %12d %10d %10d %12d %11d", it, wi, step, changed, rep.Committed, rep.Changes, rep.Downloaded, live)
				if o.Cost != nil {
					r1, i1 := o.Cost()
					fmt.Fprintf(w, " %9d %10d", r1-r0, i1-i0)
					r0, i0 = r1, i1
				}
				fmt.Fprintln(w)
			}
			print("run", o.Files+1, rep)
			// model delete: the definition goes, the data stays (issue 19's
			// lifecycle prunes it).
			if err := os.Remove(filepath.Join(tr.Dir(), "definitions", model+".yaml")); err != nil {
				return fmt.Errorf("lake: %w", err)
			}
			if err := tr.MarkDirty("definitions/" + model + ".yaml"); err != nil {
				return err
			}
			rep, err = tr.Sync(ctx, treesync.Scope{})
			if err != nil {
				return fmt.Errorf("iteration %d, worker %d, delete: %w", it, wi, err)
			}
			live--
			print("delete", 1, rep)
		}
	}
	fmt.Fprintf(w, "\n%d syncs in %s: files changed %d, index entries committed %d, feed entries read %d; %d live files at the end\n",
		total.syncs, time.Since(start).Round(time.Millisecond), total.changed, total.committed, total.read, live)
	return nil
}
