package dstest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// stageRaw uploads content through the driver directly, as a client other
// than this Store would (a remote client, another process): the Store has
// not vouched for it, so its Commit must prove it.
func stageRaw(t *testing.T, s *datastore.Store, path string, content []byte) datastore.Staged {
	t.Helper()
	ctx, d := t.Context(), s.Driver()
	sum := sha256.Sum256(content)
	st := datastore.Staged{Path: path, Version: strings.Repeat("ab", 8) + hex.EncodeToString(sum[:8]), Meta: []byte{},
		Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:]), Started: s.Now()}
	if err := d.BeginUpload(ctx, st); err != nil {
		t.Fatalf("BeginUpload: %v", err)
	}
	for off := 0; off < len(content); off += datastore.ChunkSize {
		if err := d.PutChunk(ctx, st.Version, st.Chunks, content[off:min(off+datastore.ChunkSize, len(content))]); err != nil {
			t.Fatalf("PutChunk %d: %v", st.Chunks, err)
		}
		st.Chunks++
	}
	return st
}

// testCommitProved (issue 26, row 1): a commit whose staged file does not
// match what was uploaded (size, chunk count, SHA-256, a version never
// uploaded) is refused and applies nothing; a staged file uploaded by
// another client that does match commits.
func testCommitProved(t *testing.T, s *datastore.Store) {
	ctx := t.Context()
	st := stageRaw(t, s, "data/t/i/five", []byte("hello"))
	big := stageRaw(t, s, "data/t/i/big", []byte(pattern(datastore.ChunkSize+10, 3)))
	lie := func(f func(*datastore.Staged)) datastore.Staged {
		c := st
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		st   datastore.Staged
		want error
	}{
		{"a petabyte claimed", lie(func(c *datastore.Staged) { c.Size = 1 << 50 }), metastore.ErrInvalidArgument},
		{"a petabyte in as many chunks", lie(func(c *datastore.Staged) { c.Size, c.Chunks = 1<<50, int(datastore.ChunksFor(1<<50)) }), metastore.ErrInvalidArgument},
		{"64 GiB claimed", lie(func(c *datastore.Staged) { c.Size = 64 << 30 }), metastore.ErrInvalidArgument},
		{"one byte short", lie(func(c *datastore.Staged) { c.Size = 4 }), metastore.ErrInvalidArgument},
		{"no chunks claimed", lie(func(c *datastore.Staged) { c.Size, c.Chunks = 0, 0 }), metastore.ErrInvalidArgument},
		{"another SHA-256", lie(func(c *datastore.Staged) { c.SHA256 = strings.Repeat("0", 64) }), metastore.ErrInvalidArgument},
		{"a SHA-256 that is not one", lie(func(c *datastore.Staged) { c.SHA256 = "x" }), metastore.ErrInvalidArgument},
		{"a version never uploaded", lie(func(c *datastore.Staged) { c.Version = strings.Repeat("cd", 16) }), datastore.ErrUploadExpired},
		{"one chunk of two claimed", func() datastore.Staged { c := big; c.Chunks, c.Size = 1, datastore.ChunkSize; return c }(), metastore.ErrInvalidArgument},
		{"the other file's SHA-256", lie(func(c *datastore.Staged) { c.SHA256 = big.SHA256 }), metastore.ErrInvalidArgument},
	} {
		_, err := s.Commit(ctx, nil, []datastore.Entry{{Put: &tc.st}})
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: Commit = %v, want %v", tc.name, err, tc.want)
		}
		// A refused file in a commit with others refuses them all.
		other := stageRaw(t, s, "data/t/i/other", []byte("fine"))
		_, err = s.Commit(ctx, nil, []datastore.Entry{{Put: &other}, {Put: &tc.st}})
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s beside a good file: Commit = %v, want %v", tc.name, err, tc.want)
		}
	}
	wantNotFound(t, s, "data/t/i/five")
	wantNotFound(t, s, "data/t/i/other")
	if h, err := s.Head(ctx, "t/i"); err != nil || h.Seq != 0 {
		t.Fatalf("Head after refused commits = %+v, %v; want nothing applied", h, err)
	}
	// The truth commits, from a client the Store did not vouch for.
	if _, err := s.Commit(ctx, nil, []datastore.Entry{{Put: &st}, {Put: &big}}); err != nil {
		t.Fatalf("Commit of matching staged files: %v", err)
	}
	wantContent(t, s, "data/t/i/five", "hello")
	wantContent(t, s, "data/t/i/big", pattern(datastore.ChunkSize+10, 3))
}

// testChunksImmutable (issue 26, row 2): a chunk is written once. The same
// bytes again are a retry and succeed; other bytes are a conflict, before
// and after the commit, and the committed file reads as committed.
func testChunksImmutable(t *testing.T, s *datastore.Store) {
	ctx, d := t.Context(), s.Driver()
	content := pattern(datastore.ChunkSize+7, 5)
	st, err := s.Upload(ctx, "data/t/i/imm", strings.NewReader(content), nil)
	if err != nil {
		t.Fatal(err)
	}
	first, last := []byte(content[:datastore.ChunkSize]), []byte(content[datastore.ChunkSize:])
	other := []byte(strings.Repeat("x", len(last)))
	check := func(when string) {
		t.Helper()
		if err := d.PutChunk(ctx, st.Version, 1, last); err != nil {
			t.Fatalf("%s: a retry of the same bytes: %v", when, err)
		}
		if err := d.PutChunk(ctx, st.Version, 0, first); err != nil {
			t.Fatalf("%s: a retry of the same first chunk: %v", when, err)
		}
		err := d.PutChunk(ctx, st.Version, 1, other)
		wantErr(t, when+": other bytes", err, metastore.ErrConflict)
		err = d.PutChunk(ctx, st.Version, 0, other)
		wantErr(t, when+": other bytes of another length", err, metastore.ErrConflict)
	}
	check("staged")
	if _, err := s.Commit(ctx, nil, []datastore.Entry{{Put: &st}}); err != nil {
		t.Fatalf("Commit after refused overwrites: %v", err)
	}
	check("committed")
	wantContent(t, s, "data/t/i/imm", content)
}

// testDamagedReads (issue 26, rows 1 and 3): metadata committed past the
// store's checks (a foreign or older writer, straight to the driver) that
// does not match its chunks makes reads of that path fail with a
// DamagedError naming it, without allocating what it claims and without
// handing out the last chunk; every other path reads as before.
func testDamagedReads(t *testing.T, s *datastore.Store) {
	ctx, d := t.Context(), s.Driver()
	put(t, s, "data/t/i/good", "fine")
	content := []byte(pattern(2*datastore.ChunkSize+3, 7))
	for _, tc := range []struct {
		name string
		lie  func(*datastore.Staged)
	}{
		{"a petabyte in one chunk", func(c *datastore.Staged) { c.Size, c.Chunks = 1<<50, 1 }},
		{"a petabyte in as many chunks", func(c *datastore.Staged) { c.Size, c.Chunks = 1<<50, int(datastore.ChunksFor(1<<50)) }},
		{"64 GiB in as many chunks", func(c *datastore.Staged) { c.Size, c.Chunks = 64<<30, int(datastore.ChunksFor(64<<30)) }},
		{"another SHA-256", func(c *datastore.Staged) { c.SHA256 = strings.Repeat("0", 64) }},
		{"one chunk fewer", func(c *datastore.Staged) { c.Size, c.Chunks = 2*datastore.ChunkSize, 2 }},
		{"a negative size", func(c *datastore.Staged) { c.Size = -1 }},
	} {
		path := "data/t/i/" + strings.ReplaceAll(tc.name, " ", "-")
		st := stageRaw(t, s, path, content)
		tc.lie(&st)
		_, err := d.Commit(ctx, nil, []datastore.Entry{{Put: &st}}, s.Now())
		if errors.Is(err, metastore.ErrInvalidArgument) || errors.Is(err, datastore.ErrUploadExpired) {
			// A driver that proves commits itself (a node's client: the
			// node checks every commit) refuses the lie: fine, nothing to
			// read. Its readers are tested against the node's own driver.
			continue
		}
		if err != nil {
			t.Fatalf("%s: driver Commit: %v", tc.name, err)
		}
		var w countingWriter
		_, err = s.GetTo(ctx, path, &w)
		var de *datastore.DamagedError
		if !errors.As(err, &de) || !errors.Is(err, datastore.ErrDamaged) || de.Path != path || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s: GetTo = %v, want a DamagedError naming %q", tc.name, err, path)
		}
		if w.n >= int64(len(content)) {
			t.Fatalf("%s: GetTo wrote %d bytes of a damaged file, its whole content", tc.name, w.n)
		}
		if _, b, err := s.Get(ctx, path); !errors.Is(err, datastore.ErrDamaged) || b != nil {
			t.Fatalf("%s: Get = %d bytes, %v; want ErrDamaged", tc.name, len(b), err)
		}
	}
	wantContent(t, s, "data/t/i/good", "fine")
	var w countingWriter
	if info, err := s.GetTo(ctx, "data/t/i/good", &w); err != nil || w.n != 4 || info.Size != 4 {
		t.Fatalf("GetTo of a good file = %+v, %v (%d bytes)", info, err, w.n)
	}
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}
