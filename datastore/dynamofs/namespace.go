package dynamofs

import (
	"fmt"
	"strings"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// Namespace returns the driver of namespace name of the same table and
// client: "" is the root (the table's original layout); any other name
// prefixes every pk but the records' with "s#NAME#", so the namespace's
// files, chunks, feeds, heads, registry, index counters and reclaim entries
// are item collections no other namespace touches. Records are the root's
// in every namespace, so that any commit can be fenced on any lock record.
// name may be a valid namespace or an internal scope ("_" and a valid
// name, such as datastore.CatalogScope); it is relative to the root,
// whatever namespace d is in.
func (d *Driver) Namespace(name string) (datastore.Driver, error) {
	if name == "" {
		return &Driver{shared: d.shared}, nil
	}
	// A '#' would let one namespace's prefix run into another's; the
	// contract's names never hold one, so refuse rather than trust.
	if strings.Contains(name, "#") || datastore.ValidateNamespace(strings.TrimPrefix(name, "_")) != nil {
		return nil, fmt.Errorf("%w: namespace %q", metastore.ErrInvalidArgument, name)
	}
	return &Driver{shared: d.shared, ns: name, pfx: "s#" + name + "#"}, nil
}
