package s3fs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/metastore"
)

func TestParseURL(t *testing.T) {
	for rest, want := range map[string][2]string{
		"bucket":            {"bucket", ""},
		"bucket/":           {"bucket", ""},
		"bucket/team":       {"bucket", "team"},
		"bucket/team/a/b/":  {"bucket", "team/a/b"},
		"my.bucket-1/x_y.z": {"my.bucket-1", "x_y.z"},
	} {
		b, p, err := s3fs.ParseURL(rest)
		if err != nil || b != want[0] || p != want[1] {
			t.Errorf("ParseURL(%q) = %q, %q, %v; want %q, %q", rest, b, p, err, want[0], want[1])
		}
	}
	for _, rest := range []string{"", "/prefix", "bucket//x", "bucket/a//b", "bucket?region=x", "bucket/p#f"} {
		_, _, err := s3fs.ParseURL(rest)
		if !errors.Is(err, metastore.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "lake: ") {
			t.Errorf("ParseURL(%q) = %v, want a lake: invalid argument error", rest, err)
		}
	}
}
