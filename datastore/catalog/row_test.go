package catalog

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
)

// TestBuildRow: a model's state follows its definition (live, orphaned when
// deleted — and still orphaned once the tombstone is purged — undefined
// when it never had one); entries and versions are counted and ordered by
// position; a row too large for one file's metadata omits its entries and
// says how many.
func TestBuildRow(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	file := func(p string, pos uint64, size int64) datastore.Info {
		return datastore.Info{Path: p, Pos: pos, Size: size, Time: now.Add(time.Duration(pos) * time.Second)}
	}
	files := []datastore.Info{
		file("data/t/i/model.yaml", 1, 5),
		file("data/t/i/out/2/raw", 4, 10),
		file("data/t/i/out/1/raw", 2, 20),
		file("data/t/i/out/1/meta", 3, 1),
		file("data/t/i/log/a/raw", 5, 7),
	}
	def := file("data/t/i/model.yaml", 1, 5)
	r := buildRow("n", "t/i", files, &def, nil, 5, now)
	if r.State != Live || r.Files != 5 || r.Bytes != 43 || r.Pos != 5 || !r.Created.Equal(now) {
		t.Fatalf("live row = %+v", r)
	}
	got := fmt.Sprint(r.Entries)
	if got != "[{log [{a 1 7 5}]} {out [{1 2 21 3} {2 1 10 4}]}]" {
		t.Fatalf("entries = %s", got)
	}
	tomb := datastore.Info{Path: "data/t/i/model.yaml", Pos: 6, Deleted: true, Time: now.Add(time.Hour)}
	o := buildRow("n", "t/i", files[1:], &tomb, &r, 6, now.Add(2*time.Hour))
	if o.State != Orphaned || !o.Deleted.Equal(now.Add(time.Hour)) || !o.Created.Equal(now) {
		t.Fatalf("row after the definition's delete = %+v", o)
	}
	// The tombstone purged: still orphaned, from the same instant.
	if p := buildRow("n", "t/i", files[1:], nil, &o, 7, now.Add(3*time.Hour)); p.State != Orphaned || !p.Deleted.Equal(o.Deleted) {
		t.Fatalf("row after the tombstone's purge = %+v", p)
	}
	// Defined again: live.
	if l := buildRow("n", "t/i", files, &def, &o, 8, now); l.State != Live || !l.Deleted.IsZero() {
		t.Fatalf("row of a model defined again = %+v", l)
	}
	if u := buildRow("n", "t/j", files[1:], nil, nil, 4, now); u.State != Undefined {
		t.Fatalf("row without a definition = %+v", u)
	}
	// Too many entries for one row: they are omitted and counted.
	var many []datastore.Info
	for i := range 3000 {
		many = append(many, file(fmt.Sprintf("data/t/i/entry-%04d-%s/1/raw", i, strings.Repeat("x", 20)), uint64(i+1), 1))
	}
	big := buildRow("n", "t/i", many, nil, nil, 3000, now)
	b, err := encodeRow(big)
	if err != nil || len(b) > datastore.MaxMetaBytes {
		t.Fatalf("encoded row of 3000 entries: %d bytes, %v", len(b), err)
	}
	var back Row
	if err := json.Unmarshal(b, &back); err != nil || back.EntriesOmitted != 3000 || len(back.Entries) != 0 || back.Files != 3000 {
		t.Fatalf("row too large decoded as %+v (%v)", back, err)
	}
}
