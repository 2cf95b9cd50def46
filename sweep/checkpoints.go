package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/lakemeta/lake/metastore"
)

// Checkpoints keeps a sweep's State durably. Implementations MUST make each
// call durable before it returns: a saved cursor is a promise that the pages
// before it are done.
type Checkpoints interface {
	// Load returns the recorded state, or nil when none is recorded.
	Load(ctx context.Context) (*State, error)
	// Init records a new sweep of segments segments, each at the start. It
	// fails if a sweep is already recorded (two sweeps raced to start).
	Init(ctx context.Context, segments int) error
	// Save records one segment's cursor.
	Save(ctx context.Context, segment int, c Cursor) error
}

// ErrRecorded is returned by Init when a sweep is already recorded.
var ErrRecorded = errors.New("lake: sweep: a sweep is already recorded here")

// StoreCheckpoints keeps a sweep's state in a lake store, under keys that
// start with prefix (which MUST end with "/"): prefix+"segments" holds the
// segment count and prefix+"seg/NNNN" each segment's cursor. Any lake store
// works, so a sweep's state can live in a bolt file beside its spec or in the
// same DynamoDB account as the table it sweeps.
type StoreCheckpoints struct {
	Store  *metastore.Store
	Prefix string
}

var _ Checkpoints = StoreCheckpoints{}

type header struct {
	Segments int `json:"segments"`
}

func (s StoreCheckpoints) headerKey() string     { return s.Prefix + "segments" }
func (s StoreCheckpoints) segKey(seg int) string { return fmt.Sprintf("%sseg/%04d", s.Prefix, seg) }
func (s StoreCheckpoints) segPrefix() string     { return s.Prefix + "seg/" }
func (s StoreCheckpoints) check() error {
	if !strings.HasSuffix(s.Prefix, "/") {
		return fmt.Errorf("lake: sweep: state prefix %q must end with /", s.Prefix)
	}
	return nil
}

// Load implements Checkpoints.
func (s StoreCheckpoints) Load(ctx context.Context) (*State, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	hb, err := s.Store.Get(ctx, s.headerKey())
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var h header
	if err := json.Unmarshal(hb, &h); err != nil || h.Segments < 1 || h.Segments > MaxSegments {
		return nil, fmt.Errorf("lake: sweep: damaged state at %s", s.headerKey())
	}
	st := &State{Segments: h.Segments, Cursors: make([]Cursor, h.Segments)}
	items, err := s.Store.ListAll(ctx, s.segPrefix())
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		var seg int
		if _, err := fmt.Sscanf(strings.TrimPrefix(it.Key, s.segPrefix()), "%d", &seg); err != nil || seg < 0 || seg >= h.Segments {
			return nil, fmt.Errorf("lake: sweep: damaged state: unexpected key %q", it.Key)
		}
		if err := json.Unmarshal(it.Value, &st.Cursors[seg]); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// Init implements Checkpoints.
func (s StoreCheckpoints) Init(ctx context.Context, segments int) error {
	if err := s.check(); err != nil {
		return err
	}
	b, _ := json.Marshal(header{Segments: segments})
	err := s.Store.CAS(ctx, s.headerKey(), metastore.ExpectAbsent(), b)
	if errors.Is(err, metastore.ErrConflict) {
		return ErrRecorded
	}
	return err
}

// Save implements Checkpoints.
func (s StoreCheckpoints) Save(ctx context.Context, segment int, c Cursor) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return s.Store.Put(ctx, s.segKey(segment), b)
}

// Reset forgets the recorded sweep, so that the next Run starts over.
func (s StoreCheckpoints) Reset(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	items, err := s.Store.ListAll(ctx, s.Prefix)
	if err != nil {
		return err
	}
	for _, it := range items {
		// A conflict means a sweep is still writing here: refuse.
		if err := s.Store.Delete(ctx, it.Key, it.Value); err != nil {
			return err
		}
	}
	return nil
}
