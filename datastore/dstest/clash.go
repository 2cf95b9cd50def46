package dstest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// testFileOrDirectory: a path is a file or a directory, never both. Every
// driver refuses, in its commit's atomic write, a file below a live file or
// a file where live files are below, naming both paths (issue 27).
func testFileOrDirectory(t *testing.T, s *datastore.Store) {
	if c, ok := s.Driver().(interface{ ChecksClashes() bool }); !ok || !c.ChecksClashes() {
		t.Skipf("the %s driver does not check file/directory clashes in its commit", s.Driver().Name())
	}
	t.Run("FileBelowAFile", func(t *testing.T) {
		for _, pair := range [][2]string{
			{"data/t/i/x", "data/t/i/x/y"}, // one partition
			{"data/s/i", "data/s/i/f"},     // the model's own path a file: two partitions
			{"data/q", "data/q/i/f"},
			{"top", "top/a/b"},
		} {
			put(t, s, pair[0], "file")
			wantClash(t, "put below a file", tryPut(t, s, pair[1]), pair[1], pair[0])
			wantNotFound(t, s, pair[1])
			wantContent(t, s, pair[0], "file")
		}
	})
	t.Run("FileOverFiles", func(t *testing.T) {
		for _, pair := range [][2]string{
			{"data/u/i/d/f", "data/u/i/d"},
			{"data/u/j/f", "data/u/j"},
			{"data/v/i/f", "data/v"},
			{"other/a/b", "other"},
		} {
			put(t, s, pair[0], "below")
			wantClash(t, "put over files", tryPut(t, s, pair[1]), pair[1], pair[0])
			wantNotFound(t, s, pair[1])
		}
	})
	t.Run("TwoInOneCommit", func(t *testing.T) {
		a := upload(t, s, "data/w/i/a")
		b := upload(t, s, "data/w/i/a/b")
		c := upload(t, s, "data/w/i/c")
		_, err := s.Commit(t.Context(), nil, []datastore.Entry{{Put: &c}, {Put: &a}, {Put: &b}})
		wantClash(t, "one commit", err, "data/w/i/a/b", "data/w/i/a")
		wantNotFound(t, s, "data/w/i/a")
		wantNotFound(t, s, "data/w/i/c") // the commit is atomic
	})
	t.Run("ADeleteFreesTheName", func(t *testing.T) {
		put(t, s, "data/x/i/f", "f")
		if _, err := s.Delete(t.Context(), "data/x/i/f"); err != nil {
			t.Fatal(err)
		}
		put(t, s, "data/x/i/f/g", "g") // a tombstone is no file
		put(t, s, "data/x/i/h/k", "k")
		hs := upload(t, s, "data/x/i/h")
		if _, err := s.Commit(t.Context(), nil, []datastore.Entry{{Delete: "data/x/i/h/k"}, {Put: &hs}}); err != nil {
			t.Fatalf("delete data/x/i/h/k and put data/x/i/h in one commit: %v", err)
		}
		wantContent(t, s, "data/x/i/h", "data/x/i/h")
	})
	t.Run("Racing", func(t *testing.T) {
		// Writers race a file against a file below it, in one partition
		// (even rounds) or, on a driver whose commit can condition on
		// another partition (CrossPartitionClashes), a model's directory
		// against its first file (odd rounds): never both live.
		cross := false
		if c, ok := s.Driver().(interface{ CrossPartitionClashes() bool }); ok {
			cross = c.CrossPartitionClashes()
		}
		const rounds = 8
		var wg sync.WaitGroup
		errs := make([]error, 2*rounds)
		for i := range rounds {
			pair := []string{fmt.Sprintf("data/r/%d/f", i), fmt.Sprintf("data/r/%d/f/g", i)}
			if i%2 == 1 && cross {
				pair = []string{fmt.Sprintf("data/rx/%d", i), fmt.Sprintf("data/rx/%d/f", i)}
			}
			for j, p := range pair {
				wg.Go(func() {
					_, errs[2*i+j] = s.Put(t.Context(), p, strings.NewReader(p), nil)
				})
			}
		}
		wg.Wait()
		for i := range rounds {
			a, b := errs[2*i], errs[2*i+1]
			if (a == nil) == (b == nil) {
				t.Fatalf("round %d: %v and %v; want exactly one refused", i, a, b)
			}
			for _, err := range []error{a, b} {
				if err != nil && !errors.Is(err, metastore.ErrConflict) && !errors.Is(err, metastore.ErrUnavailable) {
					t.Fatalf("round %d: %v", i, err)
				}
			}
		}
	})
}

func upload(t *testing.T, s *datastore.Store, p string) datastore.Staged {
	t.Helper()
	st, err := s.Upload(t.Context(), p, strings.NewReader(p), nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func tryPut(t *testing.T, s *datastore.Store, p string) error {
	_, err := s.Put(t.Context(), p, strings.NewReader(p), nil)
	return err
}

// wantClash wants err to be the clash of path with other.
func wantClash(t *testing.T, what string, err error, path, other string) {
	t.Helper()
	c, ok := datastore.AsClash(err)
	if !ok || !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("%s: %v, want the clash of %s with %s", what, err, path, other)
	}
	if c.Path != path || c.Other != other {
		t.Fatalf("%s: clash of %s with %s, want %s with %s", what, c.Path, c.Other, path, other)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), other) {
		t.Fatalf("%s: %q does not name both paths", what, err)
	}
}
