package server

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/nodeapi"
)

// newDataNodeOn serves datastore d (its kv half a bolt file of its own).
func newDataNodeOn(t *testing.T, d datastore.Driver) *node {
	t.Helper()
	bd, err := boltstore.Open(filepath.Join(t.TempDir(), "lake.db"), &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	return serveData(t, metastore.New(bd), datastore.New(d))
}

// TestNodeChunkNeedsLiveIntent (issue 26): through a node on DynamoDB and
// on S3, whose intents are keyed by their start time, a raw client's chunk
// PUT is stored only under a live upload intent: without its start 400,
// for a version never begun (or at another start) 409, and after the
// upload was begun 204.
func TestNodeChunkNeedsLiveIntent(t *testing.T) {
	backends := map[string]func(t *testing.T) datastore.Driver{
		"dynamodb": func(t *testing.T) datastore.Driver {
			table := ddblocal.TableName(t)
			ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
			d, err := dynamofs.Open(t.Context(), ddb.NewClient(ddblocal.Config(t), ""), dynamofs.Options{Table: table})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		"s3": func(t *testing.T) datastore.Driver {
			d, err := s3fs.Open(t.Context(), s3local.Client(t), s3fs.Options{Bucket: s3local.Bucket(t), Prefix: "lake/ds"})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			n := newDataNodeOn(t, open(t))
			version := strings.Repeat("a", 32)
			started := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
			chunk := func(q url.Values, b string) reply {
				q.Set("version", version)
				q.Set("i", "0")
				return n.call(t, "PUT", dataPath(nodeapi.DataChunk, q.Encode()), []byte(b))
			}
			at := func(t time.Time) url.Values {
				return url.Values{nodeapi.DataChunkStarted: {t.Format(time.RFC3339Nano)}}
			}
			want(t, "a chunk without its intent's start", chunk(url.Values{}, "x"), 400, nodeapi.CodeInvalidArgument)
			want(t, "a chunk of a version never begun", chunk(at(started), "x"), 409, nodeapi.CodeRefused)
			body, _ := json.Marshal(datastore.Staged{Path: "data/t/i/f", Version: version, Started: started})
			want(t, "begin the upload", n.call(t, "POST", dataPath(nodeapi.DataUpload, ""), body), 204, "")
			want(t, "a chunk at another start", chunk(at(started.Add(time.Millisecond)), "x"), 409, nodeapi.CodeRefused)
			want(t, "a chunk under its live intent", chunk(at(started), "x"), 204, "")
			want(t, "a malformed start", chunk(url.Values{nodeapi.DataChunkStarted: {"yesterday"}}, "x"), 400, nodeapi.CodeInvalidArgument)
		})
	}
}
