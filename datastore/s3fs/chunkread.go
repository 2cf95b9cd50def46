package s3fs

import (
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/metastore"
)

// getAtMost reads at most limit+1 bytes of key's body: a chunk object
// written by a foreign client can be any size, and a reader holds one chunk
// at a time (issue 26). A body longer than limit comes back as limit+1
// bytes, which the datastore's checks call a damaged chunk.
func (c *client) getAtMost(ctx context.Context, key string, limit int64) ([]byte, error) {
	c.n.get.Add(1)
	out, err := c.api.GetObject(ctx, &s3.GetObjectInput{Bucket: &c.bucket, Key: &key}, c.clock.recordDate)
	if err != nil {
		if isNotFound(err) {
			return nil, metastore.NotFound(key)
		}
		return nil, classify("GetObject", key, err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(io.LimitReader(out.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: s3 GetObject %q: read body: %v", metastore.ErrUnavailable, key, err)
	}
	return body, nil // more than limit bytes: the caller calls the file damaged
}
