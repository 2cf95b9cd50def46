package dstest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/datastore/dstest"
)

// lossyFeed is a driver whose pulls skip the last change of every page yet
// report the page's upTo: a puller's position moves past a change it never
// saw, the hole of a feed read from a lagging index.
type lossyFeed struct{ *boltfs.Driver }

func (l lossyFeed) Changes(ctx context.Context, partition string, after uint64, limit int) ([]datastore.Info, uint64, error) {
	ch, upTo, err := l.Driver.Changes(ctx, partition, after, limit)
	if len(ch) > 0 {
		ch = ch[:len(ch)-1]
	}
	return ch, upTo, err
}

const brokenEnv = "LAKE_DSTEST_RUN_BROKEN"

// TestSuiteCatchesALossyFeed runs the suite against a lossy feed in a child
// process and requires it to fail there, in the feed and concurrency tests.
func TestSuiteCatchesALossyFeed(t *testing.T) {
	if os.Getenv(brokenEnv) == "1" {
		dstest.RunConformanceTests(t, func(t *testing.T) *datastore.Store {
			d, err := boltfs.Open(filepath.Join(t.TempDir(), "lake.db"), &boltfs.Options{Create: true})
			if err != nil {
				t.Fatal(err)
			}
			s := datastore.New(lossyFeed{d})
			t.Cleanup(func() { s.Close() })
			return s
		})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteCatchesALossyFeed$", "-test.v")
	cmd.Env = append(os.Environ(), brokenEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the conformance suite passed a feed that loses changes:\n%s", out)
	}
	for _, want := range []string{"--- FAIL: TestSuiteCatchesALossyFeed/ChangesLatestOnlyInOrder", "--- FAIL: TestSuiteCatchesALossyFeed/ConcurrentWritersManyModels"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("suite output lacks %q:\n%s", want, out)
		}
	}
}
