package datastore

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// countingLayoutDriver counts the record reads of a layoutDriver.
type countingLayoutDriver struct {
	*layoutDriver
	gets int
}

func (d *countingLayoutDriver) GetRecord(ctx context.Context, k string) ([]byte, error) {
	d.gets++
	return d.layoutDriver.GetRecord(ctx, k)
}

// A remembered layout (issue 31): Open sends no request, the Store's layout
// is unverified until VerifyLayout reads the record once, and a record that
// names another layout or none (a datastore recreated under the same URL)
// is ErrStaleLayout, never trusted.
func TestRememberedLayout(t *testing.T) {
	ctx := context.Background()
	models, typeID := LayoutModels, LayoutTypeID
	for _, c := range []struct {
		name       string
		recs       map[string][]byte
		remembered *Layout
		wantStale  bool
	}{
		{"same", map[string][]byte{LayoutKey: []byte("models")}, &models, false},
		{"recreated with another", map[string][]byte{LayoutKey: []byte("type-id")}, &models, true},
		{"recreated with another, the other way", map[string][]byte{LayoutKey: []byte("models")}, &typeID, true},
		{"recreated, none recorded yet", map[string][]byte{}, &models, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &countingLayoutDriver{layoutDriver: &layoutDriver{recs: c.recs, set: 99}}
			s, err := Open(ctx, d, &OpenOptions{Remembered: c.remembered})
			if err != nil {
				t.Fatal(err)
			}
			if d.gets != 0 || s.Layout() != *c.remembered || d.set != *c.remembered || s.LayoutVerified() {
				t.Fatalf("Open with a remembered layout: %d reads, layout %v (driver %v), verified %v", d.gets, s.Layout(), d.set, s.LayoutVerified())
			}
			ns, err := s.Namespace("w1")
			if err != nil {
				t.Fatal(err)
			}
			err = ns.VerifyLayout(ctx) // a namespace verifies its root's
			if c.wantStale {
				if !errors.Is(err, ErrStaleLayout) || s.LayoutVerified() {
					t.Fatalf("VerifyLayout: %v (verified %v), want ErrStaleLayout", err, s.LayoutVerified())
				}
				return
			}
			if err != nil || !s.LayoutVerified() || !s.root.layoutRecorded.Load() {
				t.Fatalf("VerifyLayout: %v, verified %v", err, s.LayoutVerified())
			}
			if err := s.VerifyLayout(ctx); err != nil || d.gets != 1 {
				t.Fatalf("a second VerifyLayout: %v, %d reads in all, want 1", err, d.gets)
			}
		})
	}
	// A Store opened the usual way is verified: VerifyLayout sends nothing.
	d := &countingLayoutDriver{layoutDriver: &layoutDriver{recs: map[string][]byte{LayoutKey: []byte("models")}}}
	s, err := Open(ctx, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyLayout(ctx); err != nil || d.gets != 1 || !s.LayoutVerified() {
		t.Fatalf("VerifyLayout after Open: %v, %d reads, want the one of Open", err, d.gets)
	}
}

// TestNamespaceEntryProvesLayout (issue 31): a namespace's entry written by
// a Store that knows its datastore's layout names it, and a process that
// remembers the same layout and reads the entry (a sync reads it for its
// lifecycle policy) takes that read as the record's: no read of the layout
// record. An entry without a layout (written before) or naming another
// proves nothing, and a datastore recreated with another layout is still
// refused as stale.
func TestNamespaceEntryProvesLayout(t *testing.T) {
	ctx := context.Background()
	models := LayoutModels
	// A namespace's entry as a Store that read the record writes it.
	recs := map[string][]byte{LayoutKey: []byte("models")}
	w, err := Open(ctx, &layoutDriver{recs: recs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := w.Namespace("w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ns.SetLifecycle(ctx, Lifecycle{Enabled: true}); err != nil {
		t.Fatal(err)
	}
	written := string(recs[nsRegistryPrefix+"w1"])
	if !strings.Contains(written, `"layout":"models"`) {
		t.Fatalf("the entry written by a Store that read the record: %s, want its layout", written)
	}
	// A Store with a remembered layout, never verified, names none.
	r, err := Open(ctx, &layoutDriver{recs: map[string][]byte{LayoutKey: []byte("models")}}, &OpenOptions{Remembered: &models})
	if err != nil {
		t.Fatal(err)
	}
	if r.provenLayout() != "" {
		t.Fatalf("an unverified Store proves %q", r.provenLayout())
	}

	for _, c := range []struct {
		name         string
		entry        string // "" for none
		record       string // "" for none
		wantVerified bool   // by the entry's read alone
		wantStale    bool   // VerifyLayout's answer after it
	}{
		{"entry names the remembered layout", written, "models", true, false},
		{"entry written before issue 31", `{"created":"2026-11-01T00:00:00Z","lifecycle":{"enabled":true}}`, "models", false, false},
		{"entry names another layout", `{"created":"2026-11-01T00:00:00Z","lifecycle":{"enabled":true},"layout":"type-id"}`, "type-id", false, true},
		{"recreated with another layout, no entry yet", "", "type-id", false, true},
		{"recreated with another layout, its entry names it", `{"created":"2026-11-01T00:00:00Z","lifecycle":{},"layout":"type-id"}`, "type-id", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs := map[string][]byte{}
			if c.record != "" {
				recs[LayoutKey] = []byte(c.record)
			}
			if c.entry != "" {
				recs[nsRegistryPrefix+"w1"] = []byte(c.entry)
			}
			d := &countingLayoutDriver{layoutDriver: &layoutDriver{recs: recs}}
			s, err := Open(ctx, d, &OpenOptions{Remembered: &models})
			if err != nil {
				t.Fatal(err)
			}
			ns, err := s.Namespace("w1")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ns.Config(ctx); err != nil {
				t.Fatal(err)
			}
			if s.LayoutVerified() != c.wantVerified || d.gets != 1 {
				t.Fatalf("after the entry's read: verified %v (want %v), %d reads (want 1)", s.LayoutVerified(), c.wantVerified, d.gets)
			}
			err = s.VerifyLayout(ctx)
			switch {
			case c.wantStale && !errors.Is(err, ErrStaleLayout):
				t.Fatalf("VerifyLayout: %v, want ErrStaleLayout", err)
			case !c.wantStale && err != nil:
				t.Fatalf("VerifyLayout: %v", err)
			}
			wantGets := 2
			if c.wantVerified {
				wantGets = 1 // proved by the entry: the record is not read
			}
			if d.gets != wantGets {
				t.Fatalf("%d reads in all, want %d", d.gets, wantGets)
			}
		})
	}
}
