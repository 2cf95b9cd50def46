package dynamostore

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// NewClient returns a DynamoDB client for cfg as the store wants it: the
// client does not retry, because the store retries each logical operation
// itself under one idempotency token (see Options.Retryer), and a non-empty
// endpoint overrides the configured one.
func NewClient(cfg aws.Config, endpoint string) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.Retryer = aws.NopRetryer{}
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
}
