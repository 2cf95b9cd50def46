package dstest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"

	"github.com/lakemeta/lake/datastore"
)

// ForeignPut commits content at path p, with metadata meta, through s's
// driver directly, past every check of the Store (a path no lake client
// may write, metadata that is not what lake writes), as a foreign client
// of the backend would: the hostile peer of the tests of what readers do
// with entries lake did not write. The content is one chunk.
func ForeignPut(ctx context.Context, s *datastore.Store, p, content string, meta []byte) error {
	d := s.Driver()
	var v [16]byte
	rand.Read(v[:])
	sum := sha256.Sum256([]byte(content))
	st := datastore.Staged{Path: p, Version: hex.EncodeToString(v[:]), Size: int64(len(content)), Chunks: 1,
		SHA256: hex.EncodeToString(sum[:]), Meta: meta, Started: s.Now()}
	if err := d.BeginUpload(ctx, st); err != nil {
		return err
	}
	if err := d.PutChunk(ctx, st.Version, 0, []byte(content)); err != nil {
		return err
	}
	_, err := d.Commit(ctx, nil, []datastore.Entry{{Put: &st}}, s.Now())
	return err
}
