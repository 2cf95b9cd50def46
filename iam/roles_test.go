package iam

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
)

// The node and reader roles through a migration: each phase's workload
// (a node serving kv and datastore requests; the CLI's reads) runs through
// the recording proxy, checked against the policy generated for the state
// the store was in when the phase began. The migrator's own commands are
// checked against the migrator role.
func TestNodeReaderMigratorRoles(t *testing.T) {
	r := newRecorder(t, false)
	table := ddblocal.TableName(t)
	st := "dynamodb://" + table
	r.lake("--store", st, "init")
	r.lake("--store", st, "data", "init")
	r.requests()

	nodePhase := func(state, key string) {
		t.Helper()
		node := gen(t, RoleNode, withState(params(table), state))
		reader := gen(t, RoleReader, withState(params(table), state))
		url, stop := r.serve(st)
		f := file(t, r.dir, "v", "hello")
		r.lake("--store", url, "put", key, "1")
		r.lake("--store", url, "cas", key, "2", "--expect", "1")
		r.lake("--store", url, "get", key)
		r.lake("--store", url, "ls", "tbl/")
		r.lake("--store", url, "rm", key, "--expect", "2")
		r.lake("--store", url, "put", key, "3")
		r.lake("--store", url, "data", "--namespace", "a", "put", "data/t/"+state+"/n/1/raw", f)
		r.lake("--store", url, "data", "--namespace", "a", "get", "data/t/"+state+"/n/1/raw")
		r.lake("--store", url, "data", "--namespace", "a", "ls", "data/")
		time.Sleep(1200 * time.Millisecond) // a heartbeat into the node registry
		stop()
		check(t, "node in "+state, node, r.requests())

		r.lake("--store", st, "get", key)
		r.lake("--store", st, "ls", "tbl/")
		r.lake("--store", st, "data", "--namespace", "a", "get", "data/t/"+state+"/n/1/raw")
		r.lake("--store", st, "data", "--namespace", "a", "ls", "data/")
		check(t, "reader in "+state, reader, r.requests())
	}
	// The migrator's steps between the phases are TestMigratorRole's to
	// check: their requests are dropped here.
	migrate := func(args ...string) {
		r.lake(append([]string{"--store", st, "dynamo-migrate"}, args...)...)
		r.requests()
	}
	nodePhase(StateV1, "tbl/a")
	migrate("dual")
	nodePhase(StateDual, "tbl/b")
	migrate("--page-size", "10")
	migrate("verify")
	migrate("finalize")
	nodePhase(StateV2Auth, "tbl/c")
	migrate("retire-v1", "--retention", "0s")
	nodePhase(StateV2Only, "tbl/d")
}

func withState(p Params, s string) Params { p.State = s; return p }

func TestMigratorRole(t *testing.T) {
	r := newRecorder(t, false)
	table := ddblocal.TableName(t)
	st := "dynamodb://" + table
	r.lake("--store", st, "init")
	r.lake("--store", st, "put", "tbl/a", "1")
	r.lake("--store", st, "put", "append-operation/a/1", "1")
	r.requests()
	migrator := gen(t, RoleMigrator, withState(params(table), StateV1))
	for _, step := range [][]string{{"status"}, {"dual"}, {"--page-size", "1"}, {"verify"}, {"finalize"}, {"status"}, {"retire-v1", "--retention", "0s", "--delete-table"}} {
		r.lake(append([]string{"--store", st, "dynamo-migrate"}, step...)...)
	}
	check(t, "migrator", migrator, r.requests())
}

// The deny statement refuses a legacy writer's write to v1 (and nothing on
// v2); a standalone v2 store has no v1 to deny.
func TestDenyLegacyWrites(t *testing.T) {
	p := withState(params("lake"), StateV2Auth)
	p.Partition = "aws"
	d := gen(t, RoleDenyLegacyWrites, p)
	for _, a := range []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"} {
		if dec := d.Evaluate(Request{Action: a, Resource: p.arn("lake"), LeadingKeys: []string{"tbl/a"}}); dec.Allowed || dec.Sid != "DenyLegacyWrites" {
			t.Fatalf("%s on v1: %+v, want the explicit deny", a, dec)
		}
	}
	if dec := d.Evaluate(Request{Action: "dynamodb:PutItem", Resource: p.arn("lake_prefix_v2")}); dec.Sid != "" {
		t.Fatalf("v2 write decided by %q, want nothing", dec.Sid)
	}
	if _, err := Generate(RoleDenyLegacyWrites, withState(params("lake"), StateStandalone)); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Fatalf("deny-legacy-writes on a standalone v2 store: %v, want a refusal", err)
	}
}

// A sync worker of namespace a, on DynamoDB and on S3: its workload is
// allowed; namespace b's worker's requests for b's keys are all refused by
// a's policy.
func TestSyncWorkerRole(t *testing.T) {
	for _, backend := range []string{"dynamodb", "s3"} {
		t.Run(backend, func(t *testing.T) {
			r := newRecorder(t, backend == "s3")
			table := ddblocal.TableName(t)
			p := params(table)
			st := "dynamodb://" + table
			if backend == "s3" {
				bucket := fmt.Sprintf("lake-iam-%d", time.Now().UnixNano()%1e12)
				p = Params{Region: "us-east-1", Account: "123456789012", Bucket: bucket, Prefix: "lk"}
				st = "s3://" + bucket + "/lk"
			}
			r.lake("--store", st, "data", "init")
			r.requests()
			workload := func(ns string) {
				w := filepath.Join(r.dir, "w-"+ns)
				file(t, w, "data/t/i1/result/1/raw", "one")
				file(t, w, "data/t/i1/model.yaml", "type: t")
				r.lake("--store", st, "data", "--namespace", ns, "sync", "-C", w)
				file(t, w, "data/t/i1/result/2/raw", "two")
				r.lake("--store", st, "data", "--namespace", ns, "status", "-C", w)
				r.lake("--store", st, "data", "--namespace", ns, "sync", "-C", w)
				r.lake("--store", st, "data", "--namespace", ns, "run", "-C", w, "--", "sh", "-c", "echo 3 > data/t/i1/result/3/raw || (mkdir -p data/t/i1/result/3 && echo 3 > data/t/i1/result/3/raw)")
				r.lake("--store", st, "data", "--namespace", ns, "get", "data/t/i1/result/1/raw")
				r.lake("--store", st, "data", "--namespace", ns, "ls", "data/")
				r.lake("--store", st, "data", "--namespace", ns, "changes", "t/i1")
				r.lake("--store", st, "data", "lock", "ls", ns)
			}
			a := gen(t, RoleSyncWorker, withNS(withState(p, StateV1), "a"))
			workload("a")
			check(t, "sync-worker a", a, r.requests())

			workload("b")
			bReqs := r.requests()
			allowedB := 0
			for _, q := range bReqs {
				if !touchesNamespace(q, "b") {
					continue
				}
				if a.Evaluate(toRequest(q)).Allowed {
					t.Errorf("a's policy allows b's request %s", q)
				}
				allowedB++
			}
			if allowedB == 0 {
				t.Fatalf("b's workload sent no request for b's keys: %d requests", len(bReqs))
			}

			// The root namespace ("default"): its unprefixed kinds.
			workload(datastore.DefaultNamespace)
			check(t, "sync-worker default", gen(t, RoleSyncWorker, withNS(withState(p, StateV1), datastore.DefaultNamespace)), r.requests())
		})
	}
}

func withNS(p Params, ns string) Params { p.Namespace = ns; return p }

// touchesNamespace says a request names namespace ns's own keys or prefix.
func touchesNamespace(q interface {
	String() string
}, ns string) bool {
	s := q.String()
	return strings.Contains(s, "s#"+ns+"#") || strings.Contains(s, "/n/"+ns+"/") || strings.Contains(s, "rec/"+ns) || strings.Contains(s, "gen/"+ns)
}

func TestReshapeRole(t *testing.T) {
	r := newRecorder(t, false)
	table := ddblocal.TableName(t)
	r.lake("--store", "dynamodb://"+table, "reshape", "demo", "--workspaces", "1", "--comments", "3")
	r.requests()
	spec := file(t, r.dir, "spec.json", fmt.Sprintf(`{"kind": "add-index", "table": %q,
	 "index": {"name": "GSI1", "partitionKey": {"attribute": "GSI1PK"}, "sortKey": {"attribute": "GSI1SK"}},
	 "covers": {"keyPrefixes": {"PK": "WS#", "SK": "DOC#"}, "present": ["commentId"]},
	 "derive": {"GSI1PK": "MEMBER#{memberId}", "GSI1SK": "CMT#{createdAt}#{commentId}"}}`, table))
	rw := file(t, r.dir, "rw.json", fmt.Sprintf(`{"kind": "rewrite-key", "table": %q,
	 "covers": {"keyPrefixes": {"PK": "WS#", "SK": "DOC#"}, "present": ["commentId"]},
	 "rewrite": {"key": {"PK": "MEMBER#{memberId}", "SK": "CMT#{createdAt}#{commentId}"}}}`, table))
	for _, args := range [][]string{{"plan", spec}, {"apply", "--poll", "50ms", spec}, {"verify", spec},
		{"plan", rw}, {"apply", rw}, {"verify", rw}, {"finalize", "--settle", "-1s", rw}} {
		r.lake(append([]string{"reshape"}, args...)...)
	}
	check(t, "reshape", gen(t, RoleReshape, Params{Region: "us-east-1", Account: "123456789012", ReshapeTable: table}), r.requests())
}
