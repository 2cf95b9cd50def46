package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/metastore/storetest"
)

// brokenCAS is a driver whose CAS ignores its precondition: the bug every
// conformance suite must catch.
type brokenCAS struct{ *boltstore.Driver }

func (b brokenCAS) CAS(ctx context.Context, key string, _ metastore.Expect, value []byte) error {
	return b.Driver.Put(ctx, key, value)
}

const brokenEnv = "LAKE_STORETEST_RUN_BROKEN"

// TestSuiteCatchesBrokenCAS runs the suite against a broken CAS in a child
// process and requires it to fail there, naming the CAS behaviours.
func TestSuiteCatchesBrokenCAS(t *testing.T) {
	if os.Getenv(brokenEnv) == "1" {
		storetest.RunConformanceTests(t, func(t *testing.T) *metastore.Store {
			d, err := boltstore.Open(filepath.Join(t.TempDir(), "lake.db"), &boltstore.Options{Create: true})
			if err != nil {
				t.Fatal(err)
			}
			s := metastore.New(brokenCAS{d})
			t.Cleanup(func() { s.Close() })
			return s
		})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteCatchesBrokenCAS$", "-test.v")
	cmd.Env = append(os.Environ(), brokenEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the conformance suite passed a store whose CAS ignores its precondition:\n%s", out)
	}
	for _, want := range []string{"--- FAIL: TestSuiteCatchesBrokenCAS/CAS", "--- FAIL: TestSuiteCatchesBrokenCAS/ConcurrentCreateIfAbsent"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("suite output lacks %q:\n%s", want, out)
		}
	}
}
