package datastore

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"unicode/utf8"

	"github.com/lakemeta/lake/metastore"
)

// cursorVersion starts every cursor. NB: must not change.
const cursorVersion = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeCursor seals a driver position with the backend and prefix it was
// issued for and a checksum, so a cursor used elsewhere is refused.
func encodeCursor(backend, prefix string, pos []byte) string {
	var b []byte
	b = append(b, cursorVersion)
	for _, f := range [][]byte{[]byte(backend), []byte(prefix), pos} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s, backend, prefix string) ([]byte, error) {
	bad := func(why string) ([]byte, error) {
		return nil, fmt.Errorf("%w: %s", metastore.ErrInvalidCursor, why)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 5 {
		return bad("not a datastore cursor")
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum || body[0] != cursorVersion {
		return bad("corrupted or from another version")
	}
	body = body[1:]
	var fields [3][]byte
	for i := range fields {
		n, k := binary.Uvarint(body)
		if k <= 0 || uint64(len(body)-k) < n {
			return bad("truncated")
		}
		fields[i], body = body[k:k+int(n)], body[k+int(n):]
	}
	if string(fields[0]) != backend {
		return bad(fmt.Sprintf("issued by backend %q, not %q", fields[0], backend))
	}
	if !bytes.Equal(fields[1], []byte(prefix)) {
		return bad(fmt.Sprintf("issued for prefix %q, not %q", fields[1], prefix))
	}
	return fields[2], nil
}

func utf8Valid(s string) bool { return utf8.ValidString(s) }
