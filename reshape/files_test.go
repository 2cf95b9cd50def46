package reshape

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// TestSpecFiles: the files a reshape keeps beside its spec, the atomic
// report, the cutoff's two spellings, and the verdicts the CLI prints.
func TestSpecFiles(t *testing.T) {
	if got := BesideSpec("ex/saas-comments.json", ReportSuffix); got != "ex/saas-comments.verify.json" {
		t.Errorf("BesideSpec: %q", got)
	}
	if got := DefaultStateURL("/x/spec.json"); got != "bolt:///x/spec.state.db" {
		t.Errorf("DefaultStateURL: %q", got)
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteReport(path, map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	var back map[string]int
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &back); err != nil || back["a"] != 1 {
		t.Errorf("report %q: %v", b, err)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("the temporary file stayed: %v", err)
	}
	if err := WriteReport(filepath.Join(t.TempDir(), "no", "such", "dir.json"), 1); err == nil {
		t.Error("a report into a missing directory was written")
	}
	for in, want := range map[string]time.Time{
		"2026-01-31":           time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC),
		"2026-01-31T10:00:00Z": time.Date(2026, 1, 31, 10, 0, 0, 0, time.UTC),
	} {
		if got, err := ParseCutoff(in); err != nil || !got.Equal(want) {
			t.Errorf("ParseCutoff(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseCutoff("last tuesday"); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Errorf("ParseCutoff of garbage: %v", err)
	}
	if EndFinalize.Work() != OutMoved || EndRollback.Work() != OutRemoved {
		t.Error("End.Work")
	}
	if _, err := (&Rewrite{}).End(context.Background(), End("undo"), RewriteOptions{}); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Errorf("an unknown end: %v", err)
	}
	if err := (&RewritePlan{Collisions: []Collision{{}}}).Verdict(); !errors.Is(err, metastore.ErrRefused) {
		t.Errorf("a plan with a collision: %v", err)
	}
	if err := (&RewritePlan{Covered: 2, Derivable: 2}).Verdict(); err != nil {
		t.Errorf("a clean plan: %v", err)
	}
	if err := (&Spec{Kind: "add-index"}).RequireRewrite("s.json", "finalize"); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Errorf("finalize of an add-index spec: %v", err)
	}
}
