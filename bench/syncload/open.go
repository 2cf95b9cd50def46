package syncload

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/lakemeta/lake/bench"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dsurl"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/storeurl"
)

// OpenData opens the datastore of url as dsurl.Open does, except that on
// DynamoDB and S3 the driver's client is wrapped to count the store's own
// requests by partition key or key prefix (DynamoKeys, S3Keys): the hot key
// seen from the store's side. With create it creates the table or bucket
// first. With full, on DynamoDB, it also opens (creating) the seed's GSI
// index beside the datastore's table, TABLE_gsifeed, for the full pull.
func OpenData(ctx context.Context, url string, create, full bool) (*datastore.Store, FullIndex, error) {
	scheme, rest, _ := strings.Cut(url, "://")
	switch scheme {
	case "dynamodb":
		api, o, err := storeurl.DynamoAPI(ctx, url)
		if err != nil {
			return nil, nil, err
		}
		api = DynamoKeys(api)
		table := o.Table + dynamofs.TableSuffix
		if create {
			if err := dynamofs.Create(ctx, api, table); err != nil {
				return nil, nil, err
			}
		}
		d, err := dynamofs.Open(ctx, api, dynamofs.Options{Table: table})
		if err != nil {
			return nil, nil, err
		}
		var fi FullIndex
		if full {
			if fi, err = bench.OpenGSIFeed(ctx, api, o.Table+bench.GSIFeedSuffix); err != nil {
				d.Close()
				return nil, nil, err
			}
		}
		s, err := datastore.Open(ctx, d, nil)
		if err != nil {
			d.Close()
			return nil, nil, err
		}
		return s, fi, nil
	case "s3":
		bucket, prefix, err := s3fs.ParseURL(rest)
		if err != nil {
			return nil, nil, err
		}
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("lake: AWS configuration: %w", err)
		}
		if cfg.Region == "" {
			return nil, nil, fmt.Errorf("%w: no AWS region: set AWS_REGION", metastore.ErrInvalidArgument)
		}
		c := s3fs.NewClient(cfg)
		if create {
			_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket})
			var owned *s3types.BucketAlreadyOwnedByYou
			var exists *s3types.BucketAlreadyExists
			if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
				return nil, nil, fmt.Errorf("%w: create s3 bucket %q: %v", metastore.ErrUnavailable, bucket, err)
			}
		}
		d, err := s3fs.Open(ctx, S3Keys(c, s3KeyPrefix(prefix)), s3fs.Options{Bucket: bucket, Prefix: prefix})
		if err != nil {
			return nil, nil, err
		}
		s, err := datastore.Open(ctx, d, nil)
		if err != nil {
			d.Close()
			return nil, nil, err
		}
		return s, nil, nil
	}
	s, err := dsurl.Open(ctx, url, &dsurl.Options{Create: create})
	return s, nil, err
}

// s3KeyPrefix is the prefix of the datastore's object keys.
func s3KeyPrefix(prefix string) string {
	if prefix == "" || strings.HasSuffix(prefix, "/") {
		return prefix
	}
	return prefix + "/"
}
