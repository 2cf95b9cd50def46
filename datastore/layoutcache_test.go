package datastore

import (
	"context"
	"errors"
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
