package ddb

import (
	"context"
	"fmt"
	"net"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/metastore"
)

// ErrNoRegion is returned by LoadConfig when neither the caller nor the
// standard AWS environment (AWS_REGION, AWS_DEFAULT_REGION, the shared
// config file) names a region; callers with another way to name one
// (a flag, a URL parameter) say so in their own message.
var ErrNoRegion = fmt.Errorf("%w: no AWS region: set AWS_REGION", metastore.ErrInvalidArgument)

// LoadConfig loads the standard AWS configuration (credentials, region,
// AWS_ENDPOINT_URL_DYNAMODB and the rest of the SDK's environment) with
// region, when not empty, overriding the environment's. extra adds loader
// options (a logger). It fails with ErrNoRegion when no region is set.
func LoadConfig(ctx context.Context, region string, extra ...func(*config.LoadOptions) error) (aws.Config, error) {
	loaders := append([]func(*config.LoadOptions) error{}, extra...)
	if region != "" {
		loaders = append(loaders, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loaders...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("lake: AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, ErrNoRegion
	}
	return cfg, nil
}

// NewClient returns a DynamoDB client for cfg as the store wants it. The
// client does not retry: the store retries each logical operation itself,
// under one idempotency token (see Retry and PutOnce). A non-empty endpoint
// overrides the configured one (AWS_ENDPOINT_URL_DYNAMODB). For an endpoint
// on a loopback address (DynamoDB Local) the CRC32 response check is off,
// because DynamoDB Local omits the CRC header on error responses and the SDK
// would log a checksum warning for each.
func NewClient(cfg aws.Config, endpoint string) *dynamodb.Client {
	return newClient(cfg, endpoint, aws.NopRetryer{})
}

// NewRetryingClient is NewClient for callers that send each request once
// and let the SDK retry it (reshape, sweep): the SDK retries with lake's
// policy (NewRetryer), so a long sweep rides out bursts of throttling, and
// no client-wide retry quota turns one burst into refusals of every later
// request. Only requests that are safe to repeat may go through it: a
// conditional write whose response is lost is retried by the SDK under the
// same condition, which the caller must be ready to see fail.
func NewRetryingClient(cfg aws.Config, endpoint string) *dynamodb.Client {
	return newClient(cfg, endpoint, NewRetryer(RetryOptions{}))
}

func newClient(cfg aws.Config, endpoint string, r aws.Retryer) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.Retryer = r
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		if o.BaseEndpoint != nil && IsLoopback(*o.BaseEndpoint) {
			o.DisableValidateResponseChecksum = true
		}
	})
}

// IsLoopback reports whether endpoint is a URL whose host is a loopback
// address or "localhost".
func IsLoopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
