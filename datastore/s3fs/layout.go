package s3fs

import "github.com/lakemeta/lake/datastore"

var _ datastore.LayoutSetter = (*Driver)(nil)

// SetLayout implements datastore.LayoutSetter: d (and the namespaces made
// from it afterwards) computes partitions with l.
func (d *Driver) SetLayout(l datastore.Layout) { d.layout = l }

// partition returns the partition of path in d's datastore.
func (d *Driver) partition(path string) string { return d.layout.Partition(path) }
