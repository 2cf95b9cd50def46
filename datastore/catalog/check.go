package catalog

import (
	"context"

	"github.com/lakemeta/lake/datastore"
)

// CheckRows checks the rows of ns's namespace in the catalog (lake data
// check --catalog): each entry of its partition that no lake client writes
// (as Read skips it: a path that names no model, a row that does not
// decode or names another model) is a problem; with o.Repair they are
// deleted in one commit fenced by o.Fence, the namespace's lock, under
// which every fold of the namespace writes its rows (a model that has
// files gets its row again from its next fold). An entry whose path the
// store refuses is the driver's to move aside (Store.Check of the catalog
// scope), and is not named here.
func CheckRows(ctx context.Context, ns *datastore.Store, o datastore.CheckOptions) ([]datastore.Problem, error) {
	cat, err := ns.CatalogStore()
	if err != nil {
		return nil, err
	}
	name := ns.NamespaceName()
	files, err := cat.ListAll(ctx, name+"/")
	if err != nil {
		return nil, err
	}
	var problems []datastore.Problem
	var gone []datastore.Entry
	for _, f := range files {
		_, why, deletable := rowEntry(name, f)
		if why == "" || !deletable {
			continue
		}
		problems = append(problems, datastore.Problem{Object: "catalog row " + f.Path, What: "an entry no lake client writes: it " + why, Fix: "delete it (the model's next fold writes its row again if it has files)"})
		gone = append(gone, datastore.Entry{Delete: f.Path})
	}
	if !o.Repair || len(gone) == 0 {
		return problems, nil
	}
	if _, err := cat.Commit(ctx, o.Fence, gone); err != nil {
		return problems, err
	}
	for i := range problems {
		problems[i].Repaired = true
	}
	return problems, nil
}
