package iam

import (
	"errors"
	"strings"
	"testing"

	"github.com/lakemeta/lake/metastore"
)

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"s#a#*", "s#a#f#t/i", true},
		{"s#a#*", "s#ab#f", false},
		{"k#rec/a", "k#rec/a", true},
		{"k#rec/a", "k#rec/ab", false},
		{"arn:aws:s3:::b/lk/n/a/*", "arn:aws:s3:::b/lk/n/a/f/data/x~", true},
		{"arn:aws:s3:::b/lk/n/a/*", "arn:aws:s3:::b/lk/n/b/f/x", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"*", "", true},
	} {
		if got := glob(c.p, c.s); got != c.want {
			t.Errorf("glob(%q, %q) = %v", c.p, c.s, got)
		}
	}
}

// IAM's ForAllValues is vacuously true without values: a Scan (no leading
// key) would pass a LeadingKeys condition, so no role conditioned on keys
// may allow it.
func TestLeadingKeysPoliciesNeverAllowScan(t *testing.T) {
	d := gen(t, RoleSyncWorker, Params{Region: "us-east-1", Account: "123456789012", Table: "lake", State: StateV1, Namespace: "a"})
	arn := "arn:aws:dynamodb:us-east-1:123456789012:table/lake_files"
	if d.Evaluate(Request{Action: "dynamodb:Scan", Resource: arn}).Allowed {
		t.Fatal("a sync worker may Scan the files table: every namespace's items")
	}
	if !d.Evaluate(Request{Action: "dynamodb:GetItem", Resource: arn, LeadingKeys: []string{"s#a#f#t/i"}}).Allowed {
		t.Fatal("a's own item refused")
	}
	for _, k := range []string{"s#b#f#t/i", "k#rec/b", "k#gen/b", "k#exp/b", "s#ab#f#x", "f#t/i"} {
		if d.Evaluate(Request{Action: "dynamodb:GetItem", Resource: arn, LeadingKeys: []string{k}}).Allowed {
			t.Errorf("a's policy allows key %s", k)
		}
	}
	if d.Evaluate(Request{Action: "dynamodb:BatchGetItem", Resource: arn, LeadingKeys: []string{"s#a#f#x", "s#b#f#x"}}).Allowed {
		t.Error("a batch naming one of b's keys is allowed")
	}
}

func TestGenerateRefusals(t *testing.T) {
	base := Params{Region: "us-east-1", Account: "123456789012", Table: "lake", State: StateV1}
	for _, c := range []struct {
		role string
		mod  func(*Params)
		want string
	}{
		{"admin", func(*Params) {}, "unknown role"},
		{RoleNode, func(p *Params) { p.Account = "12" }, "12 digits"},
		{RoleNode, func(p *Params) { p.Region = "" }, "no region"},
		{RoleNode, func(p *Params) { p.State = "v3" }, "migration state"},
		{RoleSyncWorker, func(p *Params) {}, "needs --namespace"},
		{RoleSyncWorker, func(p *Params) { p.Namespace = "a/b" }, "namespace"},
		{RoleReshape, func(p *Params) {}, "needs the table"},
		{RoleMigrator, func(p *Params) { p.Table, p.Bucket = "", "b" }, "DynamoDB store"},
	} {
		p := base
		c.mod(&p)
		_, err := Generate(c.role, p)
		if !errors.Is(err, metastore.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an invalid argument naming %q", c.role, err, c.want)
		}
	}
}
