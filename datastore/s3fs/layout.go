package s3fs

import "github.com/lakemeta/lake/datastore"

var _ datastore.LayoutSetter = (*Driver)(nil)

// SetLayout implements datastore.LayoutSetter: d (and the namespaces made
// from it afterwards) computes partitions with l.
func (d *Driver) SetLayout(l datastore.Layout) { d.layout = l }

// partition returns the partition of path in d's datastore.
func (d *Driver) partition(path string) string { return d.layout.Partition(path) }

var _ datastore.FreshLayouter = (*Driver)(nil)

// FreshLayout implements datastore.FreshLayouter: a new datastore on S3 is
// recorded "models-v4": its pending marks sit beside the heads (one LIST
// reads both, pending.go), as in "models-v2", its heads hold their
// partitions' path index while it is small (headindex.go), as in
// "models-v3", and each namespace's registry record sits beside its
// heads (listedrecords.go). A lake that does not know that
// layout refuses the datastore rather than write in a format its readers
// do not read.
func (d *Driver) FreshLayout() datastore.Layout { return datastore.LayoutModelsV5 }

// headIndexes reports whether d's datastore keeps a partition's path index
// in its head while it is small (datastore.LayoutModelsV3 and later,
// headindex.go).
func (d *Driver) headIndexes() bool {
	return d.layout >= datastore.LayoutModelsV3
}

// headCommits reports whether a commit of one log object to d's datastore
// is visible once its roll-forward writes the head, and not before
// (datastore.LayoutModelsV5, headcommit.go).
func (d *Driver) headCommits() bool { return d.layout >= datastore.LayoutModelsV5 }
