package s3fs_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// TestForeignIndexEntryClashes: a client that is not lake puts index
// entries with a raw PutObject (no log object, no head). lake's commits
// still meet them: a file below one, or over one, is refused naming both
// paths (issue 27).
func TestForeignIndexEntryClashes(t *testing.T) {
	raw, bucket, s := rawStore(t, "lake/ds")
	for _, p := range []string{"data/t/i/x", "top/a/b"} {
		body := `{"path":"` + p + `","version":"00","sha256":"e3b0","pos":1,"time":"2026-01-01T00:00:00Z"}`
		_, err := raw.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("lake/ds/f/" + p + "~"),
			Body: bytes.NewReader([]byte(body))})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range [][2]string{
		{"data/t/i/x/y", "data/t/i/x"}, // below it
		{"top/a", "top/a/b"},           // over it
	} {
		_, err := s.Put(t.Context(), c[0], strings.NewReader("x"), nil)
		cl, ok := datastore.AsClash(err)
		if !ok || !errors.Is(err, metastore.ErrConflict) || cl.Path != c[0] || cl.Other != c[1] {
			t.Fatalf("put %s beside a foreign %s: %v", c[0], c[1], err)
		}
	}
}
