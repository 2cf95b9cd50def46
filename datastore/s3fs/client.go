package s3fs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/lakemeta/lake/internal/offers"
	"github.com/lakemeta/lake/metastore"
)

// API is the part of the S3 client the driver uses; *s3.Client implements
// it, and tests wrap it to inject faults.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// widMeta is the user-metadata key of an object's write id: a random id per
// logical write, so that a 412 answered to a retry of that write (the SDK
// retries a request whose response was lost) is told apart from a write of
// someone else by reading the id back.
const widMeta = "lake-wid"

// maxConflictRetries bounds the retries of a 409 ConditionalRequestConflict
// (another conditional write to the key in flight): it says nothing about
// the outcome, so the write is simply sent again.
const maxConflictRetries = 10

// Counts are the requests a driver sent, by kind.
type Counts struct {
	Put, Get, Head, Delete, List int64
}

type counters struct{ put, get, head, del, list atomic.Int64 }

func (c *counters) snapshot() Counts {
	return Counts{c.put.Load(), c.get.Load(), c.head.Load(), c.del.Load(), c.list.Load()}
}

// object is what a read returns.
type object struct {
	body []byte
	etag string
	wid  string
	mod  time.Time
}

// listed is one key of a listing.
type listed struct {
	key  string
	etag string
	mod  time.Time
}

// client is the conditional-request layer over API.
type client struct {
	api    API
	bucket string
	n      counters
	clock  serverClock
	// examined remembers, by log prefix, how far Reclaim has handled the
	// tombstones of a log (see compact) as last read from or written to
	// its mark object (mark.go): shared by every namespace's driver on
	// this client.
	examined sync.Map // string → storedMark
	// fault is the test hook of datastore.WriteFaulter (whole.go); txs
	// caches the commit records found decided (whole.go): both shared by
	// every namespace's driver on this client.
	fault faultHook
	txs   sync.Map // record key → txRecord (done or aborted: final)
	// staging holds the ids of the commits this process is staging
	// (whole.go): a part of one is pending to this process's readers
	// without a GET of its record, which can only say pending or, if
	// another process gave it up, aborted; either way its flip has not
	// happened, and a reader that stops before it reads what it would
	// have read a moment earlier.
	staging sync.Map
	// handoff holds, by driver prefix and partition, the tail a Stat
	// read last, for the next commit of that partition (handoff.go);
	// recent, the copies of its last log objects that ChangedPartitions
	// read in its head, for the feed read that follows (recent.go).
	handoff *offers.Shelf[*tail]
	recent  *offers.Shelf[recentOffer]
	// noRecent: heads are written without copies of their last objects,
	// as a lake before issue 31 wrote them (set by tests of the log
	// reads, export_test.go).
	noRecent bool
	// moves: this process's last commits' head moves and the cursors it
	// last read (cursorover.go), shared by every namespace's driver.
	moves moveLog
	// known: the heads this process read or wrote, by their ETags
	// (knownheads.go), shared by every namespace's driver.
	known headMemory
	// ownWrites: the lock records this process wrote in the last
	// ownWriteAge, by object key (ownwrite.go), shared by every
	// namespace's driver.
	ownWrites *offers.Shelf[[]byte]
}

// newClient returns the client of bucket through api.
func newClient(api API, bucket string) *client {
	return &client{api: api, bucket: bucket, handoff: offers.New[*tail](handoffAge), recent: offers.New[recentOffer](recentAge), ownWrites: offers.New[[]byte](ownWriteAge)}
}

func newWID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func status(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	return errors.As(err, &nsk) || errors.As(err, &nf) || status(err) == http.StatusNotFound
}

func isPrecondition(err error) bool {
	return status(err) == http.StatusPreconditionFailed || code(err) == "PreconditionFailed"
}

func isConditionalConflict(err error) bool {
	return status(err) == http.StatusConflict || code(err) == "ConditionalRequestConflict"
}

// classify maps an error of S3 that is none of the above to a sentinel.
func classify(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("lake: s3 %s %q: %w", op, key, err)
	}
	if c := code(err); c == "NoSuchBucket" {
		return fmt.Errorf("%w: s3 bucket does not exist (%s %q): %v", metastore.ErrNotFound, op, key, err)
	}
	if s := status(err); s == http.StatusForbidden || s == http.StatusBadRequest {
		return fmt.Errorf("%w: s3 %s %q refused: %v", metastore.ErrInvalidArgument, op, key, err)
	}
	return fmt.Errorf("%w: s3 %s %q: %v", metastore.ErrUnavailable, op, key, err)
}

func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(1+mrand.IntN(1<<min(attempt, 6))) * 5 * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// get reads an object, strongly consistent (S3 has been since 2020).
func (c *client) get(ctx context.Context, key string) (object, error) {
	c.n.get.Add(1)
	out, err := c.api.GetObject(ctx, &s3.GetObjectInput{Bucket: &c.bucket, Key: &key}, c.clock.recordDate)
	if err != nil {
		if isNotFound(err) {
			return object{}, metastore.NotFound(key)
		}
		return object{}, classify("GetObject", key, err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(out.Body)
	if err != nil {
		return object{}, fmt.Errorf("%w: s3 GetObject %q: read body: %v", metastore.ErrUnavailable, key, err)
	}
	o := object{body: body, etag: aws.ToString(out.ETag), wid: out.Metadata[widMeta]}
	if out.LastModified != nil {
		o.mod = *out.LastModified
	}
	return o, nil
}

// head reads an object's ETag and write id.
func (c *client) head(ctx context.Context, key string) (object, error) {
	c.n.head.Add(1)
	out, err := c.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &c.bucket, Key: &key}, c.clock.recordDate)
	if err != nil {
		if isNotFound(err) {
			return object{}, metastore.NotFound(key)
		}
		return object{}, classify("HeadObject", key, err)
	}
	o := object{etag: aws.ToString(out.ETag), wid: out.Metadata[widMeta]}
	if out.LastModified != nil {
		o.mod = *out.LastModified
	}
	return o, nil
}

// create writes key only if it does not exist (If-None-Match: *). A 412
// means it exists: if it carries this write's id, the write was ours (the
// SDK retried it after a lost response) and succeeded. It returns the new
// object's ETag.
func (c *client) create(ctx context.Context, key string, body []byte) (string, error) {
	return c.write(ctx, key, body, func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
}

// replace writes key only if its ETag is etag (If-Match), settling a 412 the
// same way as create.
func (c *client) replace(ctx context.Context, key, etag string, body []byte) (string, error) {
	return c.write(ctx, key, body, func(in *s3.PutObjectInput) { in.IfMatch = aws.String(etag) })
}

func (c *client) write(ctx context.Context, key string, body []byte, cond func(*s3.PutObjectInput)) (string, error) {
	if err := c.fault.Check(); err != nil { // whole.go
		return "", err
	}
	wid := newWID()
	for attempt := 0; ; attempt++ {
		in := &s3.PutObjectInput{
			Bucket: &c.bucket, Key: &key,
			// A seekable body: the SDK signs and may resend it, which
			// over plain HTTP needs a body it can rewind.
			Body:          bytes.NewReader(body),
			ContentLength: aws.Int64(int64(len(body))),
			Metadata:      map[string]string{widMeta: wid},
		}
		cond(in)
		c.n.put.Add(1)
		out, err := c.api.PutObject(ctx, in, c.clock.recordDate)
		switch {
		case err == nil:
			return aws.ToString(out.ETag), nil
		case isPrecondition(err):
			// Lost the compare-and-swap, unless the object is this write
			// (a retry of it, after the first attempt applied).
			o, herr := c.head(ctx, key)
			if herr == nil && o.wid == wid {
				return o.etag, nil
			}
			if herr != nil && !errors.Is(herr, metastore.ErrNotFound) {
				return "", herr
			}
			return "", metastore.Conflict(key, "object changed (412 Precondition Failed)")
		case isNotFound(err):
			// If-Match on a key that does not exist (404 NoSuchKey).
			return "", metastore.Conflict(key, "object gone (404)")
		case isConditionalConflict(err) && attempt < maxConflictRetries:
			if berr := backoff(ctx, attempt); berr != nil {
				return "", berr
			}
		default:
			return "", classify("PutObject", key, err)
		}
	}
}

// deleteIf deletes key only if its ETag is etag (If-Match). A missing key is
// a conflict: it no longer holds what the caller read.
func (c *client) deleteIf(ctx context.Context, key, etag string) error {
	if err := c.fault.Check(); err != nil { // whole.go
		return err
	}
	for attempt := 0; ; attempt++ {
		c.n.del.Add(1)
		_, err := c.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &c.bucket, Key: &key, IfMatch: aws.String(etag)}, c.clock.recordDate)
		switch {
		case err == nil:
			return nil
		case isPrecondition(err), isNotFound(err):
			return metastore.Conflict(key, "object changed or gone (412/404)")
		case isConditionalConflict(err) && attempt < maxConflictRetries:
			if berr := backoff(ctx, attempt); berr != nil {
				return berr
			}
		default:
			return classify("DeleteObject", key, err)
		}
	}
}

// list returns up to max keys under prefix after startAfter ("" for the
// start), and whether more follow.
func (c *client) list(ctx context.Context, prefix, startAfter string, max int) ([]listed, bool, error) {
	in := &s3.ListObjectsV2Input{Bucket: &c.bucket, Prefix: &prefix, MaxKeys: aws.Int32(int32(min(max, 1000)))}
	if startAfter != "" {
		in.StartAfter = &startAfter
	}
	var out []listed
	more, err := c.pages(ctx, in, func(l listed) bool {
		out = append(out, l)
		return true
	}, func() bool { return len(out) < max })
	return out, more, err
}

// pages sends in and the listings that continue it, calling each for the
// keys in order until it returns false, and goes on to the next page while
// next (if not nil) says so; it reports whether keys were left unlisted.
func (c *client) pages(ctx context.Context, in *s3.ListObjectsV2Input, each func(listed) bool, next func() bool) (bool, error) {
	for {
		c.n.list.Add(1)
		page, err := c.api.ListObjectsV2(ctx, in, c.clock.recordDate)
		if err != nil {
			return false, classify("ListObjectsV2", aws.ToString(in.Prefix), err)
		}
		for _, o := range page.Contents {
			l := listed{key: aws.ToString(o.Key), etag: aws.ToString(o.ETag)}
			if o.LastModified != nil {
				l.mod = *o.LastModified
			}
			if !each(l) {
				return true, nil
			}
		}
		// With a delimiter (listDirs), the folders: keys ending in it.
		for _, p := range page.CommonPrefixes {
			if !each(listed{key: aws.ToString(p.Prefix)}) {
				return true, nil
			}
		}
		more := aws.ToBool(page.IsTruncated)
		if !more || (next != nil && !next()) {
			return more, nil
		}
		if tok := aws.ToString(page.NextContinuationToken); tok == "" || tok == aws.ToString(in.ContinuationToken) {
			// A listing that says "more" without a new place to go on
			// from would be read forever.
			return false, fmt.Errorf("%w: s3 ListObjectsV2 %q: a truncated page without a new continuation token", metastore.ErrUnavailable, aws.ToString(in.Prefix))
		}
		in.ContinuationToken = page.NextContinuationToken
		in.StartAfter = nil
	}
}

// listDirs returns the folders right below prefix (a LIST with the
// delimiter "/": its common prefixes), every page of them.
func (c *client) listDirs(ctx context.Context, prefix string) ([]string, error) {
	in := &s3.ListObjectsV2Input{Bucket: &c.bucket, Prefix: &prefix, Delimiter: aws.String("/")}
	var out []string
	_, err := c.pages(ctx, in, func(l listed) bool {
		if strings.HasSuffix(l.key, "/") {
			out = append(out, l.key) // a folder; an object right below prefix is not one
		}
		return true
	}, nil)
	return out, err
}

// listAll returns every key under prefix after startAfter.
func (c *client) listAll(ctx context.Context, prefix, startAfter string) ([]listed, error) {
	out, _, err := c.list(ctx, prefix, startAfter, int(^uint(0)>>1))
	return out, err
}

// listBefore returns the keys under prefix that sort before bound, reading
// no page past the first key at or after it: a time-ordered prefix costs
// what is due, not what it holds. The first page is small (firstListPage
// keys), so that a call with nothing due reads a few keys, not a thousand.
func (c *client) listBefore(ctx context.Context, prefix, bound string) ([]listed, error) {
	in := &s3.ListObjectsV2Input{Bucket: &c.bucket, Prefix: &prefix, MaxKeys: aws.Int32(firstListPage)}
	var out []listed
	_, err := c.pages(ctx, in, func(l listed) bool {
		if l.key >= bound {
			return false
		}
		out = append(out, l)
		return true
	}, func() bool {
		in.MaxKeys = aws.Int32(1000)
		return true
	})
	return out, err
}

// firstListPage is the size of listBefore's first page.
const firstListPage = 32

// trimPrefix is strings.TrimPrefix, named for the reader of key layouts.
func trimPrefix(s, p string) string { return strings.TrimPrefix(s, p) }
