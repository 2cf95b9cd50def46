package dynamofs_test

import (
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// TestAMissingTableIsNamedAtFirstUse: Open sends no request (every
// `lake data sync` is a new process), and a table that does not exist is
// named, with the way out, by the first request, "lake: " once.
func TestAMissingTableIsNamedAtFirstUse(t *testing.T) {
	api := ddb.NewClient(ddblocal.Config(t), "")
	table := ddblocal.TableName(t) + "-absent"
	d, err := dynamofs.Open(t.Context(), api, dynamofs.Options{Table: table})
	if err != nil {
		t.Fatalf("Open of a table not yet used: %v", err)
	}
	defer d.Close()
	_, err = datastore.Open(t.Context(), d, nil)
	if err == nil {
		t.Fatal("opening a datastore over a missing table succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, table) || !strings.Contains(msg, "does not exist") || !strings.Contains(msg, "lake data init") ||
		!strings.HasPrefix(msg, "lake: ") || strings.Count(msg, "lake: ") != 1 {
		t.Fatalf("error = %q; want one that names the table %s and the way out, lake: once", msg, table)
	}
	if _, err := d.Head(t.Context(), "m/1"); err == nil || !strings.Contains(err.Error(), table) {
		t.Fatalf("Head on a missing table: %v; want the table named", err)
	}
}
