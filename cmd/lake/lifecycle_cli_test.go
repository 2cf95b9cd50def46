package main

import (
	"strings"
	"testing"

	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/s3local"
)

// TestDataLifecycleCLI: namespaces keep their files apart; model rm orphans
// a model; prune without --apply lists and deletes nothing; prune --apply
// drops only the orphaned model (never a live one, never data without a
// definition) and removes it from the catalog and the partitions; bad
// input exits 2, a missing model 3.
func TestDataLifecycleCLI(t *testing.T) {
	t.Run("bolt", func(t *testing.T) { testDataLifecycleCLI(t, "bolt://./lake.db") })
	t.Run("dynamodb", func(t *testing.T) {
		testDataLifecycleCLI(t, "dynamodb://"+ddblocal.TableName(t)+"?endpoint="+ddblocal.Endpoint(t))
	})
	t.Run("s3", func(t *testing.T) { testDataLifecycleCLI(t, "s3://"+s3local.Bucket(t)+"/life") })
}

func testDataLifecycleCLI(t *testing.T, store string) {
	dir := t.TempDir()
	lake := func(stdin string, args ...string) result {
		return run(t, dir, stdin, append([]string{"--store", store}, args...)...)
	}
	ok(t, lake("", "data", "init"))
	if strings.HasPrefix(store, "dynamodb://") {
		t.Cleanup(func() { deleteDataTable(t, store) })
	}
	ns := func(n string, args ...string) result {
		return lake("x", append([]string{"data", "--namespace", n}, args...)...)
	}
	for _, m := range []string{"m/live", "m/gone"} {
		ok(t, ns("a", "put", "data/"+m+"/model.yaml", "-"))
		ok(t, ns("a", "put", "data/"+m+"/out/1/raw", "-"))
	}
	ok(t, ns("a", "put", "data/m/nodef/out/1/raw", "-"))
	ok(t, ns("b", "put", "data/m/gone/out/1/raw", "-"))
	if got := ok(t, ns("b", "ls")).stdout; got != "data/m/gone/out/1/raw\n" {
		t.Fatalf("namespace b lists %q", got)
	}
	if got := ok(t, lake("", "data", "ls")).stdout; got != "" {
		t.Fatalf("the default namespace lists %q", got)
	}
	out := ok(t, lake("", "data", "namespaces")).stdout
	for _, want := range []string{"a ", "b ", "default "} {
		if !strings.Contains(out, want) {
			t.Fatalf("namespaces = %q, missing %q", out, want)
		}
	}
	if r := ns("a", "model", "rm", "m/none"); r.code != exitNotFound {
		t.Fatalf("model rm of a model without a definition: %+v, want exit 3", r)
	}
	if r := ns("a", "model", "rm", "notamodel"); r.code != exitUsage {
		t.Fatalf("model rm of a bad name: %+v, want exit 2", r)
	}
	if r := lake("", "data", "--namespace", "_catalog", "ls"); r.code != exitUsage {
		t.Fatalf("the internal catalog scope as --namespace: %+v, want exit 2", r)
	}
	ok(t, ns("a", "model", "rm", "m/gone"))
	cat := ok(t, lake("", "data", "catalog", "--all")).stdout
	if !strings.Contains(cat, "a\tm/gone\torphaned\t") || !strings.Contains(cat, "a\tm/live\tlive\t") || !strings.Contains(cat, "a\tm/nodef\tundefined\t") {
		t.Fatalf("catalog after model rm:\n%s", cat)
	}
	// Without --apply: a list, and nothing deleted.
	r := ok(t, ns("a", "prune"))
	if strings.Count(r.stdout, "\n") != 1 || !strings.HasPrefix(r.stdout, "drop-model\ta\tm/gone\t") || !strings.Contains(r.stderr, "nothing was deleted") {
		t.Fatalf("prune without --apply: %+v", r)
	}
	if got := ok(t, ns("a", "ls")).stdout; got != "data/m/gone/out/1/raw\ndata/m/live/model.yaml\ndata/m/live/out/1/raw\ndata/m/nodef/out/1/raw\n" {
		t.Fatalf("after prune without --apply namespace a lists %q", got)
	}
	// With --apply: the orphaned model only, whole.
	ok(t, ns("a", "prune", "--apply"))
	if got := ok(t, ns("a", "ls")).stdout; got != "data/m/live/model.yaml\ndata/m/live/out/1/raw\ndata/m/nodef/out/1/raw\n" {
		t.Fatalf("after prune --apply namespace a lists %q", got)
	}
	if got := ok(t, ns("a", "partitions")).stdout; strings.Contains(got, "m/gone") {
		t.Fatalf("the pruned model is still a partition: %q", got)
	}
	if got := ok(t, ns("b", "ls")).stdout; got != "data/m/gone/out/1/raw\n" {
		t.Fatalf("prune in a touched namespace b: %q", got)
	}
	if cat := ok(t, lake("", "data", "catalog", "--namespace", "a")).stdout; strings.Contains(cat, "m/gone") {
		t.Fatalf("the pruned model is still in the catalog:\n%s", cat)
	}
	// The lifecycle policy: set, shown, refused when negative.
	if got := ok(t, ns("a", "lifecycle", "--enable", "--keep-last", "2", "--retention", "1h")).stdout; !strings.Contains(got, "a  ") || !strings.Contains(got, "on") || !strings.Contains(got, "1h0m0s") {
		t.Fatalf("lifecycle set printed %q", got)
	}
	if r := ns("a", "lifecycle", "--keep-last", "-1"); r.code != exitUsage {
		t.Fatalf("negative keep-last: %+v, want exit 2", r)
	}
	// The incremental read: from the beginning, then nothing new.
	r = ok(t, lake("", "data", "catalog", "--since", ""))
	if !strings.Contains(r.stdout, "changed\ta\tm/live\tlive") {
		t.Fatalf("catalog --since \"\": %q", r.stdout)
	}
	_, cur, found := strings.Cut(strings.TrimSpace(r.stderr), "next cursor: ")
	if !found {
		t.Fatalf("catalog --since printed no cursor: %q", r.stderr)
	}
	if got := ok(t, lake("", "data", "catalog", "--since", cur)).stdout; got != "" {
		t.Fatalf("catalog since the latest cursor = %q, want nothing", got)
	}
	if r := lake("", "data", "catalog", "--since", "garbage!"); r.code != exitUsage {
		t.Fatalf("a bad cursor: %+v, want exit 2", r)
	}
}
