// Package reshape reshapes a live DynamoDB table online, for any table: it
// adds a global secondary index, backfills the attributes the index is keyed
// on into the items written before it existed, helps the application write
// and read both shapes during the transition, and proves coverage before the
// old read path is retired. docs/reshape.md is the reference; `lake reshape`
// is its command line.
//
// # Why
//
// DynamoDB has no ALTER TABLE: items have no schema, so a new attribute costs
// nothing, but a new index silently omits every item that lacks its key
// attributes. Adding the attribute is not backfilling it.
//
// # The spec
//
// A Spec (JSON, see Parse) names the table, the index to add, the items it
// covers (key prefixes and attribute presence) and a template per new
// attribute ("MEMBER#{memberId}"). Its Kind is "add-index" (Reshaper) or
// "rewrite-key" (Rewrite): a key rewrite, copy then delete with dual-read in
// between, on the same sweep engine; see Rewrite and Phase.
//
// # One conditional write per item
//
// Reshaper.Convert sets the new attributes of one item with an UpdateItem
// whose condition, built with the expression builder, holds only if the item
// still exists (an UpdateItem on a deleted key would re-create it), its
// source and coverage attributes still hold the values read, and each new
// attribute still holds what was read (absent, or the stale value being
// repaired). A failed condition re-reads the item and decides again. Apply
// runs it over the whole table on the sweep engine (package sweep); the
// application runs it on read (lazy backfill) and WithDerived on write
// (dual-write).
//
// # The end condition
//
// Verify paginates the live table and reports coverage per segment with a
// digest, and checks the index against the table for a sample of keys,
// allowing for the index's eventual consistency.
package reshape
