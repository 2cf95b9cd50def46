package s3fs

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/metastore"
)

// NewClient returns an S3 client for cfg. With an endpoint (cfg.BaseEndpoint,
// which the SDK fills from AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL) it
// addresses buckets path-style, as local servers (versitygw, MinIO) need.
// Checksums are computed and validated only where S3 requires them, which
// every S3-compatible server supports.
func NewClient(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if o.BaseEndpoint != nil && *o.BaseEndpoint != "" {
			o.UsePathStyle = true
		}
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
}

// ParseURL splits the remainder of an s3://BUCKET/PREFIX URL (what follows
// "s3://") into the bucket and the key prefix.
func ParseURL(rest string) (bucket, prefix string, err error) {
	bucket, prefix, _ = strings.Cut(rest, "/")
	prefix = strings.TrimSuffix(prefix, "/")
	switch {
	case bucket == "":
		return "", "", fmt.Errorf("%w: s3 URL %q has no bucket; want s3://BUCKET/PREFIX", metastore.ErrInvalidArgument, "s3://"+rest)
	case strings.ContainsAny(rest, "?#"):
		return "", "", fmt.Errorf("%w: s3 URL %q has a query or fragment; want s3://BUCKET/PREFIX", metastore.ErrInvalidArgument, "s3://"+rest)
	case strings.Contains(prefix, "//") || strings.HasPrefix(prefix, "/"):
		return "", "", fmt.Errorf("%w: s3 URL %q has an empty prefix segment", metastore.ErrInvalidArgument, "s3://"+rest)
	}
	return bucket, prefix, nil
}
