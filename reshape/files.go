package reshape

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// Files a reshape keeps beside its spec file, unless told otherwise: the
// state store (a bolt file: the sweep's cursors, a rewrite's phase and
// verify record) and the last verify report. saas-comments.json has
// saas-comments.state.db and saas-comments.verify.json.
const (
	StateSuffix  = ".state.db"
	ReportSuffix = ".verify.json"
)

// BesideSpec names a file next to the spec: the spec's path without its
// extension, then suffix.
func BesideSpec(specPath, suffix string) string {
	return strings.TrimSuffix(specPath, filepath.Ext(specPath)) + suffix
}

// DefaultStateURL is the store URL of a reshape's state when none is
// given: a bolt file beside the spec.
func DefaultStateURL(specPath string) string { return "bolt://" + BesideSpec(specPath, StateSuffix) }

// WriteReport writes v as indented JSON to path atomically (a temporary
// file renamed over it): a crash leaves the old report or the new one,
// never half of one.
func WriteReport(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("lake: write report: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("lake: write report: %w", err)
	}
	return nil
}

// ParseCutoff parses the obsolescence cutoff of a lazy-only backfill
// (VerifyOptions.ObsoleteBefore): an RFC 3339 time or a date (2026-01-31,
// midnight UTC). Anything else matches metastore.ErrInvalidArgument.
func ParseCutoff(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%w: obsolete-before %q: want an RFC 3339 time or a date like 2026-01-31", metastore.ErrInvalidArgument, s)
}
