package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lakemeta/lake/backend/dynamostore"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// TestMigrationRollout walks the README's rollout with the built binary on
// DynamoDB Local: init, writes in v1, dual, backfill by --page-size,
// verify, finalize, reads through v2, refused transitions with exit 6.
func TestMigrationRollout(t *testing.T) {
	ddblocal.Endpoint(t)
	table := ddblocal.LakeTable(t, dynamostore.NewClient(ddblocal.Config(t), ""))
	dir := t.TempDir()
	store := "--store=dynamodb://" + table
	lake := func(args ...string) result { return run(t, dir, "", append([]string{store}, args...)...) }
	ok(t, lake("init"))
	for _, k := range []string{"tbl/orders", "tbl/users", "append-operation/orders/000001", "lease/orders"} {
		ok(t, lake("put", k, "v:"+k))
	}
	if r := lake("dynamo-migrate", "finalize"); r.code != exitRefused {
		t.Fatalf("finalize in state v1: exit %d, %s", r.code, r.stderr)
	}
	if r := lake("dynamo-migrate", "typo"); r.code != exitUsage {
		t.Fatalf("unknown step: exit %d", r.code)
	}
	ok(t, lake("dynamo-migrate", "dual"))
	ok(t, lake("put", "tbl/during-dual", "v:tbl/during-dual"))
	ok(t, lake("dynamo-migrate", "--page-size", "2"))
	r := ok(t, lake("dynamo-migrate", "verify"))
	if !strings.Contains(r.stdout, "0 missing in v2, 0 extra in v2, 0 different") || !strings.Contains(r.stdout, "recorded") {
		t.Fatalf("verify: %s", r.stdout)
	}
	r = ok(t, lake("dynamo-migrate", "status", "--json"))
	var st struct {
		State   string   `json:"state"`
		Allowed []string `json:"allowed_steps"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.State != "backfill" {
		t.Fatalf("status: %v %s", err, r.stdout)
	}
	ok(t, lake("dynamo-migrate", "finalize"))
	if r := lake("dynamo-migrate", "rollback"); r.code != exitRefused {
		t.Fatalf("rollback after finalize: exit %d", r.code)
	}
	if r := ok(t, lake("ls", "tbl/")); r.stdout != "tbl/during-dual\ntbl/orders\ntbl/users\n" {
		t.Fatalf("ls through v2: %q", r.stdout)
	}
	ok(t, lake("put", "tbl/after", "x"))
	if r := run(t, dir, "", "--store=dynamodb://"+table+"?layout=v1", "put", "tbl/x", "y"); r.code != exitRefused {
		t.Fatalf("forced v1 write after finalize: exit %d", r.code)
	}
}
