package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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

// reshapeSpec writes the shipped example spec, pointed at table, into dir.
func reshapeSpec(t *testing.T, dir, table string) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/reshape/saas-comments.json")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), `"table": "saas"`, `"table": "`+table+`"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReshapeCLIKilledApply walks the documented commands with the built
// binary on DynamoDB Local, killing `lake reshape apply` (SIGKILL) at random
// points of its sweep and running it again until it finishes; verify then
// exits 0, and exits 6 after an old writer edits a converted comment.
func TestReshapeCLIKilledApply(t *testing.T) {
	ddblocal.Endpoint(t)
	table := ddblocal.TableName(t)
	client := ddblocal.Client(t)
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	dir := t.TempDir()
	spec := reshapeSpec(t, dir, table)
	lake := func(args ...string) result { return run(t, dir, "", args...) }

	r := ok(t, lake("--store", "dynamodb://"+table, "reshape", "demo", "--workspaces", "6", "--comments", "20"))
	if !strings.Contains(r.stdout, `begins_with(SK, "DOC#2026-04-01#x7#CMT#")`) || strings.Count(r.stdout, "memberId=") != 20 {
		t.Fatalf("demo: %s", r.stdout)
	}
	if r := lake("--store", "dynamodb://"+table, "reshape", "demo"); r.code != exitRefused {
		t.Fatalf("demo on an existing table: exit %d %s", r.code, r.stderr)
	}
	r = ok(t, lake("reshape", "plan", spec))
	if !strings.Contains(r.stdout, "derivable          480 (missing 480, stale 0)") {
		t.Fatalf("plan: %s", r.stdout)
	}
	if r := lake("reshape", "verify", spec); r.code != exitRefused || !strings.Contains(r.stderr, "coverage is incomplete") {
		t.Fatalf("verify before apply: exit %d %s", r.code, r.stderr)
	}

	rng := rand.New(rand.NewPCG(3, 4))
	kills := 0
	for attempt := 0; kills < 3; attempt++ {
		if attempt > 20 {
			t.Fatalf("could not kill apply mid-sweep (%d kills)", kills)
		}
		cmd := exec.Command(lakeBin, "reshape", "apply", "--poll", "50ms", "--segments", "3", "--page-size", "5", "--workers", "1", spec)
		cmd.Dir = dir
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill it a random while after its sweep reported progress.
		sc := bufio.NewScanner(stderr)
		swept := false
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "apply: ") {
				swept = true
				break
			}
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		cmd.Process.Kill()
		go func() {
			for sc.Scan() {
			}
		}()
		err = cmd.Wait()
		// A kill that came after the sweep ended (its summary printed)
		// killed no sweep: the next apply starts a new one, which a later
		// kill cuts.
		if swept && err != nil && !strings.Contains(stdout.String(), "sweep: ") {
			kills++
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "spec.state.db")); err != nil {
		t.Fatalf("no state file beside the spec: %v", err)
	}
	r = ok(t, lake("reshape", "apply", "--poll", "50ms", spec))
	if !strings.Contains(r.stdout, "resumed") {
		t.Fatalf("apply after %d kills did not resume: %s", kills, r.stdout)
	}
	r = ok(t, lake("reshape", "verify", spec))
	if !strings.Contains(r.stdout, "coverage complete") {
		t.Fatalf("verify: %s", r.stdout)
	}
	var rep struct {
		Complete bool `json:"complete"`
		Total    struct {
			Converted int `json:"converted"`
		} `json:"total"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "spec.verify.json"))
	if err != nil || json.Unmarshal(b, &rep) != nil || !rep.Complete || rep.Total.Converted != 480 {
		t.Fatalf("report: %v %s", err, b)
	}

	// An old writer changes a converted comment's member: verify exits 6
	// and names it, apply repairs it, verify exits 0.
	out, err := client.Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(table), Limit: aws.Int32(100)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		if _, ok := it["commentId"]; !ok {
			continue
		}
		it["memberId"] = &types.AttributeValueMemberS{Value: "u999"}
		if _, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
			t.Fatal(err)
		}
		break
	}
	r = lake("reshape", "verify", spec)
	if r.code != exitRefused || !strings.Contains(r.stdout, "stale:") || !strings.Contains(r.stdout, `GSI1PK is "MEMBER#`) {
		t.Fatalf("verify after an old write: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = ok(t, lake("reshape", "apply", spec))
	if !strings.Contains(r.stdout, "repaired 1,") {
		t.Fatalf("apply: %s", r.stdout)
	}
	ok(t, lake("reshape", "verify", spec))
}
