package syncload

import (
	"path/filepath"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
)

// TestMeterUnwraps: a worker's meter, and its meters of a namespace (with
// the driver's abilities), give the driver they count for to
// datastore.UnwrapDriver, so that a driver recognises its own kind behind
// them (a DynamoDB drop carrying its catalog row's removal,
// datastore.CommitRider) and the harness measures the sync `lake data
// sync` makes.
func TestMeterUnwraps(t *testing.T) {
	d, err := boltfs.Open(filepath.Join(t.TempDir(), "lake.db"), &boltfs.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m := newMeter(d, DefaultConfig(), "ns", nil)
	if got := datastore.UnwrapDriver(m); got != datastore.Driver(d) {
		t.Fatalf("the worker's meter unwraps to %T, want the driver it counts for", got)
	}
	for _, name := range []string{"ns", "_catalog"} {
		ns, err := m.Namespace(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := datastore.UnwrapDriver(ns).(*boltfs.Driver); !ok {
			t.Fatalf("the meter of namespace %s unwraps to %T, want the bolt driver", name, datastore.UnwrapDriver(ns))
		}
	}
}
