// Package cursor is the wire format of lake's page cursors: versioned,
// checksummed, and carrying the backend and prefix they were issued for. It
// is internal so that only the metastore package and its conformance suite
// (which forges cursors to test refusals) see the format.
package cursor

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
)

// cursorVersion is the first byte of every cursor.
// NB: must not change meaning; a new format gets a new version.
const cursorVersion = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Cursor is the decoded form of the opaque cursor string: the backend that
// issued it, the prefix it lists, and the backend's own position.
type Cursor struct {
	Backend string
	Prefix  string
	Pos     []byte
}

// Encode renders c as version | backend | prefix | pos (each length-prefixed
// with a uvarint) | CRC-32C of all that, in unpadded base64url. The checksum
// catches corruption and truncation; it is not a signature, which is why the
// backend still validates the position it receives.
func (c Cursor) Encode() string {
	b := []byte{cursorVersion}
	for _, field := range [][]byte{[]byte(c.Backend), []byte(c.Prefix), c.Pos} {
		b = binary.AppendUvarint(b, uint64(len(field)))
		b = append(b, field...)
	}
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode parses s. Its errors say what is wrong in a few words; the caller
// wraps them with its own error class.
func Decode(s string) (Cursor, error) {
	bad := func(why string) (Cursor, error) {
		return Cursor{}, errors.New(why)
	}
	// The decoder skips line breaks even in strict mode: a cursor with one
	// would be accepted as another string than the one lake issued.
	if strings.ContainsAny(s, "\r\n") {
		return bad("not a cursor issued by lake (bad encoding)")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return bad("not a cursor issued by lake (bad encoding)")
	}
	if len(b) < 1+4 {
		return bad("too short")
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return bad("checksum mismatch (corrupted or truncated)")
	}
	if body[0] != cursorVersion {
		return bad(fmt.Sprintf("unknown version %d", body[0]))
	}
	rest := body[1:]
	var fields [3][]byte
	for i := range fields {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return bad("malformed field")
		}
		fields[i] = rest[k : k+int(n)]
		rest = rest[k+int(n):]
	}
	if len(rest) != 0 {
		return bad("trailing bytes")
	}
	if len(fields[2]) == 0 {
		return bad("empty position")
	}
	return Cursor{Backend: string(fields[0]), Prefix: string(fields[1]), Pos: fields[2]}, nil
}
