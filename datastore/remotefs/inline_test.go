package remotefs_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/remotefs"
	"github.com/lakemeta/lake/metastore"
)

// TestInlineThroughNode (issue 31): inline content passes through a node as
// it is, and the node is its trust boundary: a client that sends its own
// commit (the driver, past the client Store's checks) with inline content
// that is not what its SHA-256 says, or more than InlineMax bytes, is
// refused with nothing applied; an inline entry the node's store holds that
// does not match (a writer older than the node's checks) is a damaged file
// on the client, other paths reading on.
func TestInlineThroughNode(t *testing.T) {
	url, data := nodeWithData(t)
	ctx := t.Context()
	c := open(t, url)
	info, err := c.Put(ctx, "data/t/i/ok", strings.NewReader("hello"), nil)
	if err != nil || !info.IsInline() {
		t.Fatalf("Put of 5 bytes through the node = %+v, %v; want it inline", info, err)
	}
	if got, err := data.Stat(ctx, "data/t/i/ok"); err != nil || string(got.Inline) != "hello" {
		t.Fatalf("the node's store holds %+v, %v; want the content inline", got, err)
	}
	sum := func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
	big := []byte(strings.Repeat("x", datastore.InlineMax+1))
	for name, st := range map[string]datastore.Staged{
		"a SHA-256 of other bytes": {Inline: []byte("forged"), Size: 6, SHA256: sum([]byte("honest"))},
		"more than InlineMax":      {Inline: big, Size: int64(len(big)), SHA256: sum(big)},
		"a size not its content's": {Inline: []byte("abc"), Size: 2, SHA256: sum([]byte("abc"))},
	} {
		st.Path, st.Version, st.Meta, st.Started = "data/t/i/forged", strings.Repeat("cd", 16), []byte{}, data.Now()
		_, err := c.Driver().Commit(ctx, nil, []datastore.Entry{{Put: &st}}, data.Now())
		if !errors.Is(err, metastore.ErrInvalidArgument) {
			t.Errorf("a client's own commit of inline content with %s: %v, want invalid argument", name, err)
		}
	}
	if _, err := c.Stat(ctx, "data/t/i/forged"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("after the refused commits Stat = %v, want not found", err)
	}
	liar := datastore.Staged{Path: "data/t/i/liar", Version: strings.Repeat("ef", 16), Inline: []byte("HELLO"), Size: 5,
		SHA256: sum([]byte("hello")), Meta: []byte{}, Started: data.Now()}
	if _, err := data.Driver().Commit(ctx, nil, []datastore.Entry{{Put: &liar}}, data.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetTo(ctx, "data/t/i/liar", io.Discard); !errors.Is(err, datastore.ErrDamaged) || !strings.Contains(err.Error(), "data/t/i/liar") {
		t.Fatalf("GetTo of a damaged inline file = %v, want a damaged-file error naming it", err)
	}
	if _, b, err := c.Get(ctx, "data/t/i/ok"); err != nil || string(b) != "hello" {
		t.Fatalf("Get of another path = %q, %v", b, err)
	}
}

// TestInlineSpillsPastTheBody (issue 31): a commit through a node whose
// small files' inline content would make its request larger than the node
// takes sends those past the bound as chunks instead, still in one atomic
// commit, and every file reads back whole.
func TestInlineSpillsPastTheBody(t *testing.T) {
	defer remotefs.SetMaxInlineBody(10)()
	url, data := nodeWithData(t)
	ctx := t.Context()
	c := open(t, url)
	var es []datastore.Entry
	for _, p := range []string{"data/t/i/a", "data/t/i/b", "data/t/i/c"} {
		st, err := c.Upload(ctx, p, strings.NewReader("content of "+p), nil)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, datastore.Entry{Put: &st})
	}
	if _, err := c.Commit(ctx, nil, es); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"data/t/i/a", "data/t/i/b", "data/t/i/c"} {
		info, b, err := c.Get(ctx, p)
		if err != nil || string(b) != "content of "+p {
			t.Fatalf("Get(%s) = %q, %v", p, b, err)
		}
		if stored, err := data.Stat(ctx, p); err != nil || stored.IsInline() || stored.Chunks != 1 || info.Chunks != 1 {
			t.Fatalf("%s is stored %+v, %v; want it spilled to one chunk (the bound is 10 bytes)", p, stored, err)
		}
	}
}
