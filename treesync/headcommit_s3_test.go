package treesync_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/treesync"
)

// headReplaceFault fails, while armed, every conditional replace of a
// partition's head (a PutObject If-Match of a key under h/ that is no mark
// or record): a committer whose log object is created and whose head is
// not written.
type headReplaceFault struct {
	s3fs.API
	armed atomic.Bool
}

func (f *headReplaceFault) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	key := aws.ToString(in.Key)
	if f.armed.Load() && in.IfMatch != nil && strings.Contains(key, "/h/") && !strings.Contains(key, "!") {
		return nil, fmt.Errorf("%w: the head's write failed", metastore.ErrUnavailable)
	}
	return f.API.PutObject(ctx, in, o...)
}

// TestUnacknowledgedCommitOnS3 (issue 31, layout models-v5): a sync whose
// commit's head could not be written fails, and no reader sees its commit;
// the tree's next sync rolls it forward before its own commit and pushes
// the file again, after which another tree pulls it.
func TestUnacknowledgedCommitOnS3(t *testing.T) {
	ctx := t.Context()
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	f := &headReplaceFault{API: raw}
	s, _ := openS3Store(t, f, bucket, "tu")
	if s.Layout() != datastore.LayoutModelsV5 {
		t.Fatalf("layout %s, want models-v5", s.Layout())
	}
	a := newTree(t, s, nil)
	write(t, a, "notes/a", "one")
	sync(t, a, treesync.Scope{}) // the partition's head exists: the next commit replaces it
	write(t, a, "notes/a", "two")
	f.armed.Store(true)
	if _, err := a.Sync(ctx, treesync.Scope{}); !errors.Is(err, metastore.ErrUnavailable) {
		t.Fatalf("the sync whose head was not written: %v; want backend unavailable", err)
	}
	f.armed.Store(false)
	wantRemote(t, s, "notes/a", "one") // its commit is read by no one
	sync(t, a, treesync.Scope{})
	wantRemote(t, s, "notes/a", "two")
	h, err := s.Head(ctx, "notes")
	if err != nil || h.Seq != 3 {
		t.Fatalf("head of notes: %+v, %v; want 3 (the commit rolled forward, then the push again)", h, err)
	}
	b := newTree(t, s, nil)
	sync(t, b, treesync.Scope{})
	wantFile(t, b, "notes/a", "two")
	st, err := a.Status(ctx, treesync.Scope{})
	if err != nil || len(st.Local) != 0 || len(st.Remote) != 0 {
		t.Fatalf("the first tree's status after: %+v, %v; want clean", st, err)
	}
}
