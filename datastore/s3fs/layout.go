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
// recorded "models-v2", whose pending marks sit beside the heads (one LIST
// reads both, pending.go); a lake that does not know that layout refuses
// the datastore rather than mark its commits under p/, where this one's
// readers no longer look.
func (d *Driver) FreshLayout() datastore.Layout { return datastore.LayoutModelsV2 }
