package metastore_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lakemeta/lake/metastore"
)

func TestFamily(t *testing.T) {
	tests := []struct{ key, want string }{
		{"tbl/orders", "tbl"},
		{"append-operation/orders/000042", "append-operation"},
		{"rootkey", metastore.RootFamily},
		{"/leading", ""},
		{"a/", "a"},
		{"ünï/x", "ünï"},
	}
	for _, tc := range tests {
		if got := metastore.Family(tc.key); got != tc.want {
			t.Errorf("Family(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

func TestValidateKey(t *testing.T) {
	tests := []struct {
		key  string
		want error
	}{
		{"tbl/a", nil},
		{strings.Repeat("k", metastore.MaxKeyBytes), nil},
		{"", metastore.ErrInvalidKey},
		{strings.Repeat("k", metastore.MaxKeyBytes+1), metastore.ErrInvalidKey},
		{"a\x00b", metastore.ErrInvalidKey},
		{"\xc3\x28", metastore.ErrInvalidKey},
		{metastore.ControlPrefix + "x", metastore.ErrReservedKey},
		{strings.TrimSuffix(metastore.ControlPrefix, "/"), nil},
	}
	for _, tc := range tests {
		err := metastore.ValidateKey(tc.key)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("ValidateKey(%.20q) = %v, want %v", tc.key, err, tc.want)
		}
	}
	if err := metastore.ValidateControlKey("tbl/a"); !errors.Is(err, metastore.ErrInvalidKey) {
		t.Errorf("ValidateControlKey of a user key: %v", err)
	}
	if err := metastore.ValidateControlKey(metastore.ControlPrefix + "state"); err != nil {
		t.Errorf("ValidateControlKey: %v", err)
	}
}

func TestExpect(t *testing.T) {
	if !metastore.ExpectAbsent().Matches(false, nil) || metastore.ExpectAbsent().Matches(true, nil) {
		t.Error("ExpectAbsent")
	}
	e := metastore.ExpectValue(nil)
	if e.Absent() || !e.Matches(true, []byte{}) || e.Matches(false, nil) || e.Matches(true, []byte("x")) {
		t.Error("ExpectValue(nil) must mean present and empty")
	}
	var zero metastore.Expect
	if !zero.Absent() {
		t.Error("the zero Expect must mean absent")
	}
}

// FuzzValidateKey: validation never panics, and every accepted key obeys
// the rules the backends rely on.
func FuzzValidateKey(f *testing.F) {
	for _, s := range []string{"tbl/a", "", "__lake__/x", "a\x00b", "\xff", strings.Repeat("é", 600), "root"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := metastore.ValidateKey(key)
		if err != nil {
			if !errors.Is(err, metastore.ErrInvalidKey) && !errors.Is(err, metastore.ErrReservedKey) {
				t.Fatalf("ValidateKey(%q) = %v: not a key error", key, err)
			}
			return
		}
		if key == "" || len(key) > metastore.MaxKeyBytes || strings.ContainsRune(key, 0) || !utf8.ValidString(key) || metastore.IsControlKey(key) {
			t.Fatalf("ValidateKey accepted %q", key)
		}
		if fam := metastore.Family(key); !strings.HasPrefix(key, fam) && fam != metastore.RootFamily {
			t.Fatalf("Family(%q) = %q", key, fam)
		}
	})
}
