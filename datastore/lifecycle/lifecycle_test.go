package lifecycle_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/datastore/lifecycle"
)

func versions(names ...string) []catalog.Version {
	var out []catalog.Version
	for i, n := range names {
		out = append(out, catalog.Version{Name: n, Files: 1, Bytes: 10, Pos: uint64(i + 1)})
	}
	return out
}

// TestPlan: orphaned models go once the retention has passed, and only
// they; keep-last trims the oldest versions of live and undefined models,
// never the newest K; a policy of zeros lets only orphans go.
func TestPlan(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rows := []catalog.Row{
		{Namespace: "n", Model: "m/old-orphan", State: catalog.Orphaned, Deleted: now.Add(-2 * time.Hour), Files: 3, Bytes: 30},
		{Namespace: "n", Model: "m/new-orphan", State: catalog.Orphaned, Deleted: now.Add(-time.Minute)},
		{Namespace: "n", Model: "m/live", State: catalog.Live, Entries: []catalog.Entry{
			{Name: "out", Versions: versions("1", "2", "3", "4")},
			{Name: "log", Versions: versions("a")},
		}},
		{Namespace: "n", Model: "m/nodef", State: catalog.Undefined, Entries: []catalog.Entry{{Name: "out", Versions: versions("1", "2", "3")}}},
	}
	describe := func(as []lifecycle.Action) string {
		var out []string
		for _, a := range as {
			s := string(a.Kind) + " " + a.Model
			if a.Kind == lifecycle.DeleteVersion {
				s += " " + a.Entry + "/" + a.Version
			}
			out = append(out, s)
		}
		return strings.Join(out, ", ")
	}
	cases := []struct {
		name string
		p    datastore.Lifecycle
		want string
	}{
		{"zero policy: every orphan at once", datastore.Lifecycle{}, "drop-model m/old-orphan, drop-model m/new-orphan"},
		{"retention keeps the recent orphan", datastore.Lifecycle{Retention: time.Hour}, "drop-model m/old-orphan"},
		{"retention exactly reached", datastore.Lifecycle{Retention: 2 * time.Hour}, "drop-model m/old-orphan"},
		{"retention not reached", datastore.Lifecycle{Retention: 3 * time.Hour}, ""},
		{"keep-last 2", datastore.Lifecycle{Retention: 3 * time.Hour, KeepLast: 2},
			"delete-version m/live out/1, delete-version m/live out/2, delete-version m/nodef out/1"},
		{"keep-last beyond every entry", datastore.Lifecycle{Retention: 3 * time.Hour, KeepLast: 5}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := lifecycle.Plan(rows, c.p, now)
			if d := describe(got); d != c.want {
				t.Fatalf("Plan = %q, want %q", d, c.want)
			}
			for _, a := range got {
				if a.Model == "m/live" && a.Kind == lifecycle.DropModel {
					t.Fatal("a live model planned for a drop")
				}
				if a.Kind == lifecycle.DeleteVersion && (a.Version == "4" || a.Version == "3" && a.Model == "m/live") {
					t.Fatalf("a version among the newest %d planned for deletion: %+v", c.p.KeepLast, a)
				}
			}
		})
	}
	if a := lifecycle.Plan(rows, datastore.Lifecycle{}, now)[0]; a.Files != 3 || a.Bytes != 30 || !strings.Contains(a.String(), "retention 0s") {
		t.Fatalf("drop action = %+v (%s)", a, a)
	}
}
