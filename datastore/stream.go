package datastore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/lakemeta/lake/metastore"
)

// DamagedError is the error of a read whose stored file does not match its
// metadata: a chunk missing from a version that is still the latest, a
// chunk of the wrong size, more or fewer bytes than its Size, another
// SHA-256, or metadata no upload can have (a Size that its Chunks cannot
// hold): which path and version, and what did not match. It concerns that
// path alone (issue 26): other paths read on. It matches ErrDamaged.
type DamagedError struct {
	Path, Version string
	// Why says what did not match.
	Why string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("lake: damaged file %q (version %s): %s", e.Path, e.Version, e.Why)
}

// Unwrap makes a DamagedError match ErrDamaged.
func (e *DamagedError) Unwrap() error { return ErrDamaged }

// chunkGone is a chunk that is not there: its version was reclaimed after a
// newer one replaced it, or the file is damaged (GetTo tells which).
type chunkGone struct {
	i   int
	err error
}

func (c *chunkGone) Error() string { return fmt.Sprintf("chunk %d is missing (%v)", c.i, c.err) }

// GetTo writes the content of the latest version of path to w, one chunk at
// a time, and returns that version's Info. Its memory does not depend on the
// file's size: it holds one chunk (ChunkSize) at a time. It trusts no size:
// each chunk is checked as it arrives (every chunk but the last exactly
// ChunkSize, never more bytes than Size), and the last chunk is written to
// w only once the total size and the SHA-256 match, so that a damaged file
// is never written whole; the error then is a *DamagedError naming path
// (ErrDamaged), and what w got is incomplete and must be discarded. If the
// version it reads is reclaimed under it (a newer version replaced it
// longer than the grace period ago) before anything was written, it reads
// the newer version; after, it fails with metastore.ErrUnavailable: read
// again. A missing or deleted path gives metastore.ErrNotFound.
func (s *Store) GetTo(ctx context.Context, path string, w io.Writer) (Info, error) {
	return s.getTo(ctx, path, w, nil)
}

// getTo is GetTo; rewind, when not nil, discards what w got so that a read
// can start again from the first byte at any point (Get's buffer).
func (s *Store) getTo(ctx context.Context, path string, w io.Writer, rewind func()) (Info, error) {
	var last error
	for range maxGetRetries {
		info, err := s.Stat(ctx, path)
		if err != nil {
			return Info{}, err
		}
		n, err := s.copyVersion(ctx, info, w)
		var gone *chunkGone
		switch {
		case err == nil:
			return info, nil
		case !errors.As(err, &gone):
			return Info{}, err
		}
		last = err
		again, serr := s.Stat(ctx, path)
		if serr == nil && again.Version == info.Version {
			return Info{}, &DamagedError{Path: path, Version: info.Version, Why: gone.Error()}
		}
		if n > 0 {
			if rewind == nil {
				return Info{}, fmt.Errorf("%w: %q was replaced and its version reclaimed while %d bytes of it were written; read again", metastore.ErrUnavailable, path, n)
			}
			rewind()
		}
	}
	return Info{}, fmt.Errorf("%w: %q kept changing under the read (%v)", metastore.ErrUnavailable, path, last)
}

// copyVersion writes info's version to w and returns how many bytes it
// wrote, checking each chunk against info as it arrives.
func (s *Store) copyVersion(ctx context.Context, info Info, w io.Writer) (int64, error) {
	damaged := func(format string, a ...any) error {
		return &DamagedError{Path: info.Path, Version: info.Version, Why: fmt.Sprintf(format, a...)}
	}
	if why := shapeProblem(info.Size, info.Chunks, info.Inline, info.SHA256); why != "" {
		return 0, damaged("its metadata %s", why)
	}
	if info.Chunks == 0 {
		return writeInline(info, w)
	}
	h := sha256.New()
	var total int64
	for i := range info.Chunks {
		c, err := s.d.GetChunk(ctx, info.Version, i)
		if errors.Is(err, metastore.ErrNotFound) {
			return total, &chunkGone{i: i, err: err}
		}
		if err != nil {
			return total, err
		}
		last := i == info.Chunks-1
		if len(c) == 0 || len(c) > ChunkSize || (!last && len(c) != ChunkSize) || total+int64(len(c)) > info.Size {
			return total, damaged("chunk %d holds %d bytes (%d of %d read before it)", i, len(c), total, info.Size)
		}
		h.Write(c)
		if last {
			if total+int64(len(c)) != info.Size {
				return total, damaged("its chunks hold %d bytes, its metadata says %d", total+int64(len(c)), info.Size)
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != info.SHA256 {
				return total, damaged("its content's SHA-256 is %s, its metadata says %s", got, info.SHA256)
			}
		}
		if _, err := w.Write(c); err != nil {
			return total, fmt.Errorf("lake: writing %q: %w", info.Path, err)
		}
		total += int64(len(c))
	}
	return total, nil
}

// writeInline writes the content of an inline (or empty) file, checked
// against its SHA-256 first, so that damaged content is never written.
func writeInline(info Info, w io.Writer) (int64, error) {
	if got := sha256Hex(info.Inline); got != info.SHA256 {
		return 0, &DamagedError{Path: info.Path, Version: info.Version,
			Why: fmt.Sprintf("its inline content's SHA-256 is %s, its metadata says %s", got, info.SHA256)}
	}
	if _, err := w.Write(info.Inline); err != nil {
		return 0, fmt.Errorf("lake: writing %q: %w", info.Path, err)
	}
	return int64(len(info.Inline)), nil
}

// WriteInline writes the content of info to w if it is held in info itself
// (an inline or empty file, IsInline, whose Inline holds its Size bytes and
// which names its SHA-256) and reports whether it was, so that a pull that
// already read info (from Changes or List) reads nothing more; false means
// read it from the store (an Info that only names a path, a file in
// chunks). The content is checked first (shape, size, SHA-256): damage is a
// *DamagedError and nothing is written. It reads no store.
func WriteInline(info Info, w io.Writer) (bool, error) {
	if !info.IsInline() || info.SHA256 == "" || int64(len(info.Inline)) != info.Size {
		return false, nil
	}
	if why := shapeProblem(info.Size, info.Chunks, info.Inline, info.SHA256); why != "" {
		return true, &DamagedError{Path: info.Path, Version: info.Version, Why: "its metadata " + why}
	}
	_, err := writeInline(info, w)
	return true, err
}

// getWhole is Get over GetTo: the whole content in memory, for callers that
// need bytes (small files, tests). It grows with the bytes that arrive, not
// with a claimed size.
func (s *Store) getWhole(ctx context.Context, path string) (Info, []byte, error) {
	var buf bytes.Buffer
	info, err := s.getTo(ctx, path, &buf, buf.Reset)
	if err != nil {
		return Info{}, nil, err
	}
	return info, buf.Bytes(), nil
}
