//go:build linux

package boltfs

import (
	"os"
	"syscall"
	"unsafe"

	"github.com/lakemeta/lake/internal/boltfile"
)

// dropMapped tells the kernel that the process no longer needs the pages of
// the bolt file's mapping that v, read in tx, lies on wholly
// (MADV_DONTNEED): a streamed read of a large file then does not keep the
// whole file's pages in the process's resident set (issue 26: a 1 GiB
// `data get` held 1 GiB of mapped pages). The pages stay in the page
// cache; a later read faults them back in. It touches only memory inside
// the mapping of a read-only transaction (never Go's heap) and only pages
// that hold nothing but v.
func dropMapped(tx *boltfile.Tx, v []byte) {
	if len(v) == 0 || tx.Writable() {
		return
	}
	base, size := tx.DB().Info().Data, uintptr(tx.Size())
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
	if addr < base || addr+uintptr(len(v)) > base+size {
		return
	}
	ps := uintptr(os.Getpagesize())
	start, end := (addr+ps-1)&^(ps-1), (addr+uintptr(len(v)))&^(ps-1)
	if end <= start {
		return
	}
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(v)), start-addr)
	_ = syscall.Madvise(unsafe.Slice((*byte)(p), end-start), syscall.MADV_DONTNEED) // advice only
}

// dropAllMapped is dropMapped for the whole mapping, in a read-only
// transaction (which holds bbolt's mapping in place): after a chunk is
// written, the pages the write touched through the mapping leave the
// process's resident set, so that a streamed put of a large file does not
// keep the file's pages in it either.
func dropAllMapped(tx *boltfile.Tx) {
	if tx.Writable() {
		return
	}
	base, size := tx.DB().Info().Data, uintptr(tx.Size())
	ps := uintptr(os.Getpagesize())
	size &^= ps - 1
	if base == 0 || size == 0 {
		return
	}
	syscall.Syscall(syscall.SYS_MADVISE, base, size, syscall.MADV_DONTNEED) // advice only: its error is ignored
}
