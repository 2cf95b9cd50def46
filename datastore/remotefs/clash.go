package remotefs

// ChecksClashes reports that a commit through the node is refused when it
// would make a path both a file and a directory: the node checks the
// commit's own files (datastore.CheckCommit) and its driver checks the
// rest in its atomic write, answering 409 with the clash, which this
// driver returns as the same *metastore.ConflictError (datastore.AsClash
// reads it). A node whose driver does not check (see docs/sync.md) lets a
// clash with earlier files through.
func (d *Driver) ChecksClashes() bool { return true }

// CrossPartitionClashes reports what the node's driver does; this driver
// cannot know it and answers for a node over bolt or DynamoDB.
func (d *Driver) CrossPartitionClashes() bool { return true }
