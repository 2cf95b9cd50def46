package remotefs

// SetMaxInlineBody lowers the inline content one commit request carries,
// for a test of the spill to chunks; it returns the undo.
func SetMaxInlineBody(n int) func() {
	old := maxInlineBody
	maxInlineBody = n
	return func() { maxInlineBody = old }
}
