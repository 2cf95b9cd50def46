package syncload_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lakemeta/lake/bench/syncload"
	"github.com/lakemeta/lake/metastore"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*syncload.Config)
	}{
		{"no workers", func(c *syncload.Config) { c.Workers = 0 }},
		{"no bound", func(c *syncload.Config) { c.Duration, c.Iterations = 0, 0 }},
		{"huge files", func(c *syncload.Config) { c.FileSize = syncload.MaxFileSize + 1 }},
		{"bad pull", func(c *syncload.Config) { c.Pull = "all" }},
		{"bad lock", func(c *syncload.Config) { c.Lock = "table" }},
		{"bad commit", func(c *syncload.Config) { c.Commit = "some" }},
		{"bad models", func(c *syncload.Config) { c.Models = "forever" }},
		{"bad catalog", func(c *syncload.Config) { c.Catalog = "dump" }},
		{"bad lifecycle", func(c *syncload.Config) { c.Lifecycle = "on-19" }},
		{"no interval", func(c *syncload.Config) { c.Interval = 0 }},
	} {
		c := syncload.DefaultConfig()
		tc.edit(&c)
		if err := c.Validate(); !errors.Is(err, metastore.ErrInvalidArgument) {
			t.Errorf("%s: %v, want an invalid argument", tc.name, err)
		}
	}
	if err := syncload.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range syncload.Seed004(syncload.DefaultConfig(), time.Minute) {
		if err := c.Validate(); err != nil || c.Duration != time.Minute {
			t.Errorf("%s: %v, duration %s", c.Name, err, c.Duration)
		}
	}
}

func TestConfigStoreURL(t *testing.T) {
	for in, want := range map[string]string{
		"bolt:///tmp/x.db":                 "bolt:///tmp/x.db-c2",
		"dynamodb://t?endpoint=http://h:1": "dynamodb://t-c2?endpoint=http://h:1",
		"dynamodb://t":                     "dynamodb://t-c2",
		"s3://bucket/pre/fix":              "s3://bucket/pre/fix-c2",
		"s3://bucket/pre/":                 "s3://bucket/pre-c2",
	} {
		if got, err := syncload.ConfigStoreURL(in, 2); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := syncload.ConfigStoreURL("http://127.0.0.1:7070", 1); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Errorf("a node's URL: %v", err)
	}
}
