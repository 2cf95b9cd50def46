package metastore_test

import (
	"errors"
	"strings"
	"testing"

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
