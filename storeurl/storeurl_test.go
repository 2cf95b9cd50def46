package storeurl_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/storeurl"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a.db")
	tests := []struct {
		name    string
		url     string
		create  bool
		wantErr error
	}{
		{"no scheme", "lake.db", false, metastore.ErrInvalidArgument},
		{"unknown scheme", "s3://bucket/x", false, metastore.ErrInvalidArgument},
		{"empty bolt path", "bolt://", false, metastore.ErrInvalidArgument},
		{"bolt with query", "bolt://" + file + "?x=1", true, metastore.ErrInvalidArgument},
		{"missing bolt file", "bolt://" + file, false, boltstore.ErrMissing},
		{"create bolt file", "bolt://" + file, true, nil},
		{"existing bolt file", "bolt://" + file, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := storeurl.Open(t.Context(), tc.url, &storeurl.Options{Create: tc.create})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Open(%q) = %v, want %v", tc.url, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%q): %v", tc.url, err)
			}
			s.Close()
		})
	}
}

// TestOpenBoltReadOnlyAndInit: ReadOnly and Init reach the bolt store: a
// read-only store refuses writes and leaves the file as it was; only Init
// makes an empty file a store (issue 11).
func TestOpenBoltReadOnlyAndInit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "z.db")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	url := "bolt://" + file
	for _, opts := range []*storeurl.Options{nil, {ReadOnly: true}, {Create: true}} {
		if _, err := storeurl.Open(t.Context(), url, opts); !errors.Is(err, boltstore.ErrNotStore) {
			t.Fatalf("Open(%+v) of an empty file: %v, want ErrNotStore", opts, err)
		}
	}
	s, err := storeurl.Open(t.Context(), url, &storeurl.Options{Create: true, Init: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	before, _ := os.ReadFile(file)
	s, err = storeurl.Open(t.Context(), url, &storeurl.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(t.Context(), "tbl/a", nil); !errors.Is(err, metastore.ErrRefused) {
		t.Fatalf("Put on a read-only store: %v", err)
	}
	if after, _ := os.ReadFile(file); !bytes.Equal(before, after) {
		t.Fatal("a read-only open changed the file")
	}
}

func TestParseDynamo(t *testing.T) {
	t.Setenv("LAKE_DYNAMODB_TABLE", "fromenv")
	tests := []struct {
		rest    string
		want    storeurl.DynamoTarget
		wantErr bool
	}{
		{"lake", storeurl.DynamoTarget{Table: "lake", Layout: "auto"}, false},
		{"", storeurl.DynamoTarget{Table: "fromenv", Layout: "auto"}, false},
		{"lake?layout=v1", storeurl.DynamoTarget{Table: "lake", Layout: "v1"}, false},
		{"lake?layout=v2&region=eu-west-1&endpoint=http://127.0.0.1:8000", storeurl.DynamoTarget{Table: "lake", Layout: "v2", Region: "eu-west-1", Endpoint: "http://127.0.0.1:8000"}, false},
		{"lake?layout=v3", storeurl.DynamoTarget{}, true},
		{"lake?layout=v1&layout=v2", storeurl.DynamoTarget{}, true},
		{"lake?endpoint=ftp://x", storeurl.DynamoTarget{}, true},
		{"lake?endpoint=notaurl", storeurl.DynamoTarget{}, true},
		{"lake?colour=blue", storeurl.DynamoTarget{}, true},
		{"lake?region=", storeurl.DynamoTarget{}, true},
		{"lake/x", storeurl.DynamoTarget{}, true},
		{"lake?%zz", storeurl.DynamoTarget{}, true},
	}
	for _, tc := range tests {
		got, err := storeurl.ParseDynamo(tc.rest)
		if tc.wantErr {
			if !errors.Is(err, metastore.ErrInvalidArgument) {
				t.Errorf("ParseDynamo(%q) = %+v, %v; want ErrInvalidArgument", tc.rest, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseDynamo(%q) = %+v, %v; want %+v", tc.rest, got, err, tc.want)
		}
	}
	t.Setenv("LAKE_DYNAMODB_TABLE", "")
	if _, err := storeurl.ParseDynamo(""); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Errorf("no table anywhere: %v", err)
	}
}

// TestOpenDynamo opens, creates and reopens both layouts through URLs, on
// DynamoDB Local.
func TestOpenDynamo(t *testing.T) {
	ddblocal.Endpoint(t)
	api := ddb.NewClient(ddblocal.Config(t), "")
	for _, layout := range []string{"v1", "v2", "auto"} {
		table := ddblocal.LakeTable(t, api)
		u := "dynamodb://" + table + "?layout=" + layout
		if _, err := storeurl.Open(t.Context(), u, nil); !errors.Is(err, dynamostore.ErrNoTable) {
			t.Fatalf("open before init: %v", err)
		}
		s, err := storeurl.Open(t.Context(), u, &storeurl.Options{Create: true})
		if err != nil {
			t.Fatalf("init %s: %v", u, err)
		}
		if err := s.Put(t.Context(), "tbl/a", []byte(layout)); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s, err = storeurl.Open(t.Context(), u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := s.Get(t.Context(), "tbl/a"); err != nil || string(v) != layout {
			t.Fatalf("%s: Get = %q, %v", u, v, err)
		}
		s.Close()
	}
}

// FuzzParseDynamo: parsing never panics, and what it accepts is a valid
// target.
func FuzzParseDynamo(f *testing.F) {
	for _, s := range []string{"lake", "lake?layout=v2", "lake?endpoint=http://127.0.0.1:8000&region=x", "?", "a/b", "lake?%zz", "lake?layout=v1&layout=v2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rest string) {
		got, err := storeurl.ParseDynamo(rest)
		if err != nil {
			if !errors.Is(err, metastore.ErrInvalidArgument) {
				t.Fatalf("ParseDynamo(%q) = %v: not an invalid-argument error", rest, err)
			}
			return
		}
		if got.Table == "" || (got.Layout != "auto" && got.Layout != "v1" && got.Layout != "v2") {
			t.Fatalf("ParseDynamo(%q) accepted %+v", rest, got)
		}
	})
}

// FuzzOpenURL: opening any string as a store URL never panics; a bolt URL
// never creates a file without Create.
func FuzzOpenURL(f *testing.F) {
	for _, s := range []string{"bolt://x.db", "bolt://", "nope", "s3://a", "bolt://a?b", "dynamodb://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if strings.HasPrefix(raw, "dynamodb://") {
			return // needs AWS configuration; covered by FuzzParseDynamo
		}
		t.Chdir(t.TempDir())
		s, err := storeurl.Open(t.Context(), raw, nil)
		if err == nil {
			s.Close()
			t.Fatalf("Open(%q) succeeded on an empty directory without Create", raw)
		}
	})
}
