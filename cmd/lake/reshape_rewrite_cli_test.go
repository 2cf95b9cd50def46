package main

import (
	"bufio"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// killMidSweep runs `lake reshape VERB ... spec` and kills it (SIGKILL) a
// random while after it reported sweep progress, until it was killed kills
// times mid-sweep.
func killMidSweep(t *testing.T, dir, verb string, kills int, rng *rand.Rand, args ...string) {
	t.Helper()
	done := 0
	for attempt := 0; done < kills; attempt++ {
		if attempt > 20 {
			t.Fatalf("could not kill %s mid-sweep (%d kills)", verb, done)
		}
		cmd := exec.Command(lakeBin, append([]string{"reshape", verb}, args...)...)
		cmd.Dir = dir
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stderr)
		swept := false
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), verb+": ") {
				swept = true
				break
			}
		}
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		cmd.Process.Kill()
		go func() {
			for sc.Scan() {
			}
		}()
		if err := cmd.Wait(); swept && err != nil {
			done++
		}
	}
}

// TestReshapeCLIRewriteKilled walks a key rewrite with the built binary on
// DynamoDB Local (issue 15): plan, apply killed with SIGKILL mid-sweep and
// run again, verify, finalize killed likewise and run again; then every
// comment is once under its new key, none under its old one, and rollback
// is refused.
func TestReshapeCLIRewriteKilled(t *testing.T) {
	ddblocal.Endpoint(t)
	table := ddblocal.TableName(t)
	client := ddblocal.Client(t)
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	dir := t.TempDir()
	b, err := os.ReadFile("../../examples/reshape/saas-comments-by-member.json")
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(spec, []byte(strings.Replace(string(b), `"table": "saas"`, `"table": "`+table+`"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	lake := func(args ...string) result { return run(t, dir, "", args...) }
	ok(t, lake("--store", "dynamodb://"+table, "reshape", "demo", "--workspaces", "4", "--comments", "15"))
	const comments = 4 * 4 * 15
	r := ok(t, lake("reshape", "plan", spec))
	if !strings.Contains(r.stdout, "240 covered, 240 with a new key, 0 copies") || strings.Contains(r.stdout, "collision") {
		t.Fatalf("plan: %s", r.stdout)
	}
	if r := lake("reshape", "finalize", spec); r.code != exitRefused || !strings.Contains(r.stderr, "clean verify") {
		t.Fatalf("finalize before verify: exit %d %s", r.code, r.stderr)
	}
	if r := lake("reshape", "rollback", "--settle", "1ms", "--dry-run", spec); r.code != 0 {
		t.Fatalf("rollback dry run: exit %d %s", r.code, r.stderr)
	}

	rng := rand.New(rand.NewPCG(15, 15))
	sweepFlags := []string{"--segments", "3", "--page-size", "5", "--workers", "1"}
	killMidSweep(t, dir, "apply", 3, rng, append(sweepFlags, spec)...)
	r = ok(t, lake(append([]string{"reshape", "apply"}, append(sweepFlags, spec)...)...))
	if !strings.Contains(r.stdout, "resumed") {
		t.Fatalf("apply after kills did not resume: %s", r.stdout)
	}
	r = ok(t, lake("reshape", "verify", spec))
	if !strings.Contains(r.stdout, "equal 240, missing 0, different 0, orphans 0") {
		t.Fatalf("verify: %s", r.stdout)
	}
	killMidSweep(t, dir, "finalize", 3, rng, append(sweepFlags, "--settle", "10ms", spec)...)
	r = ok(t, lake(append([]string{"reshape", "finalize", "--settle", "10ms"}, append(sweepFlags, spec)...)...))
	if !strings.Contains(r.stdout, "phase finalized") {
		t.Fatalf("finalize: %s", r.stdout)
	}

	out, err := client.Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil || out.LastEvaluatedKey != nil {
		t.Fatalf("scan: %v (one page expected)", err)
	}
	seen := map[string]int{}
	for _, it := range out.Items {
		if _, ok := it["commentId"]; !ok {
			continue
		}
		if _, ok := it["lakeRewrittenFrom"]; ok {
			t.Errorf("marker left on %v", it["SK"])
		}
		id := str(it, "commentId")
		seen[id]++
		if !strings.HasPrefix(str(it, "PK"), "MEMBER#") {
			t.Errorf("comment %s under old key %s", id, str(it, "PK"))
		}
	}
	if len(seen) != comments {
		t.Fatalf("%d distinct comments after finalize, want %d", len(seen), comments)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("comment %s held %d times", id, n)
		}
	}
	if r := lake("reshape", "rollback", spec); r.code != exitRefused {
		t.Fatalf("rollback after finalize: exit %d %s", r.code, r.stderr)
	}
}

func str(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
