package s3fs

import (
	"strings"

	"github.com/lakemeta/lake/datastore"
)

// nsDir is the folder of the namespaces under PREFIX/: namespace NAME lives
// under PREFIX/n/NAME/ with a tree of its own (c/ u/ v/ l/ h/ f/), and no
// key of the root's tree starts with "n/".
const nsDir = "n/"

// Namespace implements datastore.Driver: the driver of namespace name ("" for
// the root), on the same client and bucket, whose objects live under
// PREFIX/n/NAME/ and whose records are the root's (PREFIX/r/). It sends no
// request: a namespace's objects appear with its first upload or commit.
// An internal scope ("_catalog") is a valid name after its leading "_".
func (d *Driver) Namespace(name string) (datastore.Driver, error) {
	nd := &Driver{c: d.c, prefix: d.root, root: d.root, window: d.window, layout: d.layout}
	if name == "" {
		return nd, nil
	}
	if err := datastore.ValidateNamespace(strings.TrimPrefix(name, "_")); err != nil {
		return nil, err
	}
	nd.prefix = d.root + nsDir + name + "/"
	return nd, nil
}
