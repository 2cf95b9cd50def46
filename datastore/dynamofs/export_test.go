package dynamofs

// Shard exposes the shard of a partition to the tests, which need
// partitions that share one.
func Shard(s string) string { return shard(s) }
