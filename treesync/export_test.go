package treesync

// SetCommitHook sets the hook run under the lock just before a commit.
func SetCommitHook(f func()) { testHookCommit = f }

// SetAfterCommitHook sets the hook run under the lock just after a commit.
func SetAfterCommitHook(f func()) { testHookAfterCommit = f }

// Cursor returns the unscoped cursor and the position of part in the state.
func (t *Tree) Positions() (cursor string, unscoped bool, positions map[string]uint64, err error) {
	st, err := t.loadState()
	if err != nil {
		return "", false, nil, err
	}
	return st.Cursor, st.Unscoped, st.Positions, nil
}
