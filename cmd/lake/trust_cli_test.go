package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dsurl"
)

// TestDataGetDamaged (issue 26, rows 1 and 9): an entry claiming a
// petabyte for five bytes, committed past the store's checks, makes `lake
// data get` of that path exit 1 with "damaged file" naming it, never a
// panic or an allocation of what it claims; other paths read on. A path with
// a control character is refused, exit 2.
func TestDataGetDamaged(t *testing.T) {
	dir := t.TempDir()
	store := "bolt://" + filepath.Join(dir, "lake.db")
	lake := func(stdin string, args ...string) result {
		return run(t, dir, stdin, append([]string{"--store", store}, args...)...)
	}
	ok(t, lake("", "data", "init"))
	ok(t, lake("fine", "data", "put", "data/t/i/ok", "-"))
	s, err := dsurl.Open(t.Context(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := s.Driver()
	sum := sha256.Sum256([]byte("hello"))
	st := datastore.Staged{Path: "data/t/i/huge", Version: strings.Repeat("ab", 16), Size: 1125899906842624, Chunks: 1,
		SHA256: hex.EncodeToString(sum[:]), Meta: []byte{}, Started: s.Now()}
	if err := d.BeginUpload(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	if err := d.PutChunk(t.Context(), st.Version, 0, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Commit(t.Context(), nil, []datastore.Entry{{Put: &st}}, s.Now()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	r := lake("", "data", "get", "data/t/i/huge")
	if r.code != 1 || !strings.Contains(r.stderr, "damaged file") || !strings.Contains(r.stderr, `"data/t/i/huge"`) ||
		strings.Contains(r.stderr, "panic") || strings.Count(r.stderr, "lake: ") != 1 {
		t.Fatalf("get of a damaged file: exit %d, stderr %q; want exit 1 naming the path", r.code, r.stderr)
	}
	if got := ok(t, lake("", "data", "get", "data/t/i/ok")).stdout; got != "fine" {
		t.Fatalf("get of another path = %q", got)
	}
	os.WriteFile(filepath.Join(dir, "c"), []byte("x"), 0o600)
	for _, p := range []string{"data/t/i/a\nb", "data/t/i/\x1b[31mred", "data/t/i/del\x7f"} {
		if r := lake("", "data", "put", p, "c"); r.code != 2 {
			t.Fatalf("put %q: exit %d, stderr %q; want 2", p, r.code, r.stderr)
		}
	}
}

// TestDataLsQuotesForeignControlPaths (issue 26, row 9): a path with a
// newline that a foreign writer stored past lake's checks is printed quoted
// by `lake data ls`, so one line stays one path.
func TestDataLsQuotesForeignControlPaths(t *testing.T) {
	dir := t.TempDir()
	store := "bolt://" + filepath.Join(dir, "lake.db")
	lake := func(args ...string) result { return run(t, dir, "", append([]string{"--store", store}, args...)...) }
	ok(t, lake("data", "init"))
	s, err := dsurl.Open(t.Context(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(t.Context(), "data/t/i/plain", strings.NewReader("x"), nil); err != nil {
		t.Fatal(err)
	}
	d := s.Driver()
	st := datastore.Staged{Path: "data/t/i/a\nb", Version: strings.Repeat("cd", 16), Meta: []byte{}, Started: s.Now(),
		SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}
	if err := d.BeginUpload(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Commit(t.Context(), nil, []datastore.Entry{{Put: &st}}, s.Now()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got := ok(t, lake("data", "ls")).stdout; got != "\"data/t/i/a\\nb\"\ndata/t/i/plain\n" {
		t.Fatalf("ls = %q", got)
	}
}
