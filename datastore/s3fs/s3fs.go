package s3fs

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// Options configure Open.
type Options struct {
	// Bucket is the S3 bucket; it must exist.
	Bucket string
	// Prefix is the key prefix under which the datastore lives ("" for the
	// bucket's root, else without a leading slash). Two datastores in one
	// bucket need prefixes neither of which starts the other.
	Prefix string
	// CommitWindow bounds how long a commit may take from reading its
	// partition's log tail to creating the next position; a commit that
	// took longer starts over. Reclaim deletes a dead log object only once
	// it is older than the grace period, which must exceed this window, so
	// no stalled commit ever recreates a deleted position. Zero means
	// DefaultCommitWindow.
	CommitWindow time.Duration
}

// DefaultCommitWindow is Options.CommitWindow's default: far below the
// datastore's grace period (an hour), far above any sane S3 round trip.
const DefaultCommitWindow = 5 * time.Minute

// MaxCommit is the most entries of one partition one log object holds.
const MaxCommit = 100

// Driver is the S3 datastore driver. It is safe for concurrent use.
type Driver struct {
	c *client
	// prefix is where d's namespace lives (PREFIX/ for the root,
	// PREFIX/n/NAME/ for a namespace); root is PREFIX/, where the records
	// of every namespace live.
	prefix string
	root   string
	window time.Duration
	// layout is the datastore's partition rule (SetLayout, layout.go).
	layout datastore.Layout
}

var _ datastore.Driver = (*Driver)(nil)

// Open returns the driver of the datastore at opts.Bucket/opts.Prefix over
// api. It sends no request: a missing bucket is named by the first one.
func Open(ctx context.Context, api API, opts Options) (*Driver, error) {
	if opts.Bucket == "" {
		return nil, fmt.Errorf("%w: s3 datastore needs a bucket", metastore.ErrInvalidArgument)
	}
	p := opts.Prefix
	if strings.HasPrefix(p, "/") || strings.Contains(p, "//") {
		return nil, fmt.Errorf("%w: s3 prefix %q: want segments without empty ones and no leading slash", metastore.ErrInvalidArgument, p)
	}
	if p != "" && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	if opts.CommitWindow <= 0 {
		opts.CommitWindow = DefaultCommitWindow
	}
	// Open sends no request (it used to LIST one head to check that the
	// bucket answers): every command's first request names a missing
	// bucket or a refusal as well (classify), and a sync that finds
	// nothing changed pays only for the reads that prove it (issue 31).
	_ = ctx
	return &Driver{c: newClient(api, opts.Bucket), prefix: p, root: p, window: opts.CommitWindow}, nil
}

// Name implements datastore.Driver.
func (d *Driver) Name() string { return "s3" }

// MaxCommit implements datastore.Driver: one log object per partition holds
// at most this many entries.
func (d *Driver) MaxCommit() int { return MaxCommit }

// Close implements datastore.Driver; the S3 client holds nothing to release.
func (d *Driver) Close() error { return nil }

// Requests returns the requests sent so far, by kind: the cost counter of
// the measuring command.
func (d *Driver) Requests() Counts { return d.c.n.snapshot() }

// Keys of the layout (see the package documentation).
func (d *Driver) chunkKey(version string, i int) string {
	return fmt.Sprintf("%sc/%s/%06d", d.prefix, version, i)
}
func (d *Driver) chunkPrefix(version string) string { return d.prefix + "c/" + version + "/" }
func (d *Driver) uploadKey(version string, started time.Time) string {
	return d.prefix + "u/" + timeKey(started) + "/" + version
}
func (d *Driver) replacedKey(version string) string { return d.prefix + "v/" + version }
func (d *Driver) dueKey(version string, at time.Time) string {
	return d.prefix + "q/" + timeKey(at) + "/" + version
}
func (d *Driver) fileKey(path string) string   { return d.prefix + "f/" + leaf(path) }
func (d *Driver) headKey(part string) string   { return d.prefix + "h/" + url.PathEscape(part) }
func (d *Driver) logPrefix(part string) string { return d.prefix + "l/" + url.PathEscape(part) + "/" }
func (d *Driver) logKey(part string, pos uint64) string {
	return fmt.Sprintf("%s%020d", d.logPrefix(part), pos)
}

// Keys that name a path or a record end with "~" (and a "~" of the name is
// doubled), so that no object's key is a folder of another's: "a/x" and
// "a/x/deep" become "a/x~" and "a/x/deep~". S3 does not care; servers that
// keep objects as files in folders (versitygw's posix backend) refuse an
// object whose key runs through another object. Escaping each "~" alone
// keeps a prefix of a name a prefix of its key.
// recordKey is the object of record key: under r/, or, for a namespace's
// registry record in a "models-v4" datastore, beside the namespace's heads
// (listedrecords.go).
func (d *Driver) recordKey(key string) string {
	if k, ok := d.listedRecordKey(key); ok {
		return k
	}
	return d.root + "r/" + leaf(key)
}

func escape(s string) string { return strings.ReplaceAll(s, "~", "~~") }
func leaf(s string) string   { return escape(s) + "~" }

// unleaf inverts leaf.
func unleaf(k string) string { return strings.ReplaceAll(strings.TrimSuffix(k, "~"), "~~", "~") }

// maxKeyBytes is S3's longest key.
const maxKeyBytes = 1024

func (d *Driver) checkPath(p string) error {
	if n := len(d.fileKey(p)); n > maxKeyBytes {
		return fmt.Errorf("%w: path %q makes a %d-byte key under prefix %q; S3 keys hold at most %d bytes", metastore.ErrInvalidKey, p, n, d.prefix, maxKeyBytes)
	}
	return nil
}
