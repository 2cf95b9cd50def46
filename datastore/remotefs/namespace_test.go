package remotefs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/remotefs"
	"github.com/lakemeta/lake/metastore"
)

// TestNamespaceNames: a name that is no namespace is refused by the driver
// before any request; an internal scope other than the catalog's reaches
// the node, which refuses it clearly; the catalog's scope is a tree of its
// own.
func TestNamespaceNames(t *testing.T) {
	ctx := t.Context()
	d, err := remotefs.Open(ctx, node(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	defer s.Close()
	for _, bad := range []string{"a/b", "-x", "_", strings.Repeat("n", 65), "a b", "_a/b"} {
		if _, err := d.Namespace(bad); !errors.Is(err, metastore.ErrInvalidArgument) {
			t.Errorf("Namespace(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	other, err := d.Namespace("_other")
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Partitions(ctx)
	if !errors.Is(err, metastore.ErrInvalidArgument) || !strings.Contains(err.Error(), `"_other"`) || !strings.Contains(err.Error(), datastore.CatalogScope) {
		t.Fatalf("Partitions in _other = %v, want the node's invalid argument naming _other and %s", err, datastore.CatalogScope)
	}
	if _, err := other.GetChunk(ctx, "ab", 0); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Fatalf("GetChunk in _other = %v, want ErrInvalidArgument", err)
	}
	// Records are the root's in every namespace, _other's included: they
	// carry no namespace.
	if err := other.CASRecord(ctx, "rec/x/y", metastore.ExpectAbsent(), []byte("v")); err != nil {
		t.Fatalf("a record write through _other: %v", err)
	}
	if v, err := s.Records().GetRecord(ctx, "rec/x/y"); err != nil || string(v) != "v" {
		t.Fatalf("the root reads %q, %v", v, err)
	}
	cat, err := s.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Put(ctx, "data/m/1/f", strings.NewReader("catalog"), nil); err != nil {
		t.Fatalf("a put in the catalog's scope: %v", err)
	}
	if _, b, err := cat.Get(ctx, "data/m/1/f"); err != nil || string(b) != "catalog" {
		t.Fatalf("the catalog's scope reads %q, %v", b, err)
	}
	if _, err := s.Stat(ctx, "data/m/1/f"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("the root sees the catalog's file: %v", err)
	}
	if p, err := cat.Partitions(ctx); err != nil || strings.Join(p, ",") != "m/1" {
		t.Fatalf("the catalog's partitions = %v, %v", p, err)
	}
	// A namespace of a namespace is relative to the root.
	a, err := other.Namespace("alpha")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := a.Partitions(ctx); err != nil || len(p) != 0 {
		t.Fatalf("alpha, reached from _other, has partitions %v, %v", p, err)
	}
}
