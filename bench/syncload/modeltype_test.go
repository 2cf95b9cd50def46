package syncload_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/bench/syncload"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/metastore"
)

// The seed's own model type, @webframp/system, gives each worker's model a
// partition of its own (issue 30), where the type/id rule filed every model
// of the type in one partition "@webframp/system".
func TestSeedModelTypeOnePartitionPerModel(t *testing.T) {
	d, err := boltfs.Open(filepath.Join(t.TempDir(), "b.db"), &boltfs.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := datastore.Open(t.Context(), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := syncload.DefaultConfig()
	cfg.Workers, cfg.Iterations, cfg.Duration, cfg.Files, cfg.FileSize = 2, 2, 0, 2, 16
	cfg.Catalog, cfg.Lock, cfg.ModelType = syncload.CatalogNone, syncload.LockGlobal, "@webframp/system"
	samples, err := syncload.Run(t.Context(), cfg, syncload.Env{Driver: d, Layout: s.Layout()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sm := range samples {
		if !sm.OK {
			t.Fatalf("worker %d iteration %d: %s", sm.Worker, sm.Iteration, sm.Err)
		}
	}
	ns, err := s.Namespace(cfg.Namespace(0))
	if err != nil {
		t.Fatal(err)
	}
	parts, err := ns.Partitions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	models := 0
	for _, p := range parts {
		if strings.HasPrefix(p, "@webframp/system/w") {
			models++
		}
		if p == "@webframp/system" {
			t.Fatalf("partitions %v: the models share one", parts)
		}
	}
	if models != cfg.Workers*cfg.Iterations {
		t.Fatalf("partitions %v: want one per model, %d", parts, cfg.Workers*cfg.Iterations)
	}
	bad := syncload.DefaultConfig()
	bad.ModelType = "a//b"
	if err := bad.Validate(); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Fatalf("model type a//b: %v", err)
	}
}
