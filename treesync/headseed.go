package treesync

// headsFile keeps, in the state directory, the partition heads this tree's
// last sync read or wrote (datastore.Store.RememberedHeads), so that the
// next sync, a new process, takes from it a head its pull's listing shows
// unchanged instead of reading it again (on S3: the changed file's
// partition and its catalog row's, two GETs of a sync of one changed
// file; the store uses a remembered head only where the listing proves it
// is the one listed, so a damaged or edited file costs the reads it would
// have saved, never a wrong answer). Issue 31.
const headsFile = "heads"

// maxHeadsFile bounds what seedHeads reads (the store keeps at most half a
// MiB of heads, encoded in base64).
const maxHeadsFile = 1 << 20

// seedHeads gives the store the heads the tree's last sync kept, before
// the sync's first read (a sync with nothing to push takes its
// namespace's record from its listing too, on S3: docs/s3.md).
func (t *Tree) seedHeads() {
	if b, ok := t.fs.readSmallState(headsFile, maxHeadsFile); ok {
		t.store.RememberHeads(b)
	}
}

// saveHeads keeps the heads the sync read or wrote, for the next sync (a
// sync that found nothing changed leaves the file as it is: keepState). A
// failure costs the next sync the reads it would save: it is not
// reported.
func (t *Tree) saveHeads() {
	if b := t.store.RememberedHeads(); b != nil {
		t.fs.keepState(headsFile, b)
	}
}
