package syncreport

import (
	"strings"

	"github.com/lakemeta/lake/bench/syncload"
)

// Minimum is what a sync of configuration c's loop needs at the least, on
// average over an iteration's syncs, on the store named by storeURL (issue
// 31): the figures lake's are held against. An iteration of the loop with
// disposable models is (docs/bench-sync.md, "The command"):
//
//   - the run's sync, which pushes a new model of c.Files data files and
//     its definition (n = c.Files+1 files): the lock, one read that proves
//     what changed, the uploads, the commit, the release, so 4 + the
//     uploads requests, which are ⌈n/25⌉ on DynamoDB (BatchWriteItem takes
//     25 items; files of 1 KiB fit an item) and n on S3 (a PUT an object;
//     parallel PUTs are still requests) and on bolt or a node (a call a
//     file); n items written;
//   - the delete's sync: 4 requests, 1 item written (the definition's
//     deletion), plus the c.Files data files the namespace's lifecycle
//     drops in the same sync with --lifecycle on;
//   - with --lifecycle prune, a third sync removing the c.Files data files:
//     4 requests, c.Files items written;
//
// and 1 item read a sync (the read that proves what changed). ok is false
// for configurations this does not describe (write stress, long-lived
// models).
func Minimum(c syncload.Config, storeURL string) (requests, read, written float64, ok bool) {
	if c.Mode != syncload.ModeLoop || c.Models != syncload.ModelsDisposable || c.Files < 0 {
		return 0, 0, 0, false
	}
	n := c.Files + 1
	uploads := n
	if strings.HasPrefix(storeURL, "dynamodb://") {
		uploads = (n + 24) / 25
	}
	syncs, req, wr := 2, 4+uploads+4, n+1
	switch c.Lifecycle {
	case syncload.LifecycleOn:
		wr += c.Files
	case syncload.LifecyclePrune:
		syncs, req, wr = 3, req+4, wr+c.Files
	}
	return float64(req) / float64(syncs), 1, float64(wr) / float64(syncs), true
}
