package dsurl

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/metastore"
)

// openS3 opens the S3 datastore of the remainder of an s3:// URL, creating
// its bucket first if create is set.
func openS3(ctx context.Context, rest string, create bool) (*s3fs.Driver, error) {
	bucket, prefix, err := s3fs.ParseURL(rest)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("lake: AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("%w: no AWS region: set AWS_REGION", metastore.ErrInvalidArgument)
	}
	c := s3fs.NewClient(cfg)
	if create {
		_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket})
		var owned *types.BucketAlreadyOwnedByYou
		var exists *types.BucketAlreadyExists
		if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
			return nil, fmt.Errorf("%w: create s3 bucket %q: %v", metastore.ErrUnavailable, bucket, err)
		}
	}
	return s3fs.Open(ctx, c, s3fs.Options{Bucket: bucket, Prefix: prefix})
}
