package lock

import (
	"fmt"
	"math"
	"strconv"
)

// Token is a fencing token: generation<<32 | sequence. Every acquisition of
// a name gets a token strictly greater than every earlier one for that name,
// across releases, crashes, forced releases and deleted records, so a
// resource that remembers the largest token it accepted can refuse a stale
// holder by comparing two integers.
type Token uint64

// Generation is the high half: the namespace's generation counter when the
// lock record was created.
func (t Token) Generation() uint32 { return uint32(t >> 32) }

// Sequence is the low half: acquisitions of the record since it was created.
func (t Token) Sequence() uint32 { return uint32(t) }

// String renders the token in decimal, as LAKE_FENCING_TOKEN carries it.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }

// ParseToken parses a decimal token.
func ParseToken(s string) (Token, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("token %q is not a positive decimal integer", s)
	}
	return Token(v), nil
}

func makeToken(gen, seq uint32) Token { return Token(uint64(gen)<<32 | uint64(seq)) }

// next is the token of the next acquisition of the same record; ok is false
// when the sequence would overflow and a new generation is needed.
func (t Token) next() (Token, bool) {
	if t.Sequence() == math.MaxUint32 {
		return 0, false
	}
	return t + 1, true
}
