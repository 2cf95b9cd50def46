package dynamofs

// WithoutFeedsByKeys makes d's reads of the feeds ChangedPartitions named
// Queries, as before heads named their recent paths (recentpaths.go): for
// the tests of those Queries.
func WithoutFeedsByKeys(d *Driver) { d.noFeedsByKeys = true }
