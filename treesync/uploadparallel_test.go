package treesync_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/inflight"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/treesync"
)

// slowChunkAPI holds each PutObject of a chunk (a key under PREFIX/c/) in
// its gauge; the server still answers every request.
type slowChunkAPI struct {
	s3fs.API
	chunks string
	gauge  *inflight.Gauge
}

func (a *slowChunkAPI) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if !strings.HasPrefix(aws.ToString(in.Key), a.chunks) {
		return a.API.PutObject(ctx, in, opts...)
	}
	defer a.gauge.Enter()()
	return a.API.PutObject(ctx, in, opts...)
}

// TestPushUploadsInParallel (issue 31): a push of many files stored in
// chunks uploads several at once (at most 8), not one after another, and
// the outcome is the sequential one: every file is committed with its own
// content, and a symbolic link among them is still skipped, named, while
// the rest is pushed.
func TestPushUploadsInParallel(t *testing.T) {
	api := &slowChunkAPI{API: s3local.Client(t), chunks: "up/c/", gauge: inflight.New(30 * time.Millisecond)}
	s, _ := openS3Store(t, api, s3local.Bucket(t), "up")
	tr := newTree(t, s, nil)
	const files = 24
	content := func(i int) string { return strings.Repeat(fmt.Sprint(i, " "), datastore.InlineMax) } // past inline: chunks
	for i := range files {
		write(t, tr, fmt.Sprintf("data/t/m/f%02d", i), content(i))
	}
	if err := os.Symlink(filepath.Join(tr.Dir(), "data/t/m/f00"), filepath.Join(tr.Dir(), "data/t/m/link")); err != nil {
		t.Fatal(err)
	}
	rep, err := tr.Sync(t.Context(), treesync.Scope{})
	var sk *treesync.SkippedError
	if !errors.As(err, &sk) || len(sk.Skipped) != 1 || sk.Skipped[0].Path != "data/t/m/link" {
		t.Fatalf("sync: %v; want the link skipped, named", err)
	}
	if rep.Uploaded != files {
		t.Fatalf("%d files uploaded, want %d", rep.Uploaded, files)
	}
	if most := api.gauge.Most(); most < 2 || most > 8 {
		t.Fatalf("at most %d chunks were uploaded at once; want 2 to 8", most)
	}
	for i := range files {
		wantRemote(t, s, fmt.Sprintf("data/t/m/f%02d", i), content(i))
	}
	wantRemote(t, s, "data/t/m/link", "")
}

// failOnceAPI refuses one PutObject of a chunk (the first after armed),
// as a store that fails a request the retries cannot save.
type failOnceAPI struct {
	s3fs.API
	chunks string
	armed  atomic.Bool
}

func (a *failOnceAPI) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if strings.HasPrefix(aws.ToString(in.Key), a.chunks) && a.armed.CompareAndSwap(true, false) {
		return nil, errors.New("injected: the store refused a chunk")
	}
	return a.API.PutObject(ctx, in, opts...)
}

// TestPushUploadFails: an upload that fails among many going at once fails
// the sync with its error and commits nothing; the next sync pushes every
// file.
func TestPushUploadFails(t *testing.T) {
	api := &failOnceAPI{API: s3local.Client(t), chunks: "upf/c/"}
	s, _ := openS3Store(t, api, s3local.Bucket(t), "upf")
	tr := newTree(t, s, nil)
	const files = 24
	content := func(i int) string { return strings.Repeat(fmt.Sprint(i, " "), datastore.InlineMax) }
	for i := range files {
		write(t, tr, fmt.Sprintf("data/t/m/f%02d", i), content(i))
	}
	api.armed.Store(true)
	if _, err := tr.Sync(t.Context(), treesync.Scope{}); err == nil || !strings.Contains(err.Error(), "refused a chunk") {
		t.Fatalf("sync with a failed upload: %v; want the upload's error", err)
	}
	if h, err := s.Head(t.Context(), "t/m"); err != nil || h.Seq != 0 {
		t.Fatalf("after the failed sync the model's head is %+v, %v; want nothing committed", h, err)
	}
	rep := sync(t, tr, treesync.Scope{})
	if rep.Uploaded != files {
		t.Fatalf("the next sync uploaded %d files, want %d", rep.Uploaded, files)
	}
	for i := range files {
		wantRemote(t, s, fmt.Sprintf("data/t/m/f%02d", i), content(i))
	}
}
