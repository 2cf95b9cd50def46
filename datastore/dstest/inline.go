package dstest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// testInline checks small files stored inline (issue 31): a file of at most
// InlineMax bytes is committed with its metadata, no chunk and no upload
// intent, and reads back whole from Stat, Get and the feed (whose Infos
// carry it, so a pull reads nothing more); one byte more is in chunks. An
// inline upload never expires (it has no intent to reclaim), replacing an
// inline version hands nothing to Reclaim, a staged inline file whose
// content was changed after Upload is refused, and a fence guards an inline
// commit as any other.
func testInline(t *testing.T, s *datastore.Store) {
	ctx := t.Context()
	start := time.Now()
	s.SetClock(func() time.Time { return start })
	sizes := map[string]int{
		"data/m/in/below": datastore.InlineMax - 1,
		"data/m/in/at":    datastore.InlineMax,
		"data/m/in/above": datastore.InlineMax + 1,
		"data/m/in/empty": 0,
	}
	content := map[string]string{}
	for p, n := range sizes {
		content[p] = pattern(n, byte(len(p)))
		put(t, s, p, content[p])
	}
	for p, n := range sizes {
		info := wantContent(t, s, p, content[p])
		inline := n <= datastore.InlineMax
		if info.IsInline() != inline || info.Size != int64(n) {
			t.Fatalf("%s (%d bytes): Stat says %d bytes in %d chunks, %d inline; want inline %v", p, n, info.Size, info.Chunks, len(info.Inline), inline)
		}
		if inline && !bytes.Equal(info.Inline, []byte(content[p])) {
			t.Fatalf("%s: Stat's inline content differs from what was put", p)
		}
		if !inline && (info.Chunks != 1 || info.Inline != nil) {
			t.Fatalf("%s (%d bytes): %d chunks and %d bytes inline, want 1 chunk and nothing inline", p, n, info.Chunks, len(info.Inline))
		}
	}
	// The feed carries the content: a pull writes it from what it read.
	ch, _ := pullAll(t, s, "m/in", 0)
	if len(ch) != len(sizes) {
		t.Fatalf("the feed holds %s, want %d files", paths(ch), len(sizes))
	}
	for _, c := range ch {
		var buf bytes.Buffer
		ok, err := datastore.WriteInline(c, &buf)
		if err != nil || ok != (sizes[c.Path] <= datastore.InlineMax) {
			t.Fatalf("WriteInline(%s from the feed) = %v, %v", c.Path, ok, err)
		}
		if ok && buf.String() != content[c.Path] {
			t.Fatalf("WriteInline(%s from the feed) wrote %d bytes, want %d", c.Path, buf.Len(), sizes[c.Path])
		}
	}

	// No intent: an inline upload left uncommitted past the upload grace
	// is nothing to reclaim, and still commits.
	st, err := s.Upload(ctx, "data/m/in/late", strings.NewReader("late"), nil)
	if err != nil || st.Chunks != 0 || string(st.Inline) != "late" {
		t.Fatalf("Upload of 4 bytes = %+v, %v; want them inline", st, err)
	}
	s.SetClock(func() time.Time { return start.Add(2 * time.Hour) })
	if rs, err := s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Hour}); err != nil || rs.Uploads != 0 || rs.Chunks != 0 {
		t.Fatalf("Reclaim with an uncommitted inline upload = %+v, %v; want nothing reclaimed", rs, err)
	}
	if _, err := s.Commit(ctx, nil, []datastore.Entry{{Put: &st}}); err != nil {
		t.Fatalf("Commit of an inline upload older than the grace period: %v", err)
	}
	wantContent(t, s, "data/m/in/late", "late")

	// Replacing an inline version hands no chunks to Reclaim; replacing
	// a chunked one by an inline one does, and the inline one reads on.
	put(t, s, "data/m/in/below", "now smaller")
	put(t, s, "data/m/in/above", "now inline")
	s.SetClock(func() time.Time { return start.Add(4 * time.Hour) })
	if rs, err := s.Reclaim(ctx, datastore.ReclaimOptions{Grace: time.Hour}); err != nil || rs.Versions != 1 || rs.Chunks != 1 {
		t.Fatalf("Reclaim after replacing an inline and a chunked version = %+v, %v; want 1 version, 1 chunk", rs, err)
	}
	wantContent(t, s, "data/m/in/below", "now smaller")
	wantContent(t, s, "data/m/in/above", "now inline")

	// The store's side of the trust boundary: inline content changed
	// after Upload, or claimed beyond InlineMax, is refused.
	st, err = s.Upload(ctx, "data/m/in/tampered", strings.NewReader("honest"), nil)
	if err != nil {
		t.Fatal(err)
	}
	forged := st
	forged.Inline = []byte("forged")
	_, err = s.Commit(ctx, nil, []datastore.Entry{{Put: &forged}})
	wantErr(t, "Commit of inline content changed after Upload", err, metastore.ErrInvalidArgument)
	big := st
	big.Inline = []byte(pattern(datastore.InlineMax+1, 1))
	big.Size = int64(len(big.Inline))
	_, err = s.Commit(ctx, nil, []datastore.Entry{{Put: &big}})
	wantErr(t, "Commit of a staged file claiming more than InlineMax bytes inline", err, metastore.ErrInvalidArgument)
	wantNotFound(t, s, "data/m/in/tampered")

	// A fence guards an inline commit: a stale token applies nothing.
	if err := s.Records().CASRecord(ctx, "rec/in/lock", metastore.ExpectAbsent(), []byte("t2")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Commit(ctx, &datastore.Fence{Key: "rec/in/lock", Token: []byte("t1")}, []datastore.Entry{{Put: &st}})
	if !datastore.IsFenceConflict(err) {
		t.Fatalf("inline commit under a stale fence: %v, want a fence conflict", err)
	}
	wantNotFound(t, s, "data/m/in/tampered")
	if _, err := s.Commit(ctx, &datastore.Fence{Key: "rec/in/lock", Token: []byte("t2")}, []datastore.Entry{{Put: &st}}); err != nil {
		t.Fatalf("inline commit under the live fence: %v", err)
	}
	wantContent(t, s, "data/m/in/tampered", "honest")
}
