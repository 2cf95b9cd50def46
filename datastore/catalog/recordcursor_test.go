package catalog

import (
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
)

// TestRecordCursor: the fold cursor's record is written over the value the
// caller last wrote, over one another tree wrote since (read, then
// replaced), and created where there is none; the record ends at the
// caller's cursor every time.
func TestRecordCursor(t *testing.T) {
	ctx := t.Context()
	d, err := s3fs.Open(ctx, s3local.Client(t), s3fs.Options{Bucket: s3local.Bucket(t), Prefix: "recordcursor"})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := datastore.Open(ctx, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close() })
	ns, err := ds.Namespace("rc")
	if err != nil {
		t.Fatal(err)
	}
	record := func() string {
		v, err := ns.Records().GetRecord(ctx, cursorKey("rc"))
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	for _, c := range []struct{ name, known, cursor string }{
		{"none yet, none known", "", "c1"},
		{"over the value known", "c1", "c2"},
		{"over another tree's", "c1", "c3"}, // the record holds c2
		{"known, but none there", "c9", "c4"},
	} {
		if c.name == "known, but none there" {
			if err := ns.Records().DeleteRecord(ctx, cursorKey("rc"), []byte("c3")); err != nil {
				t.Fatal(err)
			}
		}
		if err := RecordCursor(ctx, ns, c.known, c.cursor); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := record(); got != c.cursor {
			t.Fatalf("%s: record %q, want %q", c.name, got, c.cursor)
		}
	}
}
