package dynamostore

import (
	"net"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// NewClient returns a DynamoDB client for cfg as the store wants it. The
// client does not retry: the store retries each logical operation itself,
// under one idempotency token (see Options.Retryer). A non-empty endpoint
// overrides the configured one. For an endpoint on a loopback address
// (DynamoDB Local) the CRC32 response check is off, because DynamoDB Local
// omits the CRC header on error responses and the SDK would log a checksum
// warning for each.
func NewClient(cfg aws.Config, endpoint string) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.Retryer = aws.NopRetryer{}
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
