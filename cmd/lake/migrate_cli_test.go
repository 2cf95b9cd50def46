package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// TestMigrationRollout walks the README's rollout with the built binary on
// DynamoDB Local: init, writes in v1, dual, backfill by --page-size,
// verify, finalize, reads through v2, refused transitions with exit 6.
func TestMigrationRollout(t *testing.T) {
	ddblocal.Endpoint(t)
	table := ddblocal.LakeTable(t, ddb.NewClient(ddblocal.Config(t), ""))
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

// TestMigrationRepairCLI (issue 9) walks the repair with the built binary:
// a legacy writer (the raw SDK) deletes, overwrites and creates v1 items
// after the backfill; verify and finalize name the keys (exit 6), a dual
// write to a diverged key exits 7 naming the repair, repair converges,
// finalize succeeds; then the v1 table is deleted and every command keeps
// working from v2.
func TestMigrationRepairCLI(t *testing.T) {
	ddblocal.Endpoint(t)
	api := ddb.NewClient(ddblocal.Config(t), "")
	table := ddblocal.LakeTable(t, api)
	dir := t.TempDir()
	lake := func(args ...string) result {
		return run(t, dir, "", append([]string{"--store=dynamodb://" + table}, args...)...)
	}
	ok(t, lake("init"))
	for _, k := range []string{"tbl/k1", "tbl/k2", "tbl/k3"} {
		ok(t, lake("put", k, "v:"+k))
	}
	ok(t, lake("dynamo-migrate", "dual"))
	ok(t, lake("dynamo-migrate", "--page-size", "2"))
	ok(t, lake("dynamo-migrate", "verify"))
	if r := ok(t, lake("dynamo-migrate", "status", "--json")); !strings.Contains(r.stdout, `"live_peers":[]`) {
		t.Fatalf("status --json without peers: %s", r.stdout)
	}
	ctx := t.Context()
	key := func(k string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: k}}
	}
	legacyPut := func(k, v string) {
		item := key(k)
		item["v"] = &types.AttributeValueMemberB{Value: []byte(v)}
		if _, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("tbl/k1")}); err != nil {
		t.Fatal(err)
	}
	legacyPut("tbl/k2", "legacy")
	legacyPut("tbl/new", "legacy-new")
	if r := lake("dynamo-migrate", "verify"); r.code != exitRefused || !strings.Contains(r.stdout, `"tbl/k1"`) || !strings.Contains(r.stdout, `"tbl/new"`) {
		t.Fatalf("verify after legacy writes: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	if r := lake("put", "tbl/k2", "dual"); r.code != exitDiverged || !strings.Contains(r.stderr, "lake dynamo-migrate repair") {
		t.Fatalf("dual put over a diverged copy: exit %d, %s", r.code, r.stderr)
	}
	if r := lake("dynamo-migrate", "finalize"); r.code != exitRefused || !strings.Contains(r.stderr, `"tbl/k1"`) {
		t.Fatalf("finalize with recorded differences: exit %d, %s", r.code, r.stderr)
	}
	if r := ok(t, lake("dynamo-migrate", "repair")); !strings.Contains(r.stdout, "removed 1") {
		t.Fatalf("repair: %s", r.stdout)
	}
	ok(t, lake("dynamo-migrate", "verify"))
	ok(t, lake("dynamo-migrate", "finalize"))
	if r := ok(t, lake("get", "tbl/k2")); r.stdout != "legacy" {
		t.Fatalf("legacy value after finalize: %q", r.stdout)
	}
	if r := lake("get", "tbl/k1"); r.code != exitNotFound {
		t.Fatalf("the legacy-deleted key after finalize: exit %d %q", r.code, r.stdout)
	}
	if r := lake("dynamo-migrate", "--retention", "-1s", "status"); r.code != exitUsage {
		t.Fatalf("negative retention: exit %d", r.code)
	}

	if _, err := api.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
		t.Fatal(err)
	}
	if r := ok(t, lake("get", "tbl/new")); r.stdout != "legacy-new" {
		t.Fatalf("get with v1 gone: %q", r.stdout)
	}
	ok(t, lake("put", "tbl/k3", "after"))
	ok(t, lake("cas", "tbl/k3", "again", "--expect", "after"))
	ok(t, lake("rm", "tbl/k3", "--expect", "again"))
	if r := ok(t, lake("ls", "tbl/")); r.stdout != "tbl/k2\ntbl/new\n" {
		t.Fatalf("ls with v1 gone: %q", r.stdout)
	}
	if r := ok(t, lake("dynamo-migrate", "status")); !strings.Contains(r.stdout, "v1: missing") {
		t.Fatalf("status with v1 gone: %s", r.stdout)
	}
	ok(t, lake("dynamo-migrate", "retire-v1"))
	if r := ok(t, lake("dynamo-migrate", "status")); !strings.Contains(r.stdout, "state:       v2-only") {
		t.Fatalf("status after retire-v1: %s", r.stdout)
	}
}
