//go:build !linux

package boltfs

import bolt "go.etcd.io/bbolt"

// dropMapped is a no-op where madvise is not wired (see dropmap_linux.go).
func dropMapped(*bolt.Tx, []byte) {}
