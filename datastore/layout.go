package datastore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lakemeta/lake/internal/lakeerr"
	"github.com/lakemeta/lake/metastore"
)

// Layout is a datastore's partition rule: which model a path under data/
// belongs to. Every client of a datastore, every driver and the node MUST
// compute partitions with the same Layout, so a datastore records its own
// (the record LayoutKey) and Open reads it once, before anything else.
//
// NB: the names are stored; they must not change.
type Layout uint8

const (
	// LayoutModels is the layout of seed 004 with model types of one or
	// more segments (command/shell, @webframp/system): the model of a path
	// is found from its end. Under data/, with segs the segments after
	// data/ and n their number:
	//
	//   - a definition, segs ending in DefinitionFile with n >= 3, belongs
	//     to the model of all its segments but the last
	//     (data/command/shell/u1/model.yaml → command/shell/u1);
	//   - otherwise, with n >= 5, the path is a data file
	//     {model}/{data-name}/{version}/{file} and belongs to the model of
	//     all its segments but the last three
	//     (data/command/shell/u1/result/1/raw → command/shell/u1);
	//   - otherwise, with n = 3 or 4 (a path shorter than the layout), the
	//     model of its first two segments, as LayoutTypeID reads it
	//     (data/x/i/f → x/i);
	//   - otherwise (n < 3: data/README, data/x/y) the partition "data".
	//
	// A definition is always a definition: a data version holding a file
	// named model.yaml would name another, deeper model. A model is
	// therefore at least two segments, a type of one or more and an id.
	// It is the zero Layout: a datastore made since issue 30 uses it.
	LayoutModels Layout = iota
	// LayoutTypeID is the rule of datastores made before issue 30: the
	// model of data/T/I/… (n >= 3) is T/I, whatever follows. Open gives it
	// to a datastore that held data before it recorded a layout, so that
	// every path keeps the partition it was written in.
	LayoutTypeID
	// LayoutModelsV2 partitions exactly as LayoutModels; it is what a
	// driver that stores a new datastore in a newer format records
	// (FreshLayouter, issue 31: on S3 a commit's pending marks beside the
	// heads, so that one LIST reads both). A lake before it does not know
	// the name and refuses the datastore (ParseLayout: "upgrade lake"),
	// which is its purpose: an older writer would keep its marks where
	// the newer readers no longer look. Datastores recorded "models"
	// before keep that record, and their drivers the older format.
	LayoutModelsV2
	// LayoutModelsV3 partitions exactly as LayoutModels too; it is what S3
	// records for a new datastore since a partition's head holds its path
	// index while the index is small (issue 31: a commit of a model's new
	// files writes its head, not an index object a file). A lake that
	// knows only LayoutModelsV2 refuses it: it would look for index
	// objects that are not written.
	LayoutModelsV3
	// LayoutModelsV4 partitions exactly as LayoutModels too; it is what S3
	// records for a new datastore since the namespace registry's records
	// sit beside the catalog's heads (issue 31: a sync's listing of those
	// heads shows whether its namespace's record changed, so an unchanged
	// one is not read again). A lake that knows only LayoutModelsV3
	// refuses it: it would look for the registry where it is not written.
	LayoutModelsV4
	// LayoutModelsV5 partitions exactly as LayoutModels too; it is what S3
	// records for a new datastore since a commit of one log object is
	// visible once its head says so (issue 31: a commit sends no pending
	// mark and no mark's delete, and a reader does not read a log object
	// after the head's watermark that is not a staged part). A lake that
	// knows only LayoutModelsV4 refuses it: it would read such an object,
	// not yet committed, as a commit.
	LayoutModelsV5
)

// FreshLayouter is the optional ability of a driver whose new datastores
// record another layout than LayoutModels (a newer format of the same
// partition rule, LayoutModelsV2): Open records FreshLayout() for a
// datastore that holds no data and no record yet.
type FreshLayouter interface {
	FreshLayout() Layout
}

// DefinitionFile is the name of a model's definition, directly under the
// model: data/MODEL/model.yaml.
const DefinitionFile = "model.yaml"

// LayoutKey is the record (Store.Records) that holds a datastore's Layout
// by name ("models" or "type-id"), written once by the first Open that
// finds none, with a create-only compare-and-swap, and never changed.
const LayoutKey = "datastore/layout"

var layoutNames = [...]string{LayoutModels: "models", LayoutTypeID: "type-id", LayoutModelsV2: "models-v2", LayoutModelsV3: "models-v3", LayoutModelsV4: "models-v4", LayoutModelsV5: "models-v5"}

// String returns the layout's stored name.
func (l Layout) String() string {
	if int(l) < len(layoutNames) {
		return layoutNames[l]
	}
	return fmt.Sprintf("layout(%d)", uint8(l))
}

// ParseLayout returns the layout named name, or an error matching
// metastore.ErrInvalidArgument for a name this lake does not know (a
// datastore made by a newer lake).
func ParseLayout(name string) (Layout, error) {
	for l, n := range layoutNames {
		if n == name {
			return Layout(l), nil
		}
	}
	return 0, fmt.Errorf("%w: datastore layout %q is unknown to this lake (made by a newer one? upgrade lake); known: models, type-id, models-v2, models-v3, models-v4, models-v5", metastore.ErrInvalidArgument, name)
}

// Model returns the model a valid path belongs to under l ("command/shell/u1"
// for data/command/shell/u1/result/1/raw under LayoutModels), and false for
// a path that names no model (outside data/, or fewer than three segments
// below it).
func (l Layout) Model(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, ModelPrefix)
	if !ok {
		return "", false
	}
	n := strings.Count(rest, "/") + 1
	if n < 3 {
		return "", false
	}
	keep := 2 // segments of the model
	if l != LayoutTypeID {
		switch {
		case strings.HasSuffix(rest, "/"+DefinitionFile):
			keep = n - 1
		case n >= 5:
			keep = n - 3
		}
	}
	return firstSegments(rest, keep), true
}

// firstSegments returns the first k (>= 1) segments of s, which has more.
func firstSegments(s string, k int) string {
	i := 0
	for ; k > 0; k-- {
		j := strings.IndexByte(s[i:], '/')
		i += j + 1
	}
	return s[:i-1]
}

// Partition returns the partition of a valid path under l: its model
// (Model) if it names one, otherwise its first segment (definitions/x.yaml
// → definitions; data/README → data). Model partitions contain a '/' and
// the others do not, so the two never collide.
func (l Layout) Partition(p string) string {
	if m, ok := l.Model(p); ok {
		return m
	}
	first, _, _ := strings.Cut(p, "/")
	return first
}

// ClaimParts returns model x's ancestor partitions under l: those of the
// directories of any file x can hold (the ancestors of data/x/n/v/f),
// except x itself, where x's directory claims go (a drivers' claims.go);
// nil for a partition that is not a model.
func (l Layout) ClaimParts(x string) []string {
	if !strings.Contains(x, "/") {
		return nil
	}
	var out []string
	for _, a := range Ancestors(ModelPrefix + x + "/n/v/f") {
		if p := l.Partition(a); p != x && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// LayoutSetter is the optional ability of a driver that computes partitions
// itself: Open calls SetLayout with the datastore's layout before any other
// call, and the driver MUST compute every partition with it (and pass it to
// the drivers of its namespaces). A driver without it (a node's client)
// leaves partitions to the node.
type LayoutSetter interface {
	SetLayout(Layout)
}

// OpenOptions configure Open.
type OpenOptions struct {
	// ReadOnly records nothing: a datastore without a layout record is
	// read with the layout it would get, and the next writable Open
	// records it.
	ReadOnly bool
	// Remembered is a layout the caller read from this datastore before
	// (a tree's cache, treesync): Open then sends no request, and the
	// Store's layout is unverified until VerifyLayout reads the record
	// (layoutcache.go). The caller MUST call VerifyLayout before any call
	// that computes a partition from a path or writes; a commit checks
	// the record itself first either way.
	Remembered *Layout
}

// Open returns a Store over d with the datastore's layout: the one its
// record LayoutKey names, or, when there is none yet, LayoutTypeID if the
// datastore already holds data (a partition in the root, or a registered
// namespace: it was made before layouts were recorded) and LayoutModels if
// not; that choice is then recorded (create-only, so of two first opens the
// second reads the first's). It costs one record read per Open, and the
// first Open of a datastore a few more (Partitions, the namespace
// registry, one record write). opts may be nil.
func Open(ctx context.Context, d Driver, opts *OpenOptions) (*Store, error) {
	if opts == nil {
		opts = &OpenOptions{}
	}
	s := New(d)
	if opts.Remembered != nil {
		s.SetLayout(*opts.Remembered) // layoutRecorded stays false
		s.layoutUnverified.Store(true)
		return s, nil
	}
	l, err := s.resolveLayout(ctx, opts.ReadOnly)
	if err != nil {
		return nil, err
	}
	s.SetLayout(l)
	if !opts.ReadOnly {
		s.layoutRecorded.Store(true) // resolveLayout read or wrote it
	}
	return s, nil
}

// maxLayoutTries bounds resolveLayout's read-decide-create rounds: a create
// that loses a race is followed by a read that finds the winner's record.
const maxLayoutTries = 3

func (s *Store) resolveLayout(ctx context.Context, readOnly bool) (Layout, error) {
	recs := s.Records()
	var last error
	for range maxLayoutTries {
		v, err := recs.GetRecord(ctx, LayoutKey)
		if err == nil {
			return ParseLayout(string(v))
		}
		if !errors.Is(err, metastore.ErrNotFound) {
			// The first request of every command: a missing table or
			// bucket is reported here, "lake: " once.
			return 0, lakeerr.Wrap(err, "read the datastore's layout")
		}
		l, err := s.layoutOfUnrecorded(ctx)
		if err != nil {
			return 0, err
		}
		if readOnly {
			return l, nil
		}
		err = recs.CASRecord(ctx, LayoutKey, metastore.ExpectAbsent(), []byte(l.String()))
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, metastore.ErrConflict) {
			return 0, fmt.Errorf("record the datastore's layout (once, by a role that may write the record %s: run `lake data init`): %w", LayoutKey, err)
		}
		last = err // another Open recorded one first: read it
	}
	return 0, fmt.Errorf("lake: the datastore's layout record %s changed under %d reads: %w", LayoutKey, maxLayoutTries, last)
}

// layoutOfUnrecorded decides the layout of a datastore without a record.
func (s *Store) layoutOfUnrecorded(ctx context.Context) (Layout, error) {
	parts, err := s.d.Partitions(ctx)
	if err != nil {
		return 0, fmt.Errorf("decide the datastore's layout: %w", err)
	}
	if len(parts) > 0 {
		return LayoutTypeID, nil
	}
	nss, err := s.Records().ListRecords(ctx, nsRegistryPrefix)
	if err != nil {
		return 0, fmt.Errorf("decide the datastore's layout: %w", err)
	}
	if len(nss) > 0 {
		return LayoutTypeID, nil
	}
	if fl, ok := s.d.(FreshLayouter); ok {
		return fl.FreshLayout(), nil
	}
	return LayoutModels, nil
}

// SetLayout sets the layout of s's datastore (every namespace's) and of its
// driver (if it computes partitions, LayoutSetter). Open calls it; a test
// may, on a fresh Store, before any other call.
func (s *Store) SetLayout(l Layout) {
	s.root.layout = l
	s.root.layoutRecorded.Store(false) // the next commit checks the record
	if ls, ok := s.root.d.(LayoutSetter); ok {
		ls.SetLayout(l)
	}
}

// Layout returns the layout of s's datastore: LayoutModels unless Open (or
// SetLayout) found another.
func (s *Store) Layout() Layout { return s.root.layout }

// Partition returns the partition of a valid path in s's datastore
// (Layout.Partition with s's layout).
func (s *Store) Partition(p string) string { return s.root.layout.Partition(p) }

// checkLayoutWrite refuses, before any I/O, every write of the layout record
// but its creation with a known layout: the record is written once and never
// changed, since every client read it once and computes partitions with it
// for its lifetime (a node checks its clients' writes through the same
// Records). A writer with the backend's own credentials can still change
// it; lake cannot stop that.
func checkLayoutWrite(key string, create bool, value []byte) error {
	if key != LayoutKey {
		return nil
	}
	if !create {
		return fmt.Errorf("%w: the datastore's layout record %s is written once, when the datastore is first opened, and never changed or deleted", metastore.ErrInvalidArgument, LayoutKey)
	}
	_, err := ParseLayout(string(value))
	return err
}

// recordLayout makes sure, before s's first commit, that the datastore's
// record names the layout s computes partitions with: a Store made by Open
// knows it already (no request); one made by New (a test, a fresh table)
// records its layout if there is no record yet, with a create-only write,
// so that a later Open reads it rather than take the data for an older
// datastore's. A record naming another layout refuses the commit: writing
// under another rule would file paths where no other client looks.
func (s *Store) recordLayout(ctx context.Context) error {
	root := s.root
	if root.layoutRecorded.Load() {
		return nil
	}
	want := root.layout
	recs := root.Records()
	err := recs.CASRecord(ctx, LayoutKey, metastore.ExpectAbsent(), []byte(want.String()))
	if errors.Is(err, metastore.ErrConflict) {
		v, gerr := recs.GetRecord(ctx, LayoutKey)
		if gerr != nil {
			return fmt.Errorf("read the datastore's layout: %w", gerr)
		}
		got, perr := ParseLayout(string(v))
		if perr != nil {
			return perr
		}
		if got != want {
			return fmt.Errorf("%w: this Store computes partitions with the %s layout but the datastore records %s: open it with datastore.Open", metastore.ErrInvalidArgument, want, got)
		}
		err = nil
	}
	if err != nil {
		return fmt.Errorf("record the datastore's layout: %w", err)
	}
	root.layoutRecorded.Store(true)
	return nil
}
