package boltfile

import "testing"

func TestAscending(t *testing.T) {
	var walk Ascending
	for _, k := range []string{"", "a", "b", "ba"} {
		if !walk.Next([]byte(k)) {
			t.Fatalf("zero Ascending refused %q after %q", k, walk.Last())
		}
	}
	for _, k := range []string{"ba", "b", ""} {
		if walk.Next([]byte(k)) {
			t.Fatalf("Ascending accepted %q after %q", k, walk.Last())
		}
	}
	after := After([]byte("m"))
	if after.Next([]byte("m")) || after.Next([]byte("a")) {
		t.Fatal("After(m) accepted a key not past m")
	}
	if !after.Next([]byte("m\x00")) || string(after.Last()) != "m\x00" {
		t.Fatalf("After(m) refused m\\x00 (last %q)", after.Last())
	}
}
