package iam

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden policy documents in testdata/")

// goldenCases are the documents kept in testdata/ for review: a change to a
// role's privileges shows in the diff of its golden file.
var goldenCases = []struct {
	name, role string
	p          Params
}{
	{"node-v1", RoleNode, Params{Table: "lake", State: StateV1}},
	{"node-v2-authoritative", RoleNode, Params{Table: "lake", State: StateV2Auth}},
	{"node-v2-only", RoleNode, Params{Table: "lake", State: StateV2Only}},
	{"node-s3", RoleNode, Params{Bucket: "lake-bucket", Prefix: "lk"}},
	{"reader-v1", RoleReader, Params{Table: "lake", State: StateV1}},
	{"reader-v2-only", RoleReader, Params{Table: "lake", State: StateV2Only}},
	{"migrator", RoleMigrator, Params{Table: "lake", State: StateV1}},
	{"sync-worker-dynamodb-a", RoleSyncWorker, Params{Table: "lake", State: StateV1, Namespace: "a"}},
	{"sync-worker-dynamodb-default", RoleSyncWorker, Params{Table: "lake", State: StateV1, Namespace: "default"}},
	{"sync-worker-s3-a", RoleSyncWorker, Params{Bucket: "lake-bucket", Prefix: "lk", Namespace: "a"}},
	{"reshape", RoleReshape, Params{ReshapeTable: "saas"}},
	{"deny-legacy-writes", RoleDenyLegacyWrites, Params{Table: "lake", State: StateV2Auth}},
}

func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			c.p.Region, c.p.Account = "us-east-1", "123456789012"
			got := gen(t, c.role, c.p).JSON()
			path := filepath.Join("testdata", c.name+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./iam -run TestGolden -update writes it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s differs from %s (review, then go test ./iam -run TestGolden -update):\n%s", c.name, path, got)
			}
		})
	}
}

// docs/iam.md shows one golden document verbatim and names every
// statement of every role.
func TestDocsShowTheGoldenDocuments(t *testing.T) {
	doc, err := os.ReadFile("../docs/iam.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/sync-worker-dynamodb-a.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, append(append([]byte("```json\n"), want...), "```"...)) {
		t.Fatal("docs/iam.md's example differs from testdata/sync-worker-dynamodb-a.json")
	}
	for _, c := range goldenCases {
		c.p.Region, c.p.Account = "us-east-1", "123456789012"
		for _, s := range gen(t, c.role, c.p).Statement {
			if !bytes.Contains(doc, []byte("`"+s.Sid+"`")) {
				t.Errorf("docs/iam.md does not name statement %s of %s", s.Sid, c.name)
			}
		}
	}
}
