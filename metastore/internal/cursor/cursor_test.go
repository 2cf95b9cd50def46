package cursor

import (
	"bytes"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, c := range []Cursor{
		{Backend: "bolt", Prefix: "", Pos: []byte{0}},
		{Backend: "dynamodb-v2", Prefix: "tbl/ü", Pos: bytes.Repeat([]byte{0xff}, 2000)},
	} {
		got, err := Decode(c.Encode())
		if err != nil || got.Backend != c.Backend || got.Prefix != c.Prefix || !bytes.Equal(got.Pos, c.Pos) {
			t.Fatalf("round trip of %+v: %+v, %v", c, got, err)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := Cursor{Backend: "bolt", Prefix: "tbl/", Pos: []byte("tbl/a")}.Encode()
	for name, s := range map[string]string{
		"empty":     "",
		"not b64":   "***",
		"short":     "AAA",
		"truncated": good[:len(good)-2],
		"extended":  good + "AA",
		"no pos":    Cursor{Backend: "bolt", Prefix: "tbl/"}.Encode(),
	} {
		if _, err := Decode(s); err == nil {
			t.Errorf("%s: Decode(%q) accepted", name, s)
		}
	}
}

// FuzzDecode: Decode never panics, and whatever it accepts re-encodes to
// the same string.
func FuzzDecode(f *testing.F) {
	f.Add(Cursor{Backend: "bolt", Prefix: "tbl/", Pos: []byte("tbl/a")}.Encode())
	f.Add("")
	f.Add("AAAAAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Decode(s)
		if err != nil {
			return
		}
		if c.Encode() != s {
			t.Fatalf("Decode(%q) accepted but re-encodes to %q", s, c.Encode())
		}
	})
}
