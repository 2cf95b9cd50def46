package syncreport

import (
	"strings"

	"github.com/lakemeta/lake/bench/syncload"
)

// Minimum is what one sync of configuration c's loop needs at the least on
// the store named by storeURL (issue 31): the figures lake's are held
// against. A sync of the loop pushes a new model of c.Files data files and
// its definition (n = c.Files+1 files), with nothing else to pull:
//
//   - requests: the lock, one read that proves what changed, the uploads,
//     the commit, the release: 4 + the uploads, which are ⌈n/25⌉ on
//     DynamoDB (BatchWriteItem takes 25 items; files of 1 KiB fit an
//     item) and n on S3 (one PUT an object; parallel PUTs are still
//     requests) and on bolt or a node (one call a file);
//   - items written: n, one a file;
//   - items read: 1, the read that proves what changed.
//
// ok is false for a configuration whose sync is not the loop's (write
// stress), whose work this does not describe.
func Minimum(c syncload.Config, storeURL string) (requests, read, written float64, ok bool) {
	if c.Mode != syncload.ModeLoop || c.Files < 0 {
		return 0, 0, 0, false
	}
	n := c.Files + 1
	uploads := n
	if strings.HasPrefix(storeURL, "dynamodb://") {
		uploads = (n + 24) / 25
	}
	return float64(4 + uploads), 1, float64(n), true
}
