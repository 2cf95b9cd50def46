package s3fs_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
)

// TestInlineHostilePeer (issue 31, hostile peer): a small file lake wrote is
// in its log object and its path index entry for any client to read (a raw
// GET shows the content, base64, under "inline", and no chunk object
// exists); a foreign writer's index entry whose inline content is too
// large, not base64, not what its SHA-256 says, or beside chunks reads as a
// damaged file naming the path, never a panic, while other paths read on;
// a well-formed foreign inline entry reads.
func TestInlineHostilePeer(t *testing.T) {
	s, _, c, bucket := foreignStore(t)
	ctx := t.Context()
	paths := []string{"data/m/1/ok", "data/m/1/large", "data/m/1/type", "data/m/1/liar", "data/m/1/both", "data/m/1/foreign"}
	for _, p := range paths {
		if _, err := s.Put(ctx, p, strings.NewReader("hello"), nil); err != nil {
			t.Fatal(err)
		}
	}
	get := func(key string) []byte {
		t.Helper()
		o, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String(key)})
		if err != nil {
			t.Fatalf("raw GET %s: %v", key, err)
		}
		defer o.Body.Close()
		b, err := io.ReadAll(o.Body)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const b64 = `"inline":"aGVsbG8="` // base64 of "hello"
	if b := get("lake/ds/l/m%2F1/00000000000000000001"); !bytes.Contains(b, []byte(b64)) || bytes.Contains(b, []byte(`"chunks"`)) {
		t.Fatalf("raw GET of the first log object = %s; want the content inline and no chunks", b)
	}
	idx := get("lake/ds/f/data/m/1/ok~")
	if !bytes.Contains(idx, []byte(b64)) {
		t.Fatalf("raw GET of the path index entry = %s; want the content inline", idx)
	}
	var entry map[string]any
	if err := json.Unmarshal(idx, &entry); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String("lake/ds/c/")})
	if err != nil || len(list.Contents) != 0 {
		t.Fatalf("chunk objects after committing small files: %d, %v; want none", len(list.Contents), err)
	}
	u, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String("lake/ds/u/")})
	if err != nil || len(u.Contents) != 0 {
		t.Fatalf("upload intents after committing small files: %d, %v; want none", len(u.Contents), err)
	}

	sum := func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
	forge := func(path string, change map[string]any) {
		t.Helper()
		key := "lake/ds/f/" + path + "~"
		var e map[string]any
		if err := json.Unmarshal(get(key), &e); err != nil {
			t.Fatal(err)
		}
		for k, v := range change {
			e[k] = v
		}
		body, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		rawPut(t, c, bucket, key, string(body))
	}
	big := bytes.Repeat([]byte("x"), datastore.InlineMax+1)
	forge("data/m/1/large", map[string]any{"inline": big, "size": len(big), "sha256": sum(big)})
	forge("data/m/1/type", map[string]any{"inline": 12345})
	forge("data/m/1/liar", map[string]any{"inline": []byte("HELLO")})
	forge("data/m/1/both", map[string]any{"chunks": 1})
	forge("data/m/1/foreign", map[string]any{"inline": []byte("peer!"), "sha256": sum([]byte("peer!"))})
	for _, p := range []string{"data/m/1/large", "data/m/1/type", "data/m/1/liar", "data/m/1/both"} {
		_, err := s.GetTo(ctx, p, io.Discard)
		if !errors.Is(err, datastore.ErrDamaged) || !strings.Contains(err.Error(), p) {
			t.Fatalf("GetTo(%s) = %v, want a damaged-file error naming it", p, err)
		}
	}
	if _, b, err := s.Get(ctx, "data/m/1/ok"); err != nil || string(b) != "hello" {
		t.Fatalf("Get of another path = %q, %v", b, err)
	}
	if _, b, err := s.Get(ctx, "data/m/1/foreign"); err != nil || string(b) != "peer!" {
		t.Fatalf("Get of a well-formed foreign inline file = %q, %v", b, err)
	}
}

// oneChunk returns s padded to one byte more than InlineMax: a file stored
// in one chunk, for the tests whose subject is chunks (intents, reclaim,
// the objects a namespace holds) rather than inline files.
func oneChunk(s string) string {
	return s + strings.Repeat(".", max(0, datastore.InlineMax+1-len(s)))
}
