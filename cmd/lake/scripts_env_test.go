package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/s3local"
)

// TestScriptsEnvCoexist evaluates the environments of scripts/dynamodb-local
// and scripts/s3-local in one shell, in both orders, and then uses both
// servers from that shell: an S3 datastore write (versitygw checks the
// signature, so a secret clobbered by the other script fails it with 403)
// and a DynamoDB table created and written (issue 33, row 2). The servers
// are found through LAKE_RUN_DIR (default <repo>/.cache, where scripts/test
// starts them).
func TestScriptsEnvCoexist(t *testing.T) {
	ddblocal.Endpoint(t)
	s3local.Endpoint(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	runDir := os.Getenv("LAKE_RUN_DIR")
	if runDir == "" {
		runDir = filepath.Join(root, ".cache")
	}
	for _, s := range []string{"dynamodb-local", "s3-local"} {
		cmd := exec.Command(filepath.Join(root, "scripts", s), "status")
		cmd.Env = append(os.Environ(), "LAKE_RUN_DIR="+runDir)
		if out, err := cmd.CombinedOutput(); err != nil {
			msg := "scripts/" + s + " finds no running server under LAKE_RUN_DIR=" + runDir + ": " + strings.TrimSpace(string(out))
			if os.Getenv("LAKE_REQUIRE_DYNAMODB") == "1" || os.Getenv("LAKE_REQUIRE_S3") == "1" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	bucket := s3local.Bucket(t)
	for _, order := range [][2]string{{"s3-local", "dynamodb-local"}, {"dynamodb-local", "s3-local"}} {
		t.Run(order[0]+" then "+order[1], func(t *testing.T) {
			table := ddblocal.LakeTable(t, ddblocal.Client(t))
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			script := `set -eu
eval "$("$ROOT/scripts/` + order[0] + `" env)"
eval "$("$ROOT/scripts/` + order[1] + `" env)"
"$LAKE" --store "s3://$BUCKET/env" data put data/t/i/d/1/raw f
echo "s3=[$("$LAKE" --store "s3://$BUCKET/env" data get data/t/i/d/1/raw)]"
"$LAKE" --store "dynamodb://$TABLE" init
"$LAKE" --store "dynamodb://$TABLE" put k v
echo "dynamodb=[$("$LAKE" --store "dynamodb://$TABLE" get k)]"
`
			cmd := exec.Command("bash", "-c", script)
			cmd.Dir = dir
			// Only what the scripts export: none of the test's own AWS settings.
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "LAKE_RUN_DIR=" + runDir,
				"ROOT=" + root, "LAKE=" + lakeBin, "BUCKET=" + bucket, "TABLE=" + table}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			if !strings.Contains(string(out), "s3=[x]") || !strings.Contains(string(out), "dynamodb=[v]") {
				t.Fatalf("the reads did not return what was written:\n%s", out)
			}
		})
	}
}
