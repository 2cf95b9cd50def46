package s3fs_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/metastore"
)

// TestOwnWriteAsTheCheck: a holder's commit right after its own write of
// the lock record (its acquisition) takes that write as its check and
// reads no record (ownwrite.go); the same commit past the write's age, or
// under a fence whose record this process last wrote with other bytes (a
// release), or after a write of the record whose outcome it does not know,
// reads the record. What it gives up, pinned: a foreign rewrite of the
// record (no newer holder behind it) within the age does not refuse the
// commit, which a holder that then takes the lock over and fences reads;
// past the age it does.
func TestOwnWriteAsTheCheck(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	prefix := fmt.Sprintf("ownwrite/%d", time.Now().UnixNano())
	recordLayout(t, raw, bucket, prefix, datastore.LayoutModelsV5)
	ka := &killAPI{API: raw}
	d, s := openDatastore(t, ka, bucket, prefix)
	// An age no run of this test reaches where the write must count; a
	// short one where it must have passed.
	d.SetOwnWriteAge(time.Minute)
	lockReads := func(f func()) int { return recordReads(ka, prefix, fenceKey, f) }
	put := func(ctx context.Context, fence *datastore.Fence, content string) error {
		t.Helper()
		st, err := s.Upload(ctx, "data/m/1/a", strings.NewReader(content), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Commit(ctx, fence, []datastore.Entry{{Put: &st}})
		return err
	}
	rewrite := func(token uint64) {
		t.Helper()
		if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(prefix + "/r/" + fenceKey + "~"),
			Body: bytes.NewReader(lockRecord(token))}); err != nil {
			t.Fatal(err)
		}
	}
	wantContent := func(s *datastore.Store, want string) {
		t.Helper()
		_, b, err := s.Get(ctx, "data/m/1/a")
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want {
			t.Fatalf("data/m/1/a = %q, want %q", b, want)
		}
	}

	// The acquisition, then a new partition's first commit and a second.
	fence := &datastore.Fence{Key: fenceKey, Token: lockRecord(1)}
	if err := s.Records().CASRecord(ctx, fenceKey, metastore.ExpectAbsent(), fence.Token); err != nil {
		t.Fatal(err)
	}
	if n := lockReads(func() {
		for _, c := range []string{"first", "second"} {
			if err := put(ctx, fence, c); err != nil {
				t.Fatal(err)
			}
		}
	}); n != 0 {
		t.Fatalf("the record read %d time(s) by two commits right after the acquisition, want 0", n)
	}

	// A release by this process: the commit under the held bytes reads the
	// record, at once, and is refused.
	released := []byte(`{"token":1,"held":false}`)
	if err := s.Records().CASRecord(ctx, fenceKey, metastore.ExpectValue(fence.Token), released); err != nil {
		t.Fatal(err)
	}
	if n := lockReads(func() {
		if err := put(ctx, fence, "after the release"); !datastore.IsFenceConflict(err) {
			t.Fatalf("a commit after this process released: %v, want a fence conflict", err)
		}
	}); n != 1 {
		t.Fatalf("the record read %d time(s) after a release, want 1", n)
	}

	// Acquired again (token 2); a foreign rewrite (token 3, no holder
	// behind it) within the age: the commit lands, with no read.
	fence = &datastore.Fence{Key: fenceKey, Token: lockRecord(2)}
	if err := s.Records().CASRecord(ctx, fenceKey, metastore.ExpectValue(released), fence.Token); err != nil {
		t.Fatal(err)
	}
	rewrite(3)
	if n := lockReads(func() {
		if err := put(ctx, fence, "within the age"); err != nil {
			t.Fatalf("a commit within the age of the acquisition, after a foreign rewrite: %v (the gap ownwrite.go writes down: it lands)", err)
		}
	}); n != 0 {
		t.Fatalf("the record read %d time(s) within the age, want 0", n)
	}
	// A holder taking the lock over from the rewritten record, fencing,
	// reads it.
	sB := takeOverAndFence(t, raw, bucket, prefix, lockRecord(3), 4)
	wantContent(sB, "within the age")
	// Under the new holder's fence entry, the old token applies nothing
	// whatever this process remembers.
	if err := put(ctx, fence, "after the takeover"); !datastore.IsFenceConflict(err) {
		t.Fatalf("a commit after a takeover that fenced: %v, want a fence conflict", err)
	}

	// A compare-and-swap of the record that fails forgets what this
	// process wrote: the next commit reads the record.
	d.SetOwnWriteAge(time.Minute)
	fence = &datastore.Fence{Key: fenceKey, Token: lockRecord(5)}
	if err := s.Records().CASRecord(ctx, fenceKey, metastore.ExpectValue(lockRecord(4)), fence.Token); err != nil {
		t.Fatal(err)
	}
	if err := s.Records().CASRecord(ctx, fenceKey, metastore.ExpectValue(lockRecord(99)), lockRecord(6)); err == nil {
		t.Fatal("a compare-and-swap from bytes the record does not hold succeeded")
	}
	if n := lockReads(func() {
		if err := put(ctx, fence, "after a failed swap"); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Fatalf("the record read %d time(s) after a failed swap, want 1", n)
	}

	// Past the age: a foreign rewrite refuses the commit, as the GET sees.
	d.SetOwnWriteAge(100 * time.Millisecond)
	fence = &datastore.Fence{Key: fenceKey, Token: lockRecord(7)}
	if err := s.Records().CASRecord(ctx, fenceKey, metastore.ExpectValue(lockRecord(5)), fence.Token); err != nil {
		t.Fatal(err)
	}
	rewrite(8)
	time.Sleep(150 * time.Millisecond)
	if n := lockReads(func() {
		if err := put(context.WithoutCancel(ctx), fence, "past the age"); !datastore.IsFenceConflict(err) {
			t.Fatalf("a commit past the age after a foreign rewrite: %v, want a fence conflict", err)
		}
	}); n != 1 {
		t.Fatalf("the record read %d time(s) past the age, want 1", n)
	}
	wantContent(s, "after a failed swap")
}

// slowAnswerAPI holds back the answer of each PutObject of a key ending in
// suffix by delay, after the server applied it: a proxy, or a process
// paused, between a write and its answer.
type slowAnswerAPI struct {
	s3fs.API
	suffix string
	delay  time.Duration
}

func (a slowAnswerAPI) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	out, err := a.API.PutObject(ctx, in, o...)
	if in.Key != nil && strings.HasSuffix(*in.Key, a.suffix) {
		time.Sleep(a.delay)
	}
	return out, err
}

// TestOwnWriteHeldBackAnswer: the age of this process's write of its lock
// record counts from the request's sending, not its answer: an
// acquisition whose answer was held back past the age (the record may
// have been released meanwhile) is no check, and the commit reads the
// record; one answered at once is.
func TestOwnWriteHeldBackAnswer(t *testing.T) {
	raw, bucket := s3local.Client(t), s3local.Bucket(t)
	ctx := t.Context()
	for _, c := range []struct {
		delay time.Duration
		reads int
	}{{0, 0}, {300 * time.Millisecond, 1}} {
		prefix := fmt.Sprintf("ownwrite-slow/%d", time.Now().UnixNano())
		recordLayout(t, raw, bucket, prefix, datastore.LayoutModelsV5)
		ka := &killAPI{API: slowAnswerAPI{API: raw, suffix: "/r/" + fenceKey + "~", delay: c.delay}}
		d, s := openDatastore(t, ka, bucket, prefix)
		d.SetOwnWriteAge(200 * time.Millisecond)
		if _, err := s.Put(ctx, "data/m/1/a", strings.NewReader("0"), nil); err != nil {
			t.Fatal(err)
		}
		fence := &datastore.Fence{Key: fenceKey, Token: lockRecord(1)}
		if err := s.Records().CASRecord(ctx, fenceKey, metastore.ExpectAbsent(), fence.Token); err != nil {
			t.Fatal(err)
		}
		n := recordReads(ka, prefix, fenceKey, func() {
			st, err := s.Upload(ctx, "data/m/1/a", strings.NewReader("1"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Commit(ctx, fence, []datastore.Entry{{Put: &st}}); err != nil {
				t.Fatal(err)
			}
		})
		if n != c.reads {
			t.Fatalf("acquisition answered %v after it applied: the commit read the record %d time(s), want %d", c.delay, n, c.reads)
		}
	}
}
