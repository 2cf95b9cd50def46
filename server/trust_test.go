package server

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// hostileUpload records an upload intent and PUTs content as one chunk with
// raw HTTP, as any program written against docs/node.md could.
func hostileUpload(t *testing.T, n *node, path, version, content string) {
	t.Helper()
	body := fmt.Sprintf(`{"Path":%q,"Version":%q,"Meta":"","Started":%q}`, path, version, time.Now().UTC().Format(time.RFC3339Nano))
	want(t, "upload intent", n.call(t, "POST", dataPath(nodeapi.DataUpload, ""), []byte(body)), 204, "")
	want(t, "chunk 0", n.call(t, "PUT", dataPath(nodeapi.DataChunk, "version="+version+"&i=0"), []byte(content)), 204, "")
}

func hostileCommit(t *testing.T, n *node, path, version string, size int64, chunks int, sum string) reply {
	t.Helper()
	body := fmt.Sprintf(`{"entries":[{"Put":{"Path":%q,"Version":%q,"Size":%d,"Chunks":%d,"SHA256":%q,"Meta":""}}],"now":%q}`,
		path, version, size, chunks, sum, time.Now().UTC().Format(time.RFC3339Nano))
	return n.call(t, "POST", dataPath(nodeapi.DataCommit, ""), []byte(body))
}

// TestNodeProvesCommits (issue 26, row 1): the node refuses a commit whose
// size, chunk count or SHA-256 does not match the chunks it holds, whatever
// the client claims; nothing applies and the path stays readable.
func TestNodeProvesCommits(t *testing.T) {
	n, data := newDataNode(t)
	const v = "0123456789abcdef0123456789abcdef"
	hostileUpload(t, n, "data/t/i/f", v, "hello")
	good := sha256.Sum256([]byte("hello"))
	sum := hex.EncodeToString(good[:])
	for _, tc := range []struct {
		name   string
		size   int64
		chunks int
		sum    string
	}{
		{"a petabyte", 1125899906842624, 1, sum},
		{"64 GiB", 68719476736, 1, sum},
		{"a petabyte in as many chunks", 1125899906842624, 1 << 32, sum},
		{"four bytes", 4, 1, sum},
		{"another hash", 5, 1, strings.Repeat("a", 64)},
		{"two chunks", 5, 2, sum},
	} {
		r := hostileCommit(t, n, "data/t/i/f", v, tc.size, tc.chunks, tc.sum)
		want(t, tc.name, r, 400, nodeapi.CodeInvalidArgument)
	}
	if _, err := data.Stat(t.Context(), "data/t/i/f"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("after refused commits Stat = %v, want not found", err)
	}
	r := hostileCommit(t, n, "data/t/i/f", strings.Repeat("9", 32), 5, 1, sum)
	want(t, "a version never uploaded", r, 409, nodeapi.CodeRefused)
	want(t, "the truth", hostileCommit(t, n, "data/t/i/f", v, 5, 1, sum), 200, "")
	if _, b, err := data.Get(t.Context(), "data/t/i/f"); err != nil || string(b) != "hello" {
		t.Fatalf("Get = %q, %v", b, err)
	}
}

// TestNodeChunksImmutable (issue 26, row 2): through the node, a committed
// version's chunk cannot be overwritten (409 conflict; the same bytes are
// a retry, 204), and a chunk for a version without a live upload intent is
// refused (409 refused); the file stays readable.
func TestNodeChunksImmutable(t *testing.T) {
	n, data := newDataNode(t)
	hello := "hello" + strings.Repeat(".", datastore.InlineMax) // in one chunk, not inline
	info, err := data.Put(t.Context(), "data/t/i/f", strings.NewReader(hello), nil)
	if err != nil {
		t.Fatal(err)
	}
	chunk := func(version, i string, b string) reply {
		return n.call(t, "PUT", dataPath(nodeapi.DataChunk, "version="+version+"&i="+i), []byte(b))
	}
	want(t, "other bytes over a committed chunk", chunk(info.Version, "0", "HELLO"), 409, nodeapi.CodeConflict)
	want(t, "the same bytes again", chunk(info.Version, "0", hello), 204, "")
	want(t, "a new chunk of a committed version", chunk(info.Version, "1", "more"), 409, nodeapi.CodeRefused)
	want(t, "a chunk of a version never begun", chunk(strings.Repeat("e", 32), "0", "x"), 409, nodeapi.CodeRefused)
	// A small file is inline (issue 31): its version has no intent, so
	// no chunk can be written under it.
	small, err := data.Put(t.Context(), "data/t/i/small", strings.NewReader("hi"), nil)
	if err != nil || !small.IsInline() {
		t.Fatalf("Put of 2 bytes = %+v, %v; want it inline", small, err)
	}
	want(t, "a chunk of an inline version", chunk(small.Version, "0", "x"), 409, nodeapi.CodeRefused)
	if _, b, err := data.Get(t.Context(), "data/t/i/f"); err != nil || string(b) != hello {
		t.Fatalf("Get after hostile chunk PUTs = %q, %v", b, err)
	}
}
