package s3fs_test

import (
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dstest"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
)

// newDriver opens a datastore in a fresh bucket, under a prefix so that the
// prefix handling is exercised too.
func newDriver(t testing.TB) *s3fs.Driver {
	t.Helper()
	d, err := s3fs.Open(t.Context(), s3local.Client(t), s3fs.Options{Bucket: s3local.Bucket(t), Prefix: "lake/ds"})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// openStore opens the datastore under prefix of bucket through api (the
// server's client, or a test's wrapper of it), closed when t ends.
func openStore(t *testing.T, api s3fs.API, bucket, prefix string) (*s3fs.Driver, *datastore.Store) {
	t.Helper()
	d, err := s3fs.Open(t.Context(), api, s3fs.Options{Bucket: bucket, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	return d, s
}

// newStore is a datastore of the layout a new one records on S3
// (models-v5: a commit visible by its head, pending marks beside the heads
// for staged commits, the index in the heads, the namespace registry
// beside the namespaces' heads).
func newStore(t *testing.T) *datastore.Store {
	return newStoreOf(t, datastore.LayoutModelsV5)
}

// newStoreOf is a datastore that computes and records layout l.
func newStoreOf(t *testing.T, l datastore.Layout) *datastore.Store {
	s := datastore.New(newDriver(t))
	s.SetLayout(l)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	dstest.RunConformanceTests(t, newStore)
}

// TestConformanceModelsV4: the datastores made before a commit was visible
// by its head (a commit's create is the commit, with a pending mark).
func TestConformanceModelsV4(t *testing.T) {
	dstest.RunConformanceTests(t, func(t *testing.T) *datastore.Store { return newStoreOf(t, datastore.LayoutModelsV4) })
}

// TestConformanceModelsV2: the datastores made before the heads held their
// index (an index object a path, marks beside the heads) keep working.
func TestConformanceModelsV2(t *testing.T) {
	dstest.RunConformanceTests(t, func(t *testing.T) *datastore.Store { return newStoreOf(t, datastore.LayoutModelsV2) })
}
