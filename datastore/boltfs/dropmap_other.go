//go:build !linux

package boltfs

import "github.com/lakemeta/lake/internal/boltfile"

// dropMapped is a no-op where madvise is not wired (see dropmap_linux.go).
func dropMapped(*boltfile.Tx, []byte) {}

// dropAllMapped is a no-op where madvise is not wired.
func dropAllMapped(*boltfile.Tx) {}
