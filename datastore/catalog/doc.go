// Package catalog is the index of every model in every namespace of a
// datastore: for each model its state (defined, orphaned), its data entries
// and their versions, sizes, and when it was created, changed and deleted.
//
// The catalog lives in the datastore itself, in the internal scope
// datastore.CatalogScope: one file per model at NAMESPACE/TYPE/ID, whose
// metadata is the model's Row, so each namespace's rows are one partition
// with a change feed of their own. That gives both halves of the seed's
// lesson:
//
//   - It is maintained incrementally: Fold, run by each sync after its
//     commit under the namespace's lock (and fenced by it), reads the
//     namespace's partitions that changed since the fold's cursor and
//     rewrites the rows of those models only.
//   - It is read incrementally: Read returns the rows that changed in any
//     namespace since a Cursor, at a cost that grows with what changed, not
//     with what exists; it is never exported whole on a sync.
//
// A model TYPE/ID is the partition of data/TYPE/ID/…; its definition is the
// file data/TYPE/ID/model.yaml (DefinitionPath), so that the definition and
// the data go together when the model is pruned (DropPartition). A model
// whose definition was deleted is orphaned: its data is what the lifecycle
// (package lifecycle) may prune. A model that never had a definition is
// "undefined" and never orphaned, so data written without the convention is
// never pruned as orphaned.
package catalog
