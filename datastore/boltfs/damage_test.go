package boltfs_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/internal/boltfile/bolttest"
)

// TestRepeatedChildEndsTheReads: a branch page that names the same child
// twice is no cycle (Open accepts the file) but walks keys a cursor has
// passed; a listing or a feed that pages on from its last key could go
// back forever. Every branch page of a datastore's file repeats its first
// child here: the paths listing and the change feed each end with
// ErrDamaged instead of returning duplicates or never ending.
func TestRepeatedChildEndsTheReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lake.db")
	d, err := boltfs.Open(path, &boltfs.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	ctx := t.Context()
	var entries []datastore.Entry
	for i := range 600 {
		p := fmt.Sprintf("data/m/1/file-%04d-%s", i, strings.Repeat("x", 60))
		st, err := s.Upload(ctx, p, strings.NewReader(p), nil)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, datastore.Entry{Put: &st})
	}
	if _, err := s.Commit(ctx, nil, entries); err != nil {
		t.Fatal(err)
	}
	s.Close()
	branches := bolttest.Pages(t, path, "branch")
	if len(branches) == 0 {
		t.Fatal("the fixture has no branch page")
	}
	for _, id := range branches {
		bolttest.RepeatChild(t, path, id)
	}

	for name, read := range map[string]func(context.Context, *datastore.Store) error{
		"list": func(ctx context.Context, s *datastore.Store) error {
			_, err := s.ListAll(ctx, "data/")
			return err
		},
		"feed": func(ctx context.Context, s *datastore.Store) error {
			var after uint64
			for {
				page, next, err := s.Changes(ctx, "m/1", after, 50)
				if err != nil || len(page) == 0 {
					return err
				}
				after = next
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := boltfs.Open(path, &boltfs.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			s := datastore.New(d)
			defer s.Close()
			done := make(chan error, 1)
			go func() { done <- read(t.Context(), s) }()
			select {
			case err := <-done:
				if !errors.Is(err, boltfile.ErrDamaged) {
					t.Fatalf("%s over a tree that repeats a child: %v, want ErrDamaged", name, err)
				}
			case <-time.After(time.Minute):
				t.Fatalf("%s over a tree that repeats a child did not end within a minute", name)
			}
		})
	}
}
