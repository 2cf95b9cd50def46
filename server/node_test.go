package server

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/metastore"
	"github.com/prometheus/client_golang/prometheus"
)

func TestNodeID(t *testing.T) {
	file := NodeIDFile(filepath.Join(t.TempDir(), "lake.db"))
	id, err := LoadOrCreateNodeID(file)
	if err != nil || !strings.HasPrefix(id, "node-") || ValidateNodeID(id) != nil {
		t.Fatalf("created %q, %v", id, err)
	}
	again, err := LoadOrCreateNodeID(file)
	if err != nil || again != id {
		t.Fatalf("reloaded %q, %v; want %q", again, err, id)
	}
	os.WriteFile(file, []byte("bad id\n"), 0o600)
	if _, err := LoadOrCreateNodeID(file); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Fatalf("a corrupt id file: %v", err)
	}
	if _, err := LoadOrCreateNodeID(filepath.Join(t.TempDir(), "no", "dir", "lake.db.node-id")); err == nil {
		t.Fatal("an id file in a missing directory was accepted")
	}

	a, b := DeriveNodeID("host_1.example", "127.0.0.1:7070"), DeriveNodeID("host_1.example", "127.0.0.1:7071")
	if a == b || a != DeriveNodeID("host_1.example", "127.0.0.1:7070") || ValidateNodeID(a) != nil || !strings.HasPrefix(a, "host-1.example-") {
		t.Fatalf("derived ids %q, %q", a, b)
	}
	if id := DeriveNodeID("", ":7070"); ValidateNodeID(id) != nil {
		t.Fatalf("derived id without host name: %q", id)
	}
	for _, bad := range []string{"", "a b", "ü", strings.Repeat("a", 129), "a/b"} {
		if ValidateNodeID(bad) == nil {
			t.Errorf("ValidateNodeID(%q) accepted", bad)
		}
	}
}

func TestRegistryShared(t *testing.T) {
	n := newNode(t, nil)
	reg := prometheus.NewRegistry()
	if _, err := New(n.store, &Options{Registry: reg, Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(n.store, &Options{Registry: reg, Logger: quietLogger()}); err == nil {
		t.Fatal("two servers registered their metrics in one registry")
	}
}
