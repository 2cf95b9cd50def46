package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestIAMPolicyCLI: the command prints a document IAM can read, and
// refuses bad roles and flags with exit 2.
func TestIAMPolicyCLI(t *testing.T) {
	dir := t.TempDir()
	lake := func(args ...string) result { return run(t, dir, "", args...) }
	r := ok(t, lake("--store", "s3://lake-bucket/lk", "iam", "policy", "sync-worker", "--namespace", "a", "--account", "123456789012", "--region", "eu-west-1"))
	var doc struct {
		Version   string
		Statement []struct {
			Sid, Effect string
			Resource    []string
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Version != "2012-10-17" || len(doc.Statement) == 0 {
		t.Fatalf("not a policy document: %v\n%s", err, r.stdout)
	}
	if !strings.Contains(r.stdout, `"arn:aws:s3:::lake-bucket/lk/n/a/*"`) || strings.Contains(r.stdout, "/n/b/") {
		t.Fatalf("sync-worker a on S3: %s", r.stdout)
	}
	r = ok(t, lake("iam", "policy", "reshape", "--table", "saas", "--account", "123456789012", "--region", "eu-west-1"))
	if !strings.Contains(r.stdout, "arn:aws:dynamodb:eu-west-1:123456789012:table/saas") {
		t.Fatalf("reshape: %s", r.stdout)
	}
	for _, args := range [][]string{
		{"iam", "policy", "admin", "--table", "x", "--account", "123456789012", "--region", "r"},
		{"--store", "s3://b/p", "iam", "policy", "sync-worker", "--namespace", "a/b", "--account", "123456789012", "--region", "r"},
		{"--store", "s3://b/p", "iam", "policy", "node", "--account", "12", "--region", "r"},
		{"--store", "bolt://x.db", "iam", "policy", "node", "--account", "123456789012", "--region", "r"},
		{"--store", "dynamodb://t", "iam", "policy", "node", "--state", "v3", "--account", "123456789012", "--region", "r"},
	} {
		if r := lake(args...); r.code != exitUsage || !strings.HasPrefix(r.stderr, "lake: ") {
			t.Errorf("%v: exit %d %s, want 2", args, r.code, r.stderr)
		}
	}
}
