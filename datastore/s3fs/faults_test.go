package s3fs_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/lock"
)

// faultyAPI sends every third conditional PutObject twice, returning the
// second answer (the SDK's own retry after a lost response: the first
// attempt applied, so the retry gets 412), and answers every fifth one with
// 409 ConditionalRequestConflict without sending it.
type faultyAPI struct {
	s3fs.API
	mu                sync.Mutex
	n                 int
	retried, conflict int
}

func conflict409() error {
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: http.StatusConflict}},
		Err:      &smithy.GenericAPIError{Code: "ConditionalRequestConflict", Message: "injected"},
	}}
}

func (f *faultyAPI) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if in.IfMatch == nil && in.IfNoneMatch == nil {
		return f.API.PutObject(ctx, in, opts...)
	}
	f.mu.Lock()
	f.n++
	n := f.n
	f.mu.Unlock()
	switch {
	case n%5 == 0:
		f.mu.Lock()
		f.conflict++
		f.mu.Unlock()
		return nil, conflict409()
	case n%3 == 0:
		if _, err := f.API.PutObject(ctx, in, opts...); err != nil {
			return nil, err // the first attempt failed for real: no retry to model
		}
		in.Body.(io.Seeker).Seek(0, io.SeekStart)
		f.mu.Lock()
		f.retried++
		f.mu.Unlock()
		return f.API.PutObject(ctx, in, opts...)
	}
	return f.API.PutObject(ctx, in, opts...)
}

// TestConditionalWritesSettle: with the responses of applied conditional
// writes lost and retried (answered 412) and 409s injected, every commit and
// every lock operation reports success, and each change is applied once, at
// dense positions.
func TestConditionalWritesSettle(t *testing.T) {
	f := &faultyAPI{API: s3local.Client(t)}
	d, err := s3fs.Open(t.Context(), f, s3fs.Options{Bucket: s3local.Bucket(t), Prefix: "faults"})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	const n = 30
	for i := range n {
		if _, err := s.Put(t.Context(), fmt.Sprintf("data/f/1/p%02d", i%7), strings.NewReader(fmt.Sprint(i)), nil); err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
	}
	if h, err := s.Head(t.Context(), "f/1"); err != nil || h.Seq != n {
		t.Fatalf("head = %+v, %v; want %d changes, each applied once", h, err, n)
	}
	ch, upTo, err := s.Changes(t.Context(), "f/1", 0, 1000)
	if err != nil || len(ch) != 7 || upTo != n {
		t.Fatalf("feed = %d entries up to %d (%v); want 7 paths up to %d", len(ch), upTo, err, n)
	}
	l, err := lock.New(dslock.New(datastore.New(d)), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		ls, err := l.Acquire(t.Context(), "ns/settle")
		if err != nil {
			t.Fatalf("acquisition %d: %v", i, err)
		}
		if err := ls.Release(t.Context()); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	if f.retried < 10 || f.conflict < 5 {
		t.Fatalf("only %d retried writes and %d conflicts injected", f.retried, f.conflict)
	}
	t.Logf("%d writes retried after applying, %d 409s", f.retried, f.conflict)
}
