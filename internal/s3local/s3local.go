// Package s3local is a test helper that connects tests to a local
// S3-compatible server (versitygw, started by scripts/s3-local).
//
//	eval "$(scripts/s3-local start)"
//	go test ./datastore/s3fs/
//	scripts/s3-local stop
//
// Without AWS_ENDPOINT_URL_S3 in the environment, tests that use this
// package are skipped, or fail when LAKE_REQUIRE_S3=1 (as in scripts/test).
// Each test gets a fresh bucket of its own, emptied and deleted when it
// ends.
package s3local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore/s3fs"
)

// Environment variables read by this package.
const (
	// EnvEndpoint holds the server's URL, e.g. http://127.0.0.1:7070.
	EnvEndpoint = "AWS_ENDPOINT_URL_S3"
	// EnvRequire, when "1", turns a missing endpoint into a test failure.
	EnvRequire = "LAKE_REQUIRE_S3"
)

// StartHint tells how to start the server for the tests.
const StartHint = `no S3 server is configured (` + EnvEndpoint + ` is unset); ` +
	`start one with: eval "$(scripts/s3-local start)"`

// Endpoint returns the server's URL, or skips the test (fails it with
// LAKE_REQUIRE_S3=1).
func Endpoint(t testing.TB) string {
	t.Helper()
	if ep := os.Getenv(EnvEndpoint); ep != "" {
		return ep
	}
	if os.Getenv(EnvRequire) == "1" {
		t.Fatal(StartHint + " (" + EnvRequire + "=1)")
	}
	t.Skip(StartHint)
	return ""
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Config returns an aws.Config for the local server: static credentials
// from the environment (scripts/s3-local prints them), no shared config
// files, so a developer's AWS setup cannot leak into the tests.
func Config(t testing.TB) aws.Config {
	t.Helper()
	return EnvConfig(Endpoint(t))
}

// EnvConfig is Config for endpoint ep, for test binaries started as child
// processes (which have no testing.T).
func EnvConfig(ep string) aws.Config {
	return aws.Config{
		Region:       envOr("AWS_REGION", "us-east-1"),
		Credentials:  aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(envOr("AWS_ACCESS_KEY_ID", "lakelocal"), envOr("AWS_SECRET_ACCESS_KEY", "lakelocalsecret"), "")),
		BaseEndpoint: aws.String(ep),
	}
}

// Client returns a path-style S3 client for the local server.
func Client(t testing.TB) *s3.Client {
	t.Helper()
	return s3fs.NewClient(Config(t))
}

var unsafe = regexp.MustCompile(`[^a-z0-9-]+`)

// Bucket creates a fresh bucket for t and deletes it, emptied, when t ends.
func Bucket(t testing.TB) string {
	t.Helper()
	c := Client(t)
	var b [4]byte
	rand.Read(b[:])
	name := strings.Trim(unsafe.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	name = "lake-" + name
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-") + "-" + hex.EncodeToString(b[:])
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	t.Cleanup(func() { empty(c, name) })
	return name
}

// empty deletes the bucket's objects and the bucket, best effort: the
// server's data directory goes when scripts/s3-local stops it anyway.
func empty(c *s3.Client, bucket string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return
		}
		for _, o := range page.Contents {
			c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: o.Key})
		}
	}
	c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &bucket})
}
