package datastore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/lakemeta/lake/metastore"
)

// ChunksFor returns how many chunks a file of size bytes has: every chunk
// but the last holds exactly ChunkSize bytes and the last at least one, so
// an empty file has none.
func ChunksFor(size int64) int64 {
	if size <= 0 {
		return 0
	}
	return (size-1)/ChunkSize + 1 // never overflows, unlike size+ChunkSize-1
}

// checkShape refuses a Size, Chunks, Inline and SHA256 that no upload can
// have, before any chunk is read: it is what keeps a claimed size of a
// petabyte from costing anything.
func checkShape(what string, size int64, chunks int, inline []byte, sum string) error {
	if why := shapeProblem(size, chunks, inline, sum); why != "" {
		return fmt.Errorf("%w: %s %s", metastore.ErrInvalidArgument, what, why)
	}
	return nil
}

// shapeProblem says what is impossible about a Size, Chunks, Inline and
// SHA256, or returns "". A file is in chunks (Chunks is ChunksFor(Size), no
// inline content) or inline (no chunks, Size bytes of inline content, at
// most InlineMax); an empty file is both. A small file in chunks is valid:
// files stored before inline storage existed are.
func shapeProblem(size int64, chunks int, inline []byte, sum string) string {
	switch {
	case size < 0:
		return fmt.Sprintf("claims %d bytes", size)
	case chunks == 0 && size > 0 && size > InlineMax:
		return fmt.Sprintf("claims %d bytes in no chunks; only a file of at most %d bytes is stored inline, and %d bytes are %d chunks of %d", size, InlineMax, size, ChunksFor(size), ChunkSize)
	case chunks == 0 && int64(len(inline)) != size:
		return fmt.Sprintf("claims %d bytes stored inline but holds %d inline", size, len(inline))
	case chunks != 0 && int64(chunks) != ChunksFor(size):
		return fmt.Sprintf("claims %d bytes in %d chunks; %d bytes are %d chunks of %d", size, chunks, size, ChunksFor(size), ChunkSize)
	case chunks != 0 && len(inline) != 0:
		return fmt.Sprintf("is stored in %d chunks and also holds %d bytes inline", chunks, len(inline))
	}
	if b, err := hex.DecodeString(sum); err != nil || len(b) != sha256.Size {
		return fmt.Sprintf("has SHA-256 %q, not 64 hex digits", sum)
	}
	return ""
}

// VerifyStaged proves st against its upload as d holds it, before a commit
// may apply it: chunks 0 to st.Chunks-1 exist, each but the last holds
// exactly ChunkSize bytes and the last at least one, there is no chunk
// st.Chunks, their total is st.Size and their SHA-256, computed here over
// the bytes d returns, is st.SHA256. It reads one chunk at a time, so its
// memory does not grow with the file. A mismatch matches
// metastore.ErrInvalidArgument; a missing chunk ErrUploadExpired (the
// upload was reclaimed, or never made). This is the store's side of the
// trust boundary (issue 26): Store.Commit calls it for staged files it did
// not upload itself, and the node for every staged file a client commits.
func VerifyStaged(ctx context.Context, d Driver, st Staged) error {
	what := fmt.Sprintf("staged file %q (version %s)", st.Path, st.Version)
	if err := checkShape(what, st.Size, st.Chunks, st.Inline, st.SHA256); err != nil {
		return err
	}
	if st.Chunks == 0 {
		// Inline (or empty): the content is here, nothing to read.
		if got := sha256Hex(st.Inline); got != st.SHA256 {
			return fmt.Errorf("%w: %s does not match its content: its inline content's SHA-256 is %s, %s claimed", metastore.ErrInvalidArgument, what, got, st.SHA256)
		}
		return nil
	}
	h := sha256.New()
	var total int64
	for i := range st.Chunks {
		if err := ctx.Err(); err != nil {
			return err
		}
		c, err := d.GetChunk(ctx, st.Version, i)
		if errors.Is(err, metastore.ErrNotFound) {
			return fmt.Errorf("%w: %s: chunk %d is missing", ErrUploadExpired, what, i)
		}
		if err != nil {
			return err
		}
		last := i == st.Chunks-1
		if (!last && len(c) != ChunkSize) || (last && (len(c) < 1 || len(c) > ChunkSize)) {
			return fmt.Errorf("%w: %s does not match its upload: chunk %d holds %d bytes", metastore.ErrInvalidArgument, what, i, len(c))
		}
		h.Write(c)
		total += int64(len(c))
	}
	if total != st.Size {
		return fmt.Errorf("%w: %s does not match its upload: %d bytes uploaded, %d claimed", metastore.ErrInvalidArgument, what, total, st.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != st.SHA256 {
		return fmt.Errorf("%w: %s does not match its upload: its chunks' SHA-256 is %s, %s claimed", metastore.ErrInvalidArgument, what, got, st.SHA256)
	}
	switch _, err := d.GetChunk(ctx, st.Version, st.Chunks); {
	case err == nil:
		return fmt.Errorf("%w: %s does not match its upload: a chunk %d exists beyond the %d claimed", metastore.ErrInvalidArgument, what, st.Chunks, st.Chunks)
	case !errors.Is(err, metastore.ErrNotFound):
		return err
	}
	return nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// maxVouched bounds the uploads a Store remembers having made; beyond it
// the memory is dropped and those uploads are verified by reading them.
const maxVouched = 1 << 16

// vouched remembers the uploads a Store made itself (their path, size,
// chunks and SHA-256 computed by Upload over the bytes it stored), so that
// committing them costs no second read; any other staged file is verified
// by VerifyStaged.
type vouched struct {
	mu sync.Mutex
	m  map[string]uploadSum // by version
}

// uploadSum is what an upload vouches for.
type uploadSum struct {
	path   string
	size   int64
	chunks int
	sha256 string
}

func summary(st Staged) uploadSum {
	return uploadSum{path: st.Path, size: st.Size, chunks: st.Chunks, sha256: st.SHA256}
}

func (v *vouched) add(st Staged) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil || len(v.m) >= maxVouched {
		v.m = map[string]uploadSum{}
	}
	v.m[st.Version] = summary(st)
}

// has reports whether st is exactly an upload this Store made.
func (v *vouched) has(st Staged) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	got, ok := v.m[st.Version]
	return ok && got == summary(st)
}

func (v *vouched) forget(versions []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, ver := range versions {
		delete(v.m, ver)
	}
}
