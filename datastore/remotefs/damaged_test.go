package remotefs_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
)

// TestDamagedFileThroughNode (issue 26, row 1): an entry that claims a
// petabyte for five bytes, committed on the node's own driver (as a writer
// older than the node's checks could have), is a damaged-file error for
// that path on the client, with no allocation of what it claims; other
// paths read on.
func TestDamagedFileThroughNode(t *testing.T) {
	url, data := nodeWithData(t)
	ctx, d := t.Context(), data.Driver()
	sum := sha256.Sum256([]byte("hello"))
	st := datastore.Staged{Path: "data/t/i/huge", Version: strings.Repeat("ab", 16), Size: 1125899906842624, Chunks: 1,
		SHA256: hex.EncodeToString(sum[:]), Meta: []byte{}, Started: data.Now()}
	if err := d.BeginUpload(ctx, st); err != nil {
		t.Fatal(err)
	}
	if err := d.PutChunk(ctx, st.Version, 0, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Commit(ctx, nil, []datastore.Entry{{Put: &st}}, data.Now()); err != nil {
		t.Fatal(err)
	}
	c := open(t, url)
	if _, err := c.Put(ctx, "data/t/i/ok", strings.NewReader("ok"), nil); err != nil {
		t.Fatal(err)
	}
	_, err := c.GetTo(ctx, "data/t/i/huge", io.Discard)
	if !errors.Is(err, datastore.ErrDamaged) || !strings.Contains(err.Error(), `"data/t/i/huge"`) {
		t.Fatalf("GetTo = %v, want a damaged-file error naming the path", err)
	}
	if _, b, err := c.Get(ctx, "data/t/i/ok"); err != nil || string(b) != "ok" {
		t.Fatalf("Get of another path = %q, %v", b, err)
	}
}
