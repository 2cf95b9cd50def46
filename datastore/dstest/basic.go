package dstest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

func testPutGetStat(t *testing.T, s *datastore.Store) {
	p := "data/command/shell/u1/result/1/raw"
	wantNotFound(t, s, p)
	i1 := put(t, s, p, "hello")
	if i1.Partition != "command/shell/u1" || i1.Pos != 1 || i1.Size != 5 || i1.Deleted || i1.Version == "" {
		t.Fatalf("first Put = %+v; want partition command/shell/u1, pos 1, size 5", i1)
	}
	sum := sha256.Sum256([]byte("hello"))
	if i1.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("SHA256 = %s", i1.SHA256)
	}
	got := wantContent(t, s, p, "hello")
	if got.Version != i1.Version || got.Pos != 1 || string(got.Meta) != "meta:"+p {
		t.Fatalf("Get info = %+v, want %+v", got, i1)
	}
	i2 := put(t, s, p, "world!")
	if i2.Pos != 2 || i2.Version == i1.Version {
		t.Fatalf("second Put = %+v; want pos 2 and a new version", i2)
	}
	wantContent(t, s, p, "world!")
	st, err := s.Stat(t.Context(), p)
	if err != nil || st.Size != 6 || st.Version != i2.Version {
		t.Fatalf("Stat = %+v, %v", st, err)
	}
	// Another partition has its own positions.
	o := put(t, s, "definitions/shell.yaml", "def")
	if o.Partition != "definitions" || o.Pos != 1 {
		t.Fatalf("other partition Put = %+v; want partition definitions, pos 1", o)
	}
	// The returned content is the caller's.
	_, b, _ := s.Get(t.Context(), p)
	b[0] = 'X'
	wantContent(t, s, p, "world!")
}

func testSizes(t *testing.T, s *datastore.Store) {
	put(t, s, "data/t/i/empty", "")
	info := wantContent(t, s, "data/t/i/empty", "")
	if info.Chunks != 0 || info.Size != 0 {
		t.Fatalf("empty file = %+v", info)
	}
	for _, n := range []int{datastore.ChunkSize, datastore.ChunkSize + 1, 2*datastore.ChunkSize + datastore.ChunkSize/2} {
		content := pattern(n, byte(n))
		p := fmt.Sprintf("data/t/i/big-%d", n)
		put(t, s, p, content)
		info := wantContent(t, s, p, content)
		if want := (n + datastore.ChunkSize - 1) / datastore.ChunkSize; info.Chunks != want {
			t.Fatalf("%d bytes in %d chunks, want %d", n, info.Chunks, want)
		}
	}
}

// pattern returns n bytes that differ from chunk to chunk and by seed.
func pattern(n int, seed byte) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i/7) + byte(i/datastore.ChunkSize)
	}
	return string(b)
}

func testMetadata(t *testing.T, s *datastore.Store) {
	meta := bytes.Repeat([]byte{0, 1, 2, 255}, datastore.MaxMetaBytes/4)
	if _, err := s.Put(t.Context(), "data/t/i/m", strings.NewReader("x"), meta); err != nil {
		t.Fatalf("Put with maximal metadata: %v", err)
	}
	info, _, err := s.Get(t.Context(), "data/t/i/m")
	if err != nil || !bytes.Equal(info.Meta, meta) {
		t.Fatalf("metadata round trip: %v, %d bytes", err, len(info.Meta))
	}
	_, err = s.Put(t.Context(), "data/t/i/m", strings.NewReader("y"), append(meta, 0))
	wantErr(t, "oversized metadata", err, metastore.ErrInvalidValue)
	wantContent(t, s, "data/t/i/m", "x")
}

func testInvalidPaths(t *testing.T, s *datastore.Store) {
	for _, p := range []string{"", "/abs", "trail/", "a//b", "a/./b", "a/../b", "..", "bad\x00nul", "\xff\xfe", strings.Repeat("a", datastore.MaxPathBytes+1)} {
		_, err := s.Put(t.Context(), p, strings.NewReader("x"), nil)
		wantErr(t, fmt.Sprintf("Put(%q)", p), err, metastore.ErrInvalidKey)
		_, _, err = s.Get(t.Context(), p)
		wantErr(t, fmt.Sprintf("Get(%q)", p), err, metastore.ErrInvalidKey)
	}
	_, err := s.Put(t.Context(), metastore.ControlPrefix+"x", strings.NewReader("x"), nil)
	wantErr(t, "reserved path", err, metastore.ErrReservedKey)
	for _, part := range []string{"", "a/", "a//b", "/a", "a/../b"} {
		_, _, err := s.Changes(t.Context(), part, 0, 10)
		wantErr(t, fmt.Sprintf("Changes(%q)", part), err, metastore.ErrInvalidArgument)
	}
	_, _, err = s.Changes(t.Context(), "t/i", 0, 0)
	wantErr(t, "Changes limit 0", err, metastore.ErrInvalidArgument)
}

func testDelete(t *testing.T, s *datastore.Store) {
	p := "data/t/i/f"
	put(t, s, p, "v1")
	del, err := s.Delete(t.Context(), p)
	if err != nil || !del.Deleted || del.Pos != 2 {
		t.Fatalf("Delete = %+v, %v; want a tombstone at 2", del, err)
	}
	wantNotFound(t, s, p)
	_, err = s.Delete(t.Context(), p)
	wantErr(t, "delete a deleted path", err, metastore.ErrNotFound)
	_, err = s.Delete(t.Context(), "data/t/i/never")
	wantErr(t, "delete a missing path", err, metastore.ErrNotFound)
	m, err := s.StatMany(t.Context(), []string{p})
	if err != nil || !m[p].Deleted {
		t.Fatalf("StatMany of a deleted path = %+v, %v; want the tombstone", m, err)
	}
	ch, upTo := pullAll(t, s, "t/i", 0)
	if len(ch) != 1 || !ch[0].Deleted || ch[0].Pos != 2 || upTo != 2 {
		t.Fatalf("changes after a delete = %s up to %d; want the tombstone at 2", paths(ch), upTo)
	}
	if files, _ := s.ListAll(t.Context(), "data/"); len(files) != 0 {
		t.Fatalf("List shows deleted files: %s", paths(files))
	}
	put(t, s, p, "v3")
	wantContent(t, s, p, "v3")
	ch, _ = pullAll(t, s, "t/i", 2)
	if len(ch) != 1 || ch[0].Deleted || ch[0].Pos != 3 {
		t.Fatalf("changes after recreate = %s", paths(ch))
	}
}

func testList(t *testing.T, s *datastore.Store) {
	var all []string
	for i := range 5 {
		for _, m := range []string{"a/1", "a/2", "b/1"} {
			all = append(all, fmt.Sprintf("data/%s/res/%d/raw", m, i))
		}
		all = append(all, fmt.Sprintf("definitions/d%d.yaml", i), fmt.Sprintf("dataset/x%d", i))
	}
	for _, p := range all {
		put(t, s, p, p)
	}
	del := "data/a/1/res/0/raw"
	if _, err := s.Delete(t.Context(), del); err != nil {
		t.Fatal(err)
	}
	live := slices.DeleteFunc(slices.Clone(all), func(p string) bool { return p == del })
	slices.Sort(live)
	for _, prefix := range []string{"", "d", "data", "data/", "data/a", "data/a/", "data/a/1/", "data/a/1/res/3", "defin", "definitions/", "dataset/", "nothing/", "data/zz/"} {
		var want []string
		for _, p := range live {
			if strings.HasPrefix(p, prefix) {
				want = append(want, p)
			}
		}
		for _, limit := range []int{1, 2, 7, 1000} {
			var got []string
			cur := ""
			for pages := 0; ; pages++ {
				if pages > len(live)*3+10 {
					t.Fatalf("List(%q, %d) does not end", prefix, limit)
				}
				page, err := s.List(t.Context(), prefix, limit, cur)
				if err != nil {
					t.Fatalf("List(%q, %d): %v", prefix, limit, err)
				}
				if len(page.Files) > limit {
					t.Fatalf("List(%q, %d) returned %d files", prefix, limit, len(page.Files))
				}
				for _, f := range page.Files {
					got = append(got, f.Path)
				}
				if cur = page.Cursor; cur == "" {
					break
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("List(%q, limit %d) = %v\nwant %v", prefix, limit, got, want)
			}
		}
	}
	page, err := s.List(t.Context(), "data/", 1, "")
	if err != nil || page.Cursor == "" {
		t.Fatalf("first page: %v", err)
	}
	_, err = s.List(t.Context(), "definitions/", 1, page.Cursor)
	wantErr(t, "cursor of another prefix", err, metastore.ErrInvalidCursor)
	_, err = s.List(t.Context(), "data/", 1, page.Cursor[:len(page.Cursor)-2]+"xx")
	wantErr(t, "corrupted cursor", err, metastore.ErrInvalidCursor)
	_, err = s.List(t.Context(), "data/", 0, "")
	wantErr(t, "limit 0", err, metastore.ErrInvalidArgument)
}

func testStatMany(t *testing.T, s *datastore.Store) {
	var known []string
	for i := range 250 {
		p := fmt.Sprintf("data/t/%d/f", i%3)
		p = fmt.Sprintf("%s%03d", p, i)
		known = append(known, p)
	}
	entries := make([]datastore.Entry, 0, len(known))
	for _, p := range known {
		st, err := s.Upload(t.Context(), p, strings.NewReader(p), nil)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, datastore.Entry{Put: &st})
	}
	if _, err := s.Commit(t.Context(), nil, entries); err != nil {
		t.Fatal(err)
	}
	ask := append(slices.Clone(known), "data/t/0/missing", "other/missing", known[0])
	m, err := s.StatMany(t.Context(), ask)
	if err != nil {
		t.Fatalf("StatMany: %v", err)
	}
	if len(m) != len(known) {
		t.Fatalf("StatMany found %d paths, want %d", len(m), len(known))
	}
	for _, p := range known {
		if m[p].Size != int64(len(p)) || m[p].Path != p {
			t.Fatalf("StatMany[%q] = %+v", p, m[p])
		}
	}
	_, err = s.StatMany(t.Context(), []string{"ok/path", "bad//path"})
	wantErr(t, "StatMany with a bad path", err, metastore.ErrInvalidKey)
}

func testBadEntries(t *testing.T, s *datastore.Store) {
	st, err := s.Upload(t.Context(), "data/t/i/a", strings.NewReader("a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		entries []datastore.Entry
	}{
		{"empty entry", []datastore.Entry{{}}},
		{"both", []datastore.Entry{{Put: &st, Delete: "data/t/i/a"}}},
		{"duplicate path", []datastore.Entry{{Put: &st}, {Delete: "data/t/i/a"}}},
		{"bad delete path", []datastore.Entry{{Delete: "a//b"}}},
	} {
		_, err := s.Commit(t.Context(), nil, tc.entries)
		if !errors.Is(err, metastore.ErrInvalidArgument) && !errors.Is(err, metastore.ErrInvalidKey) {
			t.Fatalf("%s: %v, want an invalid-argument error", tc.name, err)
		}
	}
	wantNotFound(t, s, "data/t/i/a")
}

func testClose(t *testing.T, s *datastore.Store) {
	put(t, s, "data/t/i/f", "x")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, _, err := s.Get(t.Context(), "data/t/i/f")
	wantErr(t, "Get after Close", err, metastore.ErrClosed)
	_, err = s.Put(t.Context(), "data/t/i/f", strings.NewReader("y"), nil)
	wantErr(t, "Put after Close", err, metastore.ErrClosed)
}

func testRecords(t *testing.T, s *datastore.Store) {
	r := s.Records()
	ctx := t.Context()
	if _, err := r.GetRecord(ctx, "lock/ns/a"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("GetRecord of a missing record: %v", err)
	}
	if err := r.CASRecord(ctx, "lock/ns/a", metastore.ExpectAbsent(), []byte("t1")); err != nil {
		t.Fatalf("create: %v", err)
	}
	wantErr(t, "create over existing", r.CASRecord(ctx, "lock/ns/a", metastore.ExpectAbsent(), []byte("t2")), metastore.ErrConflict)
	wantErr(t, "wrong expected", r.CASRecord(ctx, "lock/ns/a", metastore.ExpectValue([]byte("zz")), []byte("t2")), metastore.ErrConflict)
	if err := r.CASRecord(ctx, "lock/ns/a", metastore.ExpectValue([]byte("t1")), []byte("t2")); err != nil {
		t.Fatalf("swap: %v", err)
	}
	if v, err := r.GetRecord(ctx, "lock/ns/a"); err != nil || string(v) != "t2" {
		t.Fatalf("GetRecord = %q, %v", v, err)
	}
	if err := r.CASRecord(ctx, "lock/ns/b", metastore.ExpectAbsent(), []byte("b")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"lock/other/c", "lock/nsx/e", "gen/ns"} {
		if err := r.CASRecord(ctx, k, metastore.ExpectAbsent(), []byte("c")); err != nil {
			t.Fatal(err)
		}
	}
	items, err := r.ListRecords(ctx, "lock/ns/")
	if err != nil || len(items) != 2 || items[0].Key != "lock/ns/a" || items[1].Key != "lock/ns/b" {
		t.Fatalf("ListRecords = %v, %v", items, err)
	}
	for _, bad := range []string{"lock/", "gen/ns", "", "/x/"} {
		_, err = r.ListRecords(ctx, bad)
		wantErr(t, fmt.Sprintf("ListRecords(%q)", bad), err, metastore.ErrInvalidArgument)
	}
	// A fenced write lands only while the fence holds its token.
	fence := datastore.Fence{Key: "lock/ns/a", Token: []byte("t2")}
	if err := r.FencedRecord(ctx, fence, "exp/ns/a", metastore.ExpectAbsent(), []byte("e1")); err != nil {
		t.Fatalf("fenced create: %v", err)
	}
	err = r.FencedRecord(ctx, fence, "exp/ns/a", metastore.ExpectValue([]byte("zz")), []byte("e2"))
	wantErr(t, "fenced write with a wrong expected value", err, metastore.ErrConflict)
	if datastore.IsFenceConflict(err) {
		t.Fatalf("a failed expectation is reported as the fence: %v", err)
	}
	stale := datastore.Fence{Key: "lock/ns/a", Token: []byte("t1")}
	err = r.FencedRecord(ctx, stale, "exp/ns/a", metastore.ExpectValue([]byte("e1")), []byte("e2"))
	if !datastore.IsFenceConflict(err) {
		t.Fatalf("fenced write under a stale token: %v, want a fence conflict", err)
	}
	if v, _ := r.GetRecord(ctx, "exp/ns/a"); string(v) != "e1" {
		t.Fatalf("a refused fenced write changed the record to %q", v)
	}
	wantErr(t, "fence is its own target", r.FencedRecord(ctx, fence, "lock/ns/a", metastore.ExpectAbsent(), nil), metastore.ErrInvalidArgument)
	wantErr(t, "delete wrong value", r.DeleteRecord(ctx, "lock/ns/a", []byte("t1")), metastore.ErrConflict)
	if err := r.DeleteRecord(ctx, "lock/ns/a", []byte("t2")); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := r.GetRecord(ctx, "lock/ns/a"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("deleted record still there: %v", err)
	}
}
