package s3fs

// fenceWalk is a reader's walk along a partition's log, in position order:
// it remembers the highest token each lock record's fences named in the
// objects walked so far, and says of each object whether its changes count.
// Every reader of a log (a pull, a stat of the tail, the roll-forward, the
// clash check, lake data check) walks it with one, so the rule that hides a
// stale holder's commit is written once.
type fenceWalk struct {
	seen map[string]uint64 // lock record → highest token its fences named so far
}

func newFenceWalk() *fenceWalk { return &fenceWalk{seen: map[string]uint64{}} }

// counts reports whether o's changes count for a reader: not written under
// a fence older than one the log had already seen, nor part of an aborted
// commit (void). It then takes o's fences into account for the objects
// after it, so it must be asked of each object once, in order.
func (w *fenceWalk) counts(o *logObject) bool {
	ok := !o.stale(w.seen) && !o.void
	for k, v := range o.Fences {
		w.seen[k] = max(w.seen[k], v)
	}
	return ok
}
