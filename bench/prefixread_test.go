package bench_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/bench"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/metastore/dynamostore"
)

// TestPrefixRead runs the measuring command's engine at a small size and
// checks the shape of its figures: v2 evaluates only what it returns at
// every R, v1 evaluates the whole table.
func TestPrefixRead(t *testing.T) {
	api := ddb.NewClient(ddblocal.Config(t), "")
	var progress bytes.Buffer
	rows, err := bench.RunPrefixRead(t.Context(), api, bench.PrefixReadConfig{
		Table: ddblocal.TableName(t), Catalog: 12, Retained: []int{0, 300}, PageSize: 5,
	}, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2*2*2 {
		t.Fatalf("%d rows, want 8", len(rows))
	}
	for _, r := range rows {
		if r.Returned != 12 {
			t.Fatalf("row %+v returned %d", r, r.Returned)
		}
		switch r.Layout {
		case dynamostore.LayoutV2:
			if r.Ratio() != 1 {
				t.Errorf("v2 at R=%d page %d: evaluated/returned %.2f", r.Retained, r.PageSize, r.Ratio())
			}
			if max := int64(8 + 12/r.PageSize + 1); r.Requests > max+8 {
				t.Errorf("v2 at R=%d page %d: %d requests", r.Retained, r.PageSize, r.Requests)
			}
		case dynamostore.LayoutV1:
			if r.Evaluated != int64(r.TableItems) {
				t.Errorf("v1 at R=%d evaluated %d of %d items", r.Retained, r.Evaluated, r.TableItems)
			}
		}
	}
	var out bytes.Buffer
	if err := bench.PrintRows(&out, rows); err != nil || !strings.Contains(out.String(), "evaluated/returned") {
		t.Fatalf("table: %v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
}

// TestMigration runs the migration benchmark's engine at a small size.
func TestMigration(t *testing.T) {
	api := ddb.NewClient(ddblocal.Config(t), "")
	res, err := bench.RunMigration(t.Context(), api, bench.MigrationConfig{
		Table: ddblocal.TableName(t), Records: 120, PageSize: 50, Mutations: 20,
	}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	// 120 records plus the counter the v1 CAS measurement wrote.
	if b := res.BackfillCounts; b.Scanned != 121 || b.Created+b.Validated != 121 || len(res.Mutations) != 3 {
		t.Fatalf("result %+v", res)
	}
	if v1, dual := res.Mutations[0], res.Mutations[1]; v1.Requests != 1 || dual.Requests != 1 || dual.WriteUnits <= v1.WriteUnits {
		t.Fatalf("a CAS is one request in each mode, and dual writes more: %+v", res.Mutations)
	}
	// The change log alone misses the legacy writes; the stream names each.
	if d := res.Detection; len(d) != 2 || d[0].Refused || !d[1].Refused || d[1].Named != int64(res.Legacy) || res.Legacy != 4 {
		t.Fatalf("detection after %d legacy writes: %+v", res.Legacy, d)
	}
	if f := res.Finalize; len(f) != 3 || !f[2].Published || f[1].Checked < 120 || f[2].Checked >= f[1].Checked || f[2].Records < 20 {
		t.Fatalf("finalize figures: %+v", f)
	}
	var out bytes.Buffer
	if err := bench.PrintMigration(&out, res); err != nil || !strings.Contains(out.String(), "write pause") {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
}

// TestNode runs the node benchmark's engine at a small size on bolt.
func TestNode(t *testing.T) {
	d, err := boltstore.Open(filepath.Join(t.TempDir(), "lake.db"), &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s := metastore.New(d)
	defer s.Close()
	rows, err := bench.RunNode(t.Context(), "bolt", s, bench.NodeConfig{Ops: 200, Clients: []int{1, 8}, Keys: 10, WriteRatio: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range rows {
		if r.Errors != 0 || r.OpsPerSecond() <= 0 || r.P50 <= 0 {
			t.Fatalf("row %+v", r)
		}
	}
	var out bytes.Buffer
	bench.PrintNodeRows(&out, rows)
	t.Log("\n" + out.String())
}
