package locktest_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/lock/locktest"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/metastore/remotestore"
	"github.com/lakemeta/lake/server"
)

func bolt(t *testing.T) *metastore.Store {
	d, err := boltstore.Open(filepath.Join(t.TempDir(), "lake.db"), &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s := metastore.New(d)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMetastoreBolt(t *testing.T) {
	locktest.RunStorageTests(t, func(t *testing.T) lock.Storage { return lock.Metastore(bolt(t)) })
}

func TestMetastoreDynamoDB(t *testing.T) {
	locktest.RunStorageTests(t, func(t *testing.T) lock.Storage {
		api := ddb.NewClient(ddblocal.Config(t), "")
		opts := dynamostore.Options{Table: ddblocal.TableName(t), Layout: dynamostore.LayoutV2}
		if err := dynamostore.Create(context.Background(), api, opts); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			api.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(opts.Table + dynamostore.V2Suffix)})
			api.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(opts.Table)})
		})
		d, err := dynamostore.Open(context.Background(), api, opts)
		if err != nil {
			t.Fatal(err)
		}
		s := metastore.New(d)
		t.Cleanup(func() { s.Close() })
		return lock.Metastore(s)
	})
}

func TestMetastoreNode(t *testing.T) {
	locktest.RunStorageTests(t, func(t *testing.T) lock.Storage {
		srv, err := server.New(bolt(t), &server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		url, hs, err := server.ServeLoopback(srv)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { hs.Close() })
		d, err := remotestore.New(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := metastore.New(d)
		t.Cleanup(func() { s.Close() })
		return lock.Metastore(s)
	})
}

// unfenced is a storage whose fenced write ignores its fence: the bug the
// suite must catch.
type unfenced struct{ *lock.MetaStorage }

func (u unfenced) Fenced(ctx context.Context, _ lock.Record, m lock.Mutation) error {
	if m.Old == nil {
		return u.Create(ctx, m.Key, m.Value)
	}
	return u.Swap(ctx, m.Key, m.Old, m.Value)
}

const brokenEnv = "LAKE_LOCKTEST_RUN_BROKEN"

// TestSuiteCatchesUnfencedWrites runs the suite against a storage whose
// fenced write ignores its fence, in a child process, and requires it to
// fail there, naming the fenced behaviours.
func TestSuiteCatchesUnfencedWrites(t *testing.T) {
	if os.Getenv(brokenEnv) == "1" {
		locktest.RunStorageTests(t, func(t *testing.T) lock.Storage { return unfenced{lock.Metastore(bolt(t))} })
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteCatchesUnfencedWrites$", "-test.v")
	cmd.Env = append(os.Environ(), brokenEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed a storage whose fenced write ignores its fence:\n%s", out)
	}
	for _, want := range []string{"--- FAIL: TestSuiteCatchesUnfencedWrites/Fenced", "--- FAIL: TestSuiteCatchesUnfencedWrites/ConcurrentFenced"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("suite output lacks %q:\n%s", want, out)
		}
	}
}
