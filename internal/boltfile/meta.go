package boltfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// The on-disk shape of a bbolt meta page, as bbolt v1.5.0 writes it
// (internal/common/meta.go and page.go): a 16-byte page header (id u64,
// flags u16, count u16, overflow u32) followed by the meta (magic u32,
// version u32, page size u32, flags u32, root bucket {page u64, sequence
// u64}, freelist page u64, high-water mark u64, txid u64, checksum u64), in
// the machine's byte order.
// The checksum is FNV-64a over the meta bytes before it.
// NB: this is bbolt's file format; it must not change.
const (
	pageHeaderSize  = 16
	metaSize        = 64
	metaChecksumEnd = 56 // the checksum covers the meta up to here
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	metaPageFlag    = 0x04
	noFreelist      = ^uint64(0)
	minPageSize     = 1024
	maxPageSize     = 1 << 24 // bbolt looks for the second meta page up to 16 MiB
)

// fileMeta is one decoded meta page.
type fileMeta struct {
	pageSize uint32
	root     uint64 // the root bucket's page
	freelist uint64
	hwm      uint64 // pages below it are in use or free; the file holds at least hwm pages
	txid     uint64
}

// fileShape is what the two meta pages say about a file: its page size and
// the meta bbolt will use (the valid one with the higher txid).
type fileShape struct {
	size     int64
	pageSize int
	active   fileMeta
	// torn describes the one invalid meta page, if any: bbolt opens the
	// file from the other (see readShape).
	torn string
}

// errEmptyFile is what readShape reports for a file of zero bytes.
var errEmptyFile = errors.New("the file is empty (0 bytes)")

// readShape checks what can be checked cheaply before bbolt maps the file,
// reading it with plain reads (never through a map, so a short file cannot
// fault): at least one meta page must be valid (magic, version, checksum, page
// size, page header), two valid ones must agree on the page size, and the file must be at least as
// long as the high-water mark of the meta bbolt will use, since bbolt would
// otherwise fault on the first page past the end. The file is opened read-only
// and never changed.
func readShape(path string) (fileShape, error) {
	f, err := os.Open(path)
	if err != nil {
		return fileShape{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fileShape{}, err
	}
	size := st.Size()
	if size == 0 {
		return fileShape{}, errEmptyFile
	}
	m0, err0 := readMeta(f, 0, 0)
	var m1 fileMeta
	var err1 error
	if err0 == nil {
		m1, err1 = readMeta(f, int64(m0.pageSize), 1)
	} else {
		// Without the first meta page the page size is unknown: look for the
		// second one where bbolt does, at every power of two from 1 KiB.
		err1 = errors.New("not found at any page size")
		for pos := int64(minPageSize); pos <= maxPageSize && pos < size; pos *= 2 {
			if m, err := readMeta(f, pos, 1); err == nil {
				m1, err1 = m, nil
				break
			}
		}
	}
	switch {
	case err0 != nil && err1 != nil:
		if errors.Is(err0, errNoMagic) {
			return fileShape{}, fmt.Errorf("no valid meta page (%d bytes): it is not a bbolt file, or both its meta pages are damaged", size)
		}
		return fileShape{}, fmt.Errorf("meta page 0: %v; meta page 1: %v", err0, err1)
	case err0 == nil && err1 == nil && m0.pageSize != m1.pageSize:
		return fileShape{}, fmt.Errorf("the meta pages disagree on the page size (%d and %d bytes)", m0.pageSize, m1.pageSize)
	}
	// One invalid meta page is what a crash during a commit's last write
	// leaves: bbolt writes the two in turn and falls back to the other, whose
	// transaction is the last one acknowledged, and the next commit rewrites
	// the torn one. Refusing it would turn a power cut into a dead store.
	var active fileMeta
	var torn string
	switch {
	case err0 != nil:
		active, torn = m1, fmt.Sprintf("meta page 0: %v (a torn write? bbolt uses meta page 1, and the next commit rewrites it)", err0)
	case err1 != nil:
		active, torn = m0, fmt.Sprintf("meta page 1: %v (a torn write? bbolt uses meta page 0, and the next commit rewrites it)", err1)
	default:
		active = m0
		if m1.txid > m0.txid {
			active = m1
		}
	}
	// Divide rather than multiply: a forged high-water mark must not overflow.
	if active.hwm > uint64(size)/uint64(active.pageSize) {
		return fileShape{}, fmt.Errorf("the file is %d bytes but its meta page says it holds %d pages of %d bytes: it was truncated", size, active.hwm, active.pageSize)
	}
	return fileShape{size: size, pageSize: int(active.pageSize), active: active, torn: torn}, nil
}

var errNoMagic = errors.New("no bbolt magic number")

// readMeta reads and validates the meta page number id at offset pos.
func readMeta(r io.ReaderAt, pos int64, id uint64) (fileMeta, error) {
	var buf [pageHeaderSize + metaSize]byte
	if n, err := r.ReadAt(buf[:], pos); n < len(buf) {
		if err == nil || errors.Is(err, io.EOF) {
			return fileMeta{}, errors.New("the file ends inside it")
		}
		return fileMeta{}, err
	}
	ne := binary.NativeEndian
	m := buf[pageHeaderSize:]
	switch {
	case ne.Uint32(m[0:]) != boltMagic:
		return fileMeta{}, errNoMagic
	case ne.Uint32(m[4:]) != boltVersion:
		return fileMeta{}, fmt.Errorf("bbolt format version %d, want %d", ne.Uint32(m[4:]), boltVersion)
	}
	h := fnv.New64a()
	h.Write(m[:metaChecksumEnd])
	if h.Sum64() != ne.Uint64(m[metaChecksumEnd:]) {
		return fileMeta{}, errors.New("checksum mismatch")
	}
	fm := fileMeta{
		pageSize: ne.Uint32(m[8:]),
		root:     ne.Uint64(m[16:]),
		freelist: ne.Uint64(m[32:]),
		hwm:      ne.Uint64(m[40:]),
		txid:     ne.Uint64(m[48:]),
	}
	ps := fm.pageSize
	switch {
	case ps < minPageSize || ps > maxPageSize || ps&(ps-1) != 0:
		return fileMeta{}, fmt.Errorf("page size %d is not a power of two from %d to %d", ps, minPageSize, maxPageSize)
	case id == 1 && int64(ps) != pos:
		return fileMeta{}, fmt.Errorf("page size %d, but the page sits at offset %d", ps, pos)
	case ne.Uint64(buf[0:]) != id || ne.Uint16(buf[8:])&metaPageFlag == 0:
		return fileMeta{}, errors.New("its page header does not identify it as a meta page")
	case fm.txid%2 != id:
		return fileMeta{}, fmt.Errorf("transaction %d belongs on the other meta page", fm.txid)
	case fm.hwm < 2 || fm.root >= fm.hwm || (fm.freelist >= fm.hwm && fm.freelist != noFreelist):
		return fileMeta{}, fmt.Errorf("root page %d or freelist page %d lies beyond the high-water mark %d", fm.root, fm.freelist, fm.hwm)
	}
	return fm, nil
}
