package migrate_test

import "github.com/lakemeta/lake/keyspace"

func keyspaceBucket(key string) string { return keyspace.DefaultParams().BucketOf(key) }
