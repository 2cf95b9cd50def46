package storeurl_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/lakemeta/lake/backend/boltstore"
	"github.com/lakemeta/lake/metastore"
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
