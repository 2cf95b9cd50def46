package syncload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/treesync"
)

// worker runs the iterations of one worker: its own directory, Tree, meter
// and catalog and lifecycle steps.
type worker struct {
	id      int
	cfg     Config
	tree    *treesync.Tree
	store   *datastore.Store
	meter   *meter
	catalog CatalogStep
	life    LifecycleStep
	start   time.Time
	live    int
	payload []byte
	rows    int
	// prev is the long-lived model's previous version, for the lifecycle.
	prev []string
}

func newWorker(id int, cfg Config, env Env, root string, start time.Time) (*worker, error) {
	dir := filepath.Join(root, fmt.Sprintf("w%d", id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	ns := cfg.Namespace(id)
	m := newMeter(env.Driver, cfg, ns, env.FullIndex)
	m.layout = env.Layout
	s := datastore.New(aheadDriver(m)) // abilities.go
	s.SetLayout(env.Layout)            // the meter is no LayoutSetter: Driver has it already
	cat, err := newCatalogStep(cfg.Catalog)
	if err != nil {
		return nil, err
	}
	life, err := newLifecycleStep(cfg.Lifecycle)
	if err != nil {
		return nil, err
	}
	tr, err := treesync.Open(dir, s, &treesync.Options{Namespace: ns, Catalog: cat.TreeMode(), Lock: &lock.Options{Lease: cfg.Lease, Wait: cfg.Wait,
		Holder: fmt.Sprintf("bench-w%d-%d", id, os.Getpid())}})
	if err != nil {
		return nil, err
	}
	if err := life.Setup(context.Background(), s, ns); err != nil {
		return nil, err
	}
	return &worker{id: id, cfg: cfg, tree: tr, store: s, meter: m, catalog: cat, life: life, start: start,
		payload: make([]byte, cfg.FileSize)}, nil
}

// iterate runs iteration it and returns its sample; a failed step ends the
// iteration and is recorded in the sample, not returned.
func (w *worker) iterate(ctx context.Context, it int) Sample {
	s := Sample{Worker: w.id, Iteration: it, OK: true}
	w.meter.take()
	err := w.steps(ctx, it, &s)
	c := w.meter.take()
	s.Pull, s.Push, s.Commit = c.Time["pull"], c.Time["push"], c.Time["commit"]
	if w.cfg.Lifecycle == LifecycleOn {
		// The lifecycle's drops happen inside the delete's sync (with
		// --lifecycle prune the harness's own sync is timed whole).
		s.Prune += c.Time["prune"]
	}
	s.Requests, s.ItemsRead, s.ItemsWritten, s.IndexWritten = c.Requests, c.ItemsRead, c.ItemsWritten, c.IndexWritten
	s.Keys, s.StoreKeys, s.StoreRequests, s.StoreItemsRead = c.Keys, c.StoreKeys, c.StoreRequests, c.StoreItemsRead
	s.CatalogRows, s.LiveFiles = w.rows, w.live
	if err != nil {
		s.OK, s.Err = false, err.Error()
		s.LockTimeout = errors.Is(err, lock.ErrTimeout)
	}
	s.End = time.Since(w.start)
	return s
}

func (w *worker) steps(ctx context.Context, it int, s *Sample) error {
	model, files := w.modelFiles(it)
	def := catalog.DefinitionPath(model)
	write := func(dir string) error {
		if w.cfg.Mode == ModeLoop {
			if err := writeFile(dir, def, []byte("type: bench\nid: "+model+"\n")); err != nil {
				return err
			}
		}
		for i, p := range files {
			// Distinct content per file and iteration: a new version.
			head := fmt.Sprintf("%s %d %d\n", model, it, i)
			if err := writeFile(dir, p, append([]byte(head), w.payload...)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := w.sync(ctx, s, write); err != nil {
		return fmt.Errorf("%w (iteration %d, run)", err, it)
	}
	if w.cfg.Mode == ModeWriteStress {
		w.live = len(files)
		return nil
	}
	var left Leftover
	if w.cfg.Models == ModelsDisposable {
		w.live += len(files)
		// The model delete: its definition goes, its data stays.
		if err := w.sync(ctx, s, func(dir string) error {
			return os.Remove(filepath.Join(dir, filepath.FromSlash(def)))
		}); err != nil {
			return fmt.Errorf("%w (iteration %d, delete)", err, it)
		}
		left = Leftover{Model: model, Paths: files}
	} else {
		w.live += len(files)
		if it == 1 {
			w.live++ // the definition, written once
		}
		left = Leftover{Model: model, Paths: w.prev}
		w.prev = files
	}
	prune, err := w.life.Prune(ctx, left)
	if err != nil || len(prune) == 0 {
		return err
	}
	t := time.Now()
	w.meter.setPhase("prune")
	err = w.sync(ctx, s, func(dir string) error {
		for _, p := range prune {
			if err := os.Remove(filepath.Join(dir, filepath.FromSlash(p))); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		return tidy(dir, w.cfg.modelType())
	})
	w.meter.setPhase("")
	s.Prune += time.Since(t)
	if err != nil {
		return fmt.Errorf("%w (iteration %d, prune)", err, it)
	}
	w.live -= len(prune)
	return nil
}

// modelFiles names the iteration's model and the data files its method run
// writes (seed 004's layout: data/TYPE/ID/NAME/VERSION/raw).
func (w *worker) modelFiles(it int) (string, []string) {
	id, version := fmt.Sprintf("w%d-i%d", w.id, it), 1
	switch {
	case w.cfg.Mode == ModeWriteStress:
		id = fmt.Sprintf("w%d", w.id)
	case w.cfg.Models == ModelsLongLived:
		id, version = fmt.Sprintf("w%d", w.id), it
	}
	files := make([]string, w.cfg.Files)
	for i := range files {
		files[i] = fmt.Sprintf("data/%s/%s/out%d/%d/raw", w.cfg.modelType(), id, i, version)
	}
	return w.cfg.modelType() + "/" + id, files
}

// sync runs one Run: under the lock, the catalog step, then work in the
// tree's directory; it adds the lock wait, catalog and work times to s.
func (w *worker) sync(ctx context.Context, s *Sample, work func(dir string) error) error {
	s.Syncs++
	start := time.Now()
	rep, err := w.tree.Run(ctx, treesync.Scope{}, func(ctx context.Context, _ *lock.Lease) error {
		t := time.Now()
		prev := w.meter.setPhase("catalog")
		rows, err := w.catalog.Read(ctx, w.tree)
		w.meter.setPhase(prev)
		s.Catalog += time.Since(t)
		if err != nil {
			return err
		}
		w.rows = rows
		t = time.Now()
		err = work(w.tree.Dir())
		s.Work += time.Since(t)
		return err
	}, treesync.RunOptions{})
	s.Lock += rep.LockWait
	// What the namespace's lifecycle expired is no longer in its index.
	w.live -= rep.PrunedFiles
	if errors.Is(err, lock.ErrTimeout) {
		// The wait ran out: the time waited is all the lock's.
		s.Lock += time.Since(start)
	}
	return err
}

func writeFile(dir, p string, b []byte) error {
	name := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return fmt.Errorf("lake: %w", err)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		return fmt.Errorf("lake: %w", err)
	}
	return nil
}

// tidy removes the empty directories that pruned models leave under
// data/TYPE (a pull removes files, not directories), so that the local
// walk stays as small as what the datastore holds.
func tidy(dir, modelType string) error {
	root := filepath.Join(dir, "data", filepath.FromSlash(modelType))
	ents, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("lake: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() {
			removeEmpty(filepath.Join(root, e.Name()))
		}
	}
	return nil
}

// removeEmpty removes dir's empty subdirectories bottom-up, then dir if it
// became empty; a directory holding a file stays.
func removeEmpty(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	empty := true
	for _, e := range ents {
		if !e.IsDir() || !removeEmpty(filepath.Join(dir, e.Name())) {
			empty = false
		}
	}
	return empty && os.Remove(dir) == nil
}
