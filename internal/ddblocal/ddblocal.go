// Package ddblocal is a test helper that connects tests to DynamoDB Local.
//
// Start DynamoDB Local once, then run the tests with its environment:
//
//	eval "$(scripts/dynamodb-local start)"
//	go test ./...
//	scripts/dynamodb-local stop
//
// Without AWS_ENDPOINT_URL_DYNAMODB in the environment, tests that use this
// package are skipped, or fail when LAKE_REQUIRE_DYNAMODB=1 (as in CI).
//
// Tests of lake's tables get them from Tables (created, then deleted with
// their v2 companion when the test ends) or LakeTable (a fresh name whose
// tables, made some other way, are deleted): the one place that creates and
// deletes them.
package ddblocal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore/dynamostore"
)

// Environment variables read by this package.
const (
	// EnvEndpoint holds the DynamoDB Local URL, e.g. http://127.0.0.1:8000.
	EnvEndpoint = "AWS_ENDPOINT_URL_DYNAMODB"
	// EnvRequire, when "1", turns a missing endpoint into a test failure
	// instead of a skip.
	EnvRequire = "LAKE_REQUIRE_DYNAMODB"
)

// DefaultRegion is the region used when AWS_REGION is unset.
const DefaultRegion = "us-east-1"

// DefaultAccessKey is the access key id and secret used when the
// environment has none; DynamoDB Local accepts any letters-and-digits key.
const DefaultAccessKey = "lakelocal"

// StartHint tells how to start DynamoDB Local for the tests.
const StartHint = `DynamoDB Local is not configured (` + EnvEndpoint + ` is unset); ` +
	`start it with: eval "$(scripts/dynamodb-local start)"`

// TablePrefix starts every name returned by TableName.
const TablePrefix = "lake_test_"

// tableWaitTimeout bounds how long CreateTable waits for ACTIVE.
const tableWaitTimeout = 60 * time.Second

// Endpoint returns the DynamoDB Local endpoint from AWS_ENDPOINT_URL_DYNAMODB.
// When it is unset, it skips the test, or fails it when LAKE_REQUIRE_DYNAMODB
// is "1"; either way the message says how to start DynamoDB Local.
func Endpoint(t testing.TB) string {
	t.Helper()
	ep := os.Getenv(EnvEndpoint)
	if ep != "" {
		return ep
	}
	if os.Getenv(EnvRequire) == "1" {
		t.Fatal(StartHint + " (" + EnvRequire + "=1)")
	}
	t.Skip(StartHint)
	return ""
}

// Config returns an aws.Config for DynamoDB Local: region from AWS_REGION
// (default us-east-1), static credentials from AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY (default lakelocal/lakelocal), BaseEndpoint set to
// Endpoint(t), and response checksums validated only when required. It does
// not read shared config files or profiles, so a developer's AWS setup
// cannot leak into the tests. Its APIOptions drop the DynamoDB client's CRC32
// response check, which misfires on DynamoDB Local's error responses. It
// skips or fails the test like Endpoint.
func Config(t testing.TB) aws.Config {
	t.Helper()
	ep := Endpoint(t)
	region := envOr("AWS_REGION", DefaultRegion)
	key := envOr("AWS_ACCESS_KEY_ID", DefaultAccessKey)
	secret := envOr("AWS_SECRET_ACCESS_KEY", DefaultAccessKey)
	return aws.Config{
		Region:       region,
		Credentials:  aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(key, secret, "")),
		BaseEndpoint: aws.String(ep),
		// What config.WithResponseChecksumValidation sets. It governs the
		// flexible-checksum services (S3, ...); the DynamoDB client does
		// not consult it, see skipDynamoDBCRC32.
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		APIOptions:                 []func(*middleware.Stack) error{skipDynamoDBCRC32},
	}
}

// dynamoDBCRC32MiddlewareID is the ID of the DynamoDB client's CRC32
// response check, the middleware that dynamodb.Options.DisableValidateResponseChecksum
// leaves out.
const dynamoDBCRC32MiddlewareID = "DynamoDB:ResponseChecksumValidation"

// skipDynamoDBCRC32 removes the DynamoDB client's X-Amz-Crc32 response check.
// DynamoDB Local sends no X-Amz-Crc32 header on error responses; the SDK then
// expects a CRC of 0 and logs "failed to close HTTP response body ...
// response did not match expected checksum" for every error response.
// Doing this as an API option makes any DynamoDB client built from Config
// quiet, not only those built by Client. Stacks without it are left alone.
func skipDynamoDBCRC32(stack *middleware.Stack) error {
	if _, ok := stack.Deserialize.Get(dynamoDBCRC32MiddlewareID); ok {
		if _, err := stack.Deserialize.Remove(dynamoDBCRC32MiddlewareID); err != nil {
			return err
		}
	}
	return nil
}

// Client returns a DynamoDB client for DynamoDB Local, built from Config(t)
// with the CRC32 response check disabled (see Config). It skips or fails the
// test like Endpoint.
func Client(t testing.TB) *dynamodb.Client {
	t.Helper()
	return dynamodb.NewFromConfig(Config(t), func(o *dynamodb.Options) {
		o.DisableValidateResponseChecksum = true
		// No client-side retry quota: DynamoDB Local answers bursts of 500s
		// (while an UpdateTable adds an index), and the standard retryer's
		// token bucket would then refuse every retry of every test sharing
		// the client, long after the burst.
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) { so.RateLimiter = ratelimit.None })
	})
}

// TableName returns a fresh, unique, valid DynamoDB table name for t:
// TablePrefix, the test's name reduced to [A-Za-z0-9_.-] and cut to 64
// characters, and a random suffix.
func TableName(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("ddblocal: random table suffix: %v", err)
	}
	name := sanitize(t.Name())
	if len(name) > 64 {
		name = name[:64]
	}
	return TablePrefix + name + "_" + hex.EncodeToString(b[:])
}

// sanitize maps every byte outside [A-Za-z0-9_.-] to '_'.
func sanitize(s string) string {
	var sb strings.Builder
	sb.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '_', c == '.', c == '-':
			sb.WriteByte(c)
		default:
			sb.WriteByte('_')
		}
	}
	return sb.String()
}

// CreateTable creates the table described by in, waits until it is ACTIVE,
// and registers a t.Cleanup that deletes it. It fails the test on error.
func CreateTable(t testing.TB, c *dynamodb.Client, in *dynamodb.CreateTableInput) {
	t.Helper()
	if in == nil || aws.ToString(in.TableName) == "" {
		t.Fatal("ddblocal: CreateTable needs a TableName")
	}
	name := aws.ToString(in.TableName)

	ctx, cancel := context.WithTimeout(t.Context(), tableWaitTimeout)
	defer cancel()
	if _, err := c.CreateTable(ctx, in); err != nil {
		t.Fatalf("ddblocal: create table %s: %v", name, err)
	}
	// Registered before waiting, so a table that never turns ACTIVE is
	// still deleted.
	t.Cleanup(func() {
		// t.Context() is already canceled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		var nf *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &nf) {
			t.Errorf("ddblocal: delete table %s: %v", name, err)
		}
	})

	w := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 50 * time.Millisecond
		o.MaxDelay = time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, tableWaitTimeout); err != nil {
		t.Fatalf("ddblocal: wait for table %s to be ACTIVE: %v", name, err)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// TableDeleter is the part of a DynamoDB client that the cleanups use.
type TableDeleter interface {
	DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
}

// LakeTable returns a fresh table name (TableName) and registers a cleanup
// that deletes lake's tables of that name, v1 and v2, whichever exist, for
// tests that create them some other way (`lake init`, a store URL opened
// with Create, a migration entering dual).
func LakeTable(t testing.TB, api TableDeleter) string {
	t.Helper()
	name := TableName(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, n := range []string{name, name + dynamostore.V2Suffix} {
			_, err := api.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(n)})
			var nf *types.ResourceNotFoundException
			if err != nil && !errors.As(err, &nf) && !strings.Contains(err.Error(), "ResourceNotFound") {
				t.Errorf("ddblocal: delete table %s: %v", n, err)
			}
		}
	})
	return name
}

// Tables creates the tables of opts with dynamostore.Create. opts.Table,
// when empty, becomes a fresh LakeTable name, whose tables are deleted when
// the test ends; a given name should come from LakeTable too. It returns opts with the table name set, ready for
// dynamostore.Open.
func Tables(t testing.TB, api ddb.API, opts dynamostore.Options) dynamostore.Options {
	t.Helper()
	if opts.Table == "" {
		opts.Table = LakeTable(t, api)
	}
	if err := dynamostore.Create(context.Background(), api, opts); err != nil {
		t.Fatalf("ddblocal: create lake tables %s: %v", opts.Table, err)
	}
	return opts
}
