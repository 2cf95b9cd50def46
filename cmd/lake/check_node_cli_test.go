package main

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/internal/boltfile/bolttest"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/nodeapi"
)

// TestDataCheckThroughNode (issue 28, left over from "on every backend"):
// `lake data check [--repair]` with --store http://NODE runs the check on
// the node's own driver and prints its report, on a node over bolt and over
// DynamoDB Local. The damage is done by another client of the backend (bbolt
// opened directly while no node runs; the raw DynamoDB SDK): check names the
// object and exits 1; --repair takes the namespace's lock through the node,
// repairs and exits 0; the file reads again. Raw HTTP against the node's
// endpoint: no token is refused (401), and malformed or unfenced requests
// are 400, a stale fence a conflict, a repair while writes are paused 503.
func TestDataCheckThroughNode(t *testing.T) {
	t.Run("bolt", func(t *testing.T) {
		dir := t.TempDir()
		store := "bolt://" + filepath.Join(dir, "lake.db")
		ok(t, run(t, dir, "", "--store", store, "init"))
		putTwo(t, dir, store)
		bolttest.Update(t, filepath.Join(dir, "lake.db"), func(tx *boltfile.Tx) error {
			if err := tx.Bucket([]byte("datastore.heads")).Delete([]byte("m/2")); err != nil {
				return err
			}
			return tx.Bucket([]byte("datastore.registry")).Delete([]byte("m/2"))
		})
		checkThroughNode(t, dir, store, []string{"datastore.heads/m/2", "datastore.registry/m/2"})
	})
	t.Run("dynamodb", func(t *testing.T) {
		raw := ddblocal.Client(t)
		table := ddblocal.LakeTable(t, raw)
		t.Cleanup(func() {
			raw.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table + dynamofs.TableSuffix)})
		})
		dir := t.TempDir()
		store := "dynamodb://" + table + "?endpoint=" + ddblocal.Endpoint(t)
		ok(t, run(t, dir, "", "--store", store, "init"))
		putTwo(t, dir, store)
		// The registry shard of m/2 loses the partition: a foreign
		// UpdateItem, as TestCheckReports in dynamofs does.
		files := table + dynamofs.TableSuffix
		if _, err := raw.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{TableName: &files,
			Key: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "r#" + ddbShard("m/2")},
				"sk": &types.AttributeValueMemberS{Value: "r"}},
			UpdateExpression:          aws.String("DELETE parts :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberSS{Value: []string{"m/2"}}}}); err != nil {
			t.Fatal(err)
		}
		checkThroughNode(t, dir, store, []string{"r#" + ddbShard("m/2") + "/r: missing: partition m/2"})
	})
}

// putTwo initialises the datastore of store and puts data/m/1/a and
// data/m/2/b (content: the path) straight into it.
func putTwo(t *testing.T, dir, store string) {
	t.Helper()
	ok(t, run(t, dir, "", "--store", store, "data", "init"))
	for _, p := range []string{"data/m/1/a", "data/m/2/b"} {
		src := filepath.Join(dir, "src")
		os.WriteFile(src, []byte(p), 0o644)
		ok(t, run(t, dir, "", "--store", store, "data", "put", p, src))
	}
}

// checkThroughNode serves store (damaged so that the check reports each of
// want) from a node with a token, and runs lake data check through it.
func checkThroughNode(t *testing.T, dir, store string, want []string) {
	const token = "check-token-1"
	tokFile := filepath.Join(dir, "token")
	os.WriteFile(tokFile, []byte(token+"\n"), 0o600)
	n := startNode(t, dir, http.DefaultClient, "http", "--store", store, "--token-file", tokFile)
	node := "http://" + n.addr
	t.Setenv("LAKE_TOKEN", token)
	lake := func(args ...string) result { return run(t, dir, "", append([]string{"--store", node}, args...)...) }

	r := lake("data", "check")
	if r.code != exitError || !strings.Contains(r.stderr, "lake data check --repair") {
		t.Fatalf("check through the node: exit %d, stdout %q, stderr %q; want exit 1 and the --repair hint", r.code, r.stdout, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("check through the node did not name %q:\n%s", w, r.stdout)
		}
	}
	r = ok(t, lake("data", "check", "--repair", "--chunks", "--catalog"))
	if !strings.Contains(r.stdout, "repaired") || !strings.Contains(r.stdout, "namespace _catalog") {
		t.Errorf("check --repair --catalog through the node said %q", r.stdout)
	}
	if r := ok(t, lake("data", "check", "--chunks")); !strings.Contains(r.stdout, " 0 problems") {
		t.Errorf("check after the repair said %q", r.stdout)
	}
	if out := ok(t, lake("data", "get", "data/m/2/b")).stdout; out != "data/m/2/b" {
		t.Errorf("get after the repair: %q", out)
	}
	if out := ok(t, lake("data", "ls", "data/")).stdout; !strings.Contains(out, "data/m/2/b") {
		t.Errorf("ls after the repair: %q", out)
	}
	// A namespace the node has not seen is checked in its own scope.
	if r := ok(t, lake("--namespace", "alpha", "data", "check")); !strings.Contains(r.stdout, "namespace alpha: ") {
		t.Errorf("check of namespace alpha said %q", r.stdout)
	}

	// Raw HTTP, as a client lake did not write.
	url := node + nodeapi.DataPrefix + nodeapi.DataCheck
	post := func(tok, target, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, target, bytes.NewReader([]byte(body)))
		if tok != "" {
			req.Header.Set(nodeapi.AuthorizationHeader, nodeapi.BearerScheme+" "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		name, tok, target, body string
		status                  int
		code                    string
	}{
		{"no token", "", url, `{}`, 401, nodeapi.CodeUnauthorized},
		{"a wrong token", "nope", url, `{"repair":true}`, 401, nodeapi.CodeUnauthorized},
		{"not JSON", token, url, `check please`, 400, nodeapi.CodeInvalidArgument},
		{"an unknown member", token, url, `{"repair":false,"force":true}`, 400, nodeapi.CodeInvalidArgument},
		{"a repair without a fence", token, url, `{"repair":true}`, 400, nodeapi.CodeInvalidArgument},
		{"a fence without a repair", token, url, `{"fence":{"Key":"x","Token":"dDE="}}`, 400, nodeapi.CodeInvalidArgument},
		{"a fence without a token", token, url, `{"repair":true,"fence":{"Key":"x"}}`, 400, nodeapi.CodeInvalidArgument},
		{"an empty fence key", token, url, `{"repair":true,"fence":{"Key":"","Token":"dDE="}}`, 400, nodeapi.CodeInvalidKey},
		{"an unknown parameter", token, url + "?deep=1", `{}`, 400, nodeapi.CodeInvalidArgument},
		{"a bad namespace", token, url + "?namespace=..", `{}`, 400, nodeapi.CodeInvalidArgument},
		{"an unknown internal scope", token, url + "?namespace=_secret", `{}`, 400, nodeapi.CodeInvalidArgument},
		{"a stale fence", token, url, `{"repair":true,"fence":{"Key":"nobody/holds/this","Token":"dDE="}}`, 409, nodeapi.CodeConflict},
	} {
		status, body := post(c.tok, c.target, c.body)
		if status != c.status || !strings.Contains(body, `"code":"`+c.code+`"`) || !strings.Contains(body, `"message":"lake: `) {
			t.Errorf("%s: %d %s; want %d %s", c.name, status, body, c.status, c.code)
		}
	}
	if status, body := post(token, url, `{}`); status != 200 || !strings.Contains(body, `"problems":[]`) {
		t.Errorf("a plain check over raw HTTP: %d %s", status, body)
	}
	// A repair is a write: while an operator pauses writes it is refused
	// (503), before the driver sees it; a plain check reads on. (The CLI's
	// lock waits through a pause for --wait, then exits 5.)
	if status, body := post(token, node+nodeapi.PausePath, `{"reason":"check test"}`); status != 200 {
		t.Fatalf("pause: %d %s", status, body)
	}
	if status, body := post(token, url, `{"repair":true,"fence":{"Key":"nobody/holds/this","Token":"dDE="}}`); status != 503 || !strings.Contains(body, nodeapi.CodeWritesPaused) {
		t.Errorf("a repair while writes are paused: %d %s", status, body)
	}
	if status, body := post(token, url, `{"chunks":true}`); status != 200 {
		t.Errorf("a check while writes are paused: %d %s", status, body)
	}
	if r := lake("data", "check", "--repair", "--wait", "1s"); r.code != exitPaused {
		t.Errorf("check --repair while writes are paused: exit %d, stderr %q; want %d", r.code, r.stderr, exitPaused)
	}
	if status, body := post(token, node+nodeapi.ResumePath, ``); status != 200 {
		t.Fatalf("resume: %d %s", status, body)
	}
	if resp, err := http.Get(url); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET without a token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// ddbShard is the registry shard of a partition in the DynamoDB
// datastore's table (FNV-1a mod 16), as a foreign writer computes it.
func ddbShard(partition string) string {
	h := fnv.New32a()
	h.Write([]byte(partition))
	return fmt.Sprintf("%02d", h.Sum32()%16)
}
