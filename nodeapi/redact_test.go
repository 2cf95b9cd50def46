package nodeapi_test

import (
	"strings"
	"testing"

	"github.com/lakemeta/lake/nodeapi"
)

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://u:s3cret@h:7070/x":   "http://REDACTED@h:7070/x",
		"https://tok3n@h":            "https://REDACTED@h",
		"http://a@b:s3cret@h:x:y/%z": "http://REDACTED@h:x:y/%z",
		"u:s3cret@h:7070":            "REDACTED@h:7070",
		"http://h:7070/a@b":          "http://h:7070/a@b",
		"http://h:7070":              "http://h:7070",
	} {
		got := nodeapi.RedactURL(in)
		if got != want || strings.Contains(got, "s3cret") || strings.Contains(got, "tok3n") {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedactURLNested(t *testing.T) {
	in := "dynamodb://t?endpoint=http://admin:s3cret@h:1&x=https://tok3n@g/p"
	want := "dynamodb://t?endpoint=http://REDACTED@h:1&x=https://REDACTED@g/p"
	if got := nodeapi.RedactURL(in); got != want {
		t.Fatalf("RedactURL(%q) = %q, want %q", in, got, want)
	}
}
