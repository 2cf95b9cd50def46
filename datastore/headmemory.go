package datastore

// RememberedHeads returns what s's driver keeps of the heads its process
// read or wrote (HeadRememberer), for a later process's RememberHeads, or
// nil where the driver keeps none.
func (s *Store) RememberedHeads() []byte {
	if s.open() != nil {
		return nil
	}
	if r, ok := UnwrapDriver(s.root.d).(HeadRememberer); ok {
		return r.RememberedHeads()
	}
	return nil
}

// RememberHeads gives s's driver what an earlier process's
// RememberedHeads returned; nothing where the driver keeps no heads.
func (s *Store) RememberHeads(b []byte) {
	if len(b) == 0 || s.open() != nil {
		return
	}
	if r, ok := UnwrapDriver(s.root.d).(HeadRememberer); ok {
		r.RememberHeads(b)
	}
}
