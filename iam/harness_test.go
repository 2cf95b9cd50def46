package iam

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/awsrec"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/s3local"
)

var lakeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lake-iam-")
	if err != nil {
		panic(err)
	}
	lakeBin = filepath.Join(dir, "lake")
	out, err := exec.Command("go", "build", "-o", lakeBin, "../cmd/lake").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build lake: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// recorder is a recording proxy in front of DynamoDB Local (and of the S3
// server), with the commands of a role run through it by the built binary.
type recorder struct {
	t   *testing.T
	ddb *awsrec.Proxy
	s3  *awsrec.Proxy
	dir string
	env []string
}

func newRecorder(t *testing.T, withS3 bool) *recorder {
	t.Helper()
	ep := ddblocal.Endpoint(t)
	c := ddblocal.Client(t)
	var mu sync.Mutex
	keys := map[string]string{}
	hashKey := func(table, index string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if k, ok := keys[table+"/"+index]; ok {
			return k, nil
		}
		out, err := c.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return "", err
		}
		var ks []types.KeySchemaElement
		switch {
		case index == "":
			ks = out.Table.KeySchema
		default:
			for _, g := range out.Table.GlobalSecondaryIndexes {
				if aws.ToString(g.IndexName) == index {
					ks = g.KeySchema
				}
			}
			for _, l := range out.Table.LocalSecondaryIndexes {
				if aws.ToString(l.IndexName) == index {
					ks = l.KeySchema
				}
			}
		}
		for _, k := range ks {
			if k.KeyType == types.KeyTypeHash {
				keys[table+"/"+index] = aws.ToString(k.AttributeName)
				return keys[table+"/"+index], nil
			}
		}
		return "", fmt.Errorf("no hash key for %s/%s", table, index)
	}
	p, err := awsrec.Start(awsrec.Options{Target: ep, Service: "dynamodb", HashKey: hashKey, FallbackHashKeys: []string{"bucket", "pk"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	r := &recorder{t: t, ddb: p, dir: t.TempDir()}
	r.env = append(os.Environ(), "AWS_ENDPOINT_URL_DYNAMODB="+p.URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=lakelocal", "AWS_SECRET_ACCESS_KEY=lakelocalsecret")
	if withS3 {
		sp, err := awsrec.Start(awsrec.Options{Target: s3local.Endpoint(t), Service: "s3"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sp.Close() })
		r.s3 = sp
		r.env = append(r.env, "AWS_ENDPOINT_URL_S3="+sp.URL)
	}
	return r
}

// lake runs the binary through the proxies and fails on a non-zero exit.
func (r *recorder) lake(args ...string) string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, lakeBin, args...)
	cmd.Dir = r.dir
	cmd.Env = r.env
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("lake %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// requests returns what was recorded since the last call, and fails on a
// request the proxy could not interpret.
func (r *recorder) requests() []awsrec.Request {
	r.t.Helper()
	out := r.ddb.Requests()
	errs := r.ddb.Errors()
	if r.s3 != nil {
		out = append(out, r.s3.Requests()...)
		errs = append(errs, r.s3.Errors()...)
	}
	if len(errs) > 0 {
		r.t.Fatalf("requests the recorder could not interpret: %v", errs)
	}
	return out
}

// free returns a free loopback address.
func free(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serve starts `lake serve` on the store through the proxies; it returns
// the node's URL and a function that stops it (SIGINT, waited for).
func (r *recorder) serve(store string) (string, func()) {
	r.t.Helper()
	addr := free(r.t)
	cmd := exec.Command(lakeBin, "--store", store, "serve", "--listen", addr, "--node-id", "iam-test")
	cmd.Dir = r.dir
	cmd.Env = r.env
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }) }
	r.t.Cleanup(stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return "http://" + addr, stop
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("node not ready: %v\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// file writes content at dir/name (directories made) and returns the path.
func file(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// check fails unless every request is allowed by doc and every statement
// of doc allowed one of them (or says why it is rare).
func check(t *testing.T, role string, doc Document, reqs []awsrec.Request) {
	t.Helper()
	if len(reqs) == 0 {
		t.Fatalf("%s: the workload sent no request", role)
	}
	used := map[string]bool{}
	var denied []string
	for _, q := range reqs {
		d := doc.Evaluate(toRequest(q))
		if !d.Allowed {
			denied = append(denied, q.String())
			continue
		}
		used[d.Sid] = true
	}
	if len(denied) > 0 {
		slices.Sort(denied)
		t.Errorf("%s: %d requests the policy does not allow:\n  %s\npolicy:\n%s", role, len(denied), strings.Join(slices.Compact(denied), "\n  "), doc.JSON())
	}
	for _, s := range doc.Statement {
		if !used[s.Sid] && s.Rare == "" && s.Effect == "Allow" {
			t.Errorf("%s: statement %s allowed none of the workload's %d requests (unused privilege, or a Rare reason missing)", role, s.Sid, len(reqs))
		}
	}
}

func toRequest(q awsrec.Request) Request {
	return Request{Action: q.Action, Resource: q.Resource, LeadingKeys: q.LeadingKeys, Prefix: q.Prefix, HasPrefix: q.HasPrefix}
}

func params(table string) Params {
	return Params{Region: "us-east-1", Account: "123456789012", Table: table}
}

func gen(t *testing.T, role string, p Params) Document {
	t.Helper()
	d, err := Generate(role, p)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
