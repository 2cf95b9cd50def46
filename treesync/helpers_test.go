package treesync_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/treesync"
)

// backends are the datastores every behaviour runs on.
var backends = []struct {
	name string
	open func(t *testing.T) *datastore.Store
}{
	{"bolt", boltStore},
	{"dynamodb", dynamoStore},
	{"s3", s3Store},
}

// s3Store opens a new datastore (a new one's layout) under a prefix of
// the test's bucket of the S3 server.
func s3Store(t *testing.T) *datastore.Store {
	s, _ := newS3Store(t, "tree")
	return s
}

func boltStore(t *testing.T) *datastore.Store {
	d, err := boltfs.Open(filepath.Join(t.TempDir(), "lake.db"), &boltfs.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	return s
}

func dynamoStore(t *testing.T) *datastore.Store {
	api := ddb.NewClient(ddblocal.Config(t), "")
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	d, err := dynamofs.Open(t.Context(), api, dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	return s
}

// fastLock keeps tests short: a short lease with a skew bound, so that a
// dead holder is taken over quickly.
var fastLock = &lock.Options{Lease: time.Second, ClockSkew: 50 * time.Millisecond, Wait: 30 * time.Second}

func newTree(t *testing.T, s *datastore.Store, o *treesync.Options) *treesync.Tree {
	t.Helper()
	if o == nil {
		o = &treesync.Options{}
	}
	if o.Lock == nil {
		o.Lock = fastLock
	}
	tr, err := treesync.Open(t.TempDir(), s, o)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func write(t *testing.T, tr *treesync.Tree, p, content string) {
	t.Helper()
	name := filepath.Join(tr.Dir(), filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, tr *treesync.Tree, p string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tr.Dir(), filepath.FromSlash(p)))
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func wantFile(t *testing.T, tr *treesync.Tree, p, want string) {
	t.Helper()
	if got, ok := read(t, tr, p); !ok || got != want {
		t.Fatalf("%s in %s = %q (present %v), want %q", p, tr.Dir(), got, ok, want)
	}
}

func wantRemote(t *testing.T, s *datastore.Store, p, want string) {
	t.Helper()
	_, got, err := s.Get(t.Context(), p)
	if want == "" {
		if !errors.Is(err, metastore.ErrNotFound) {
			t.Fatalf("remote %s = %q, %v; want deleted", p, got, err)
		}
		return
	}
	if err != nil || string(got) != want {
		t.Fatalf("remote %s = %q, %v; want %q", p, got, err, want)
	}
}

func sync(t *testing.T, tr *treesync.Tree, scope treesync.Scope) treesync.Report {
	t.Helper()
	rep, err := tr.Sync(t.Context(), scope)
	if err != nil {
		t.Fatalf("Sync(%v) of %s: %v", scope.Models, tr.Dir(), err)
	}
	return rep
}

// eachBackend runs fn as a subtest on every backend.
func eachBackend(t *testing.T, fn func(t *testing.T, s *datastore.Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b.open(t)) })
	}
}
