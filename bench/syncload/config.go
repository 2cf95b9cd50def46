package syncload

import (
	"fmt"
	"strings"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// Pull is how each sync learns what changed remotely.
type Pull string

// The pulls.
const (
	// PullFeed is treesync's pull: only the changed partitions, each from
	// its own position (the seed's fix).
	PullFeed Pull = "feed"
	// PullFull adds, to every pull, the seed's queryAllFileMeta: the whole
	// listing of everything the datastore holds, read page by page and
	// filtered client-side on the change time (the seed's one-partition
	// feed, whose cost grows with everything that ever existed).
	PullFull Pull = "full"
	// PullFullFilter is PullFull with the seed's quick patch: the filter on
	// the change time moves into the query (a DynamoDB FilterExpression),
	// which still reads every item. It needs a FullIndex (DynamoDB).
	PullFullFilter Pull = "full-filter"
)

// LockScope is what one sync lock covers.
type LockScope string

// The lock scopes.
const (
	// LockGlobal: one lock for the whole datastore (namespace "bench"):
	// every worker queues behind it.
	LockGlobal LockScope = "global"
	// LockNamespace: one namespace, hence one lock, per worker ("bench-wN").
	LockNamespace LockScope = "namespace"
)

// Commit is what a sync's commit writes.
type Commit string

// The commits.
const (
	// CommitChanged is treesync's commit: only the entries the sync changed.
	CommitChanged Commit = "changed"
	// CommitFull also rewrites, fenced by the sync's lock, every entry of
	// the namespace's index (one record per live path of the namespace,
	// read whole and written back on each commit): the seed's coordinator.
	CommitFull Commit = "full"
)

// Models is the workload's model lifetime.
type Models string

// The model lifetimes.
const (
	// ModelsDisposable: each iteration creates model wW-iI, runs its
	// method, deletes it (the seed's loop).
	ModelsDisposable Models = "disposable"
	// ModelsLongLived: one model per worker; each iteration adds a new
	// version directory of its files, so the model's data accumulates.
	ModelsLongLived Models = "long-lived"
)

// Mode is the shape of an iteration.
type Mode string

// The modes.
const (
	// ModeLoop is the seed's loop: create (or, long-lived, write) the model
	// and sync, delete the model and sync.
	ModeLoop Mode = "loop"
	// ModeWriteStress: one long-lived model per worker, every iteration
	// rewrites its files (the same paths, new versions) and syncs.
	ModeWriteStress Mode = "write-stress"
)

// Config is one run of the harness. The zero value is not usable; start
// from DefaultConfig.
type Config struct {
	// Name labels the run's series in the report.
	Name string
	// Workers run concurrently, each with its own directory and Tree.
	Workers int
	// Iterations per worker; zero means until Duration runs out.
	Iterations int
	// Duration bounds the run; zero means Iterations bound it.
	Duration time.Duration
	// Interval is the width of one row of the time series.
	Interval time.Duration
	// Files and FileSize shape what a method run writes (plus the model's
	// definition).
	Files    int
	FileSize int
	Mode     Mode
	Pull     Pull
	Lock     LockScope
	Commit   Commit
	Models   Models
	// ModelType is the type of the workers' models, of one segment or
	// more ("" is "bench"; the seed's own is "@webframp/system"): a model
	// is data/TYPE/wW-iI/…, one partition each on a datastore of the
	// models layout.
	ModelType string `json:",omitempty"`
	// Catalog runs on every sync, under its lock (see catalog.go).
	Catalog CatalogMode
	// Lifecycle runs after every iteration's delete (see lifecycle.go).
	Lifecycle LifecycleMode
	// Lease and Wait configure the sync lock (a wait that runs out counts
	// as a lock timeout and an error).
	Lease, Wait time.Duration
}

// DefaultConfig has the CLI's defaults.
func DefaultConfig() Config {
	return Config{Name: "run", Workers: 4, Iterations: 0, Duration: time.Minute, Interval: 5 * time.Second,
		Files: 5, FileSize: 1024, Mode: ModeLoop, Pull: PullFeed, Lock: LockNamespace, Commit: CommitChanged,
		Models: ModelsDisposable, Catalog: CatalogExport, Lifecycle: LifecycleOff, Lease: 30 * time.Second, Wait: 60 * time.Second}
}

// MaxFileSize bounds --file-size: the files are written whole, in memory.
const MaxFileSize = 64 << 20

// Validate refuses a configuration the harness cannot run, with an error
// matching metastore.ErrInvalidArgument.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", metastore.ErrInvalidArgument, fmt.Sprintf(format, a...))
	}
	switch {
	case c.Workers < 1 || c.Workers > 1000:
		return bad("workers %d: want 1 to 1000", c.Workers)
	case c.Iterations < 0:
		return bad("negative iterations")
	case c.Duration < 0:
		return bad("negative duration")
	case c.Iterations == 0 && c.Duration == 0:
		return bad("give iterations or a duration")
	case c.Interval <= 0:
		return bad("interval must be positive")
	case c.Files < 0 || c.Files > 1000:
		return bad("files %d: want 0 to 1000", c.Files)
	case c.FileSize < 0 || c.FileSize > MaxFileSize:
		return bad("file size %d: want 0 to %d bytes", c.FileSize, MaxFileSize)
	case c.Lease <= 0 || c.Wait <= 0:
		return bad("lease and wait must be positive")
	}
	if err := oneOf("mode", string(c.Mode), ModeLoop, ModeWriteStress); err != nil {
		return err
	}
	if err := oneOf("pull", string(c.Pull), PullFeed, PullFull, PullFullFilter); err != nil {
		return err
	}
	if err := oneOf("lock", string(c.Lock), LockGlobal, LockNamespace); err != nil {
		return err
	}
	if err := oneOf("commit", string(c.Commit), CommitChanged, CommitFull); err != nil {
		return err
	}
	if err := oneOf("models", string(c.Models), ModelsDisposable, ModelsLongLived); err != nil {
		return err
	}
	if c.ModelType != "" {
		if err := datastore.ValidatePath(c.ModelType); err != nil || strings.HasSuffix("/"+c.ModelType, "/"+datastore.DefinitionFile) {
			return bad("model type %q: want segments of a valid path, such as bench or @webframp/system", c.ModelType)
		}
	}
	if _, err := newCatalogStep(c.Catalog); err != nil {
		return err
	}
	if _, err := newLifecycleStep(c.Lifecycle); err != nil {
		return err
	}
	return nil
}

func oneOf[T ~string](what, v string, allowed ...T) error {
	for _, a := range allowed {
		if string(a) == v {
			return nil
		}
	}
	return fmt.Errorf("%w: %s %q: want one of %v", metastore.ErrInvalidArgument, what, v, allowed)
}

// Namespace is worker w's sync namespace: its lock (and, with issue 19,
// its index).
func (c Config) Namespace(w int) string {
	if c.Lock == LockGlobal {
		return "bench"
	}
	return fmt.Sprintf("bench-w%d", w)
}

// Summary is the configuration on one line, for the report.
func (c Config) Summary() string {
	return fmt.Sprintf("mode=%s pull=%s lock=%s commit=%s models=%s catalog=%s lifecycle=%s workers=%d files=%d file-size=%d",
		c.Mode, c.Pull, c.Lock, c.Commit, c.Models, c.Catalog, c.Lifecycle, c.Workers, c.Files, c.FileSize)
}

// Seed004 returns the seed's five configurations, in its order: every
// bottleneck on, then each fix added (feed pull, a lock per namespace, a
// commit of the changed entries only, the catalog read incrementally with
// a lifecycle that prunes deleted models' data). base gives workers,
// files, sizes, lock timings and interval; each gets duration d.
func Seed004(base Config, d time.Duration) []Config {
	c := base
	c.Duration, c.Iterations = d, 0
	c.Mode, c.Models = ModeLoop, ModelsDisposable
	c.Pull, c.Lock, c.Commit, c.Catalog, c.Lifecycle = PullFull, LockGlobal, CommitFull, CatalogExport, LifecycleOff
	c.Name = "1 all bottlenecks"
	out := []Config{c}
	c.Pull, c.Name = PullFeed, "2 +feed pull"
	out = append(out, c)
	c.Lock, c.Name = LockNamespace, "3 +lock per namespace"
	out = append(out, c)
	c.Commit, c.Name = CommitChanged, "4 +commit changed only"
	out = append(out, c)
	c.Catalog, c.Lifecycle, c.Name = CatalogIncremental, Seed004Lifecycle, "5 +catalog incremental, lifecycle"
	out = append(out, c)
	return out
}

// LockFloor returns the seed's diagnostic of the lock: one global lock at
// base.Workers and at twice as many, each for d. If both settle at the
// same rate, the lock, not the database, is the ceiling.
func LockFloor(base Config, d time.Duration) []Config {
	c := base
	c.Duration, c.Iterations, c.Lock = d, 0, LockGlobal
	c.Name = fmt.Sprintf("global lock, %d workers", c.Workers)
	out := []Config{c}
	c.Workers *= 2
	c.Name = fmt.Sprintf("global lock, %d workers", c.Workers)
	return append(out, c)
}

// modelType is the type of the workers' models.
func (c Config) modelType() string {
	if c.ModelType == "" {
		return "bench"
	}
	return c.ModelType
}
