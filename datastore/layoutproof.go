package datastore

// The layout proved by the namespace's entry (issue 31). A process opened
// with a remembered layout (OpenOptions.Remembered) reads the layout record
// before anything that computes a partition from a path, unless its commit
// can carry the check (layoutcommit.go): one GET on S3 in every `lake data
// sync` that commits. But a sync in a namespace reads the namespace's entry
// in the registry anyway (its lifecycle policy, in the sync's read-ahead),
// so the entry now says which layout the datastore recorded when it was
// written, and a read of it that names the remembered layout proves it.
//
// Why that proof holds: lake writes an entry's layout only from a Store
// whose layout it read in the record or wrote there (provenLayout), and a
// datastore's record is written once and never changed (checkLayoutWrite).
// A datastore deleted and recreated under the same URL with another layout
// has lost its entries with its record; a new entry names the new layout,
// and an entry of the old one is read only if someone deleted the record
// and kept the entries, which leaves data filed under one layout in a
// datastore recording another, broken however it is read. An entry with no
// layout (written before, or by a process that had not read the record), or
// naming another, proves nothing: the record is read as before.

// provenLayout returns s's layout if it is known to be the one the
// datastore's record holds (read there, or written there by s), else "".
func (s *Store) provenLayout() string {
	root := s.root
	if root.layoutUnverified.Load() || !root.layoutRecorded.Load() {
		return ""
	}
	return root.layout.String()
}

// layoutFromEntry takes a namespace entry's layout, just read, as the
// record's: if it names the layout s remembers, the layout is verified.
func (s *Store) layoutFromEntry(layout string) {
	root := s.root
	if layout == "" || !root.layoutUnverified.Load() || layout != root.layout.String() {
		return
	}
	root.layoutRecorded.Store(true)
	root.layoutUnverified.Store(false)
}
