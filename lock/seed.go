package lock

// Known returns the lock record of name this Locker last wrote or read, nil
// if none (or name is not a lock name): after a Release, the free record
// the release wrote. A process that saves it can give it to the next
// process's Locker (Seed), so that its Acquire is one conditional write.
func (l *Locker) Known(name string) []byte {
	n, err := parseName(name)
	if err != nil {
		return nil
	}
	return l.recall(n)
}

// Seed makes rec the record this Locker takes the lock name to hold, unless
// it knows one already, for a process whose predecessor saved the record
// it released (Known): Acquire then writes at once instead of reading
// first. It cannot take a lock from anyone: Acquire only ever writes with a
// compare-and-swap on exactly the record it believes is there, so a seed
// that is no longer true (another process took the lock since, a foreign
// writer changed the record) costs one failed write and the read Acquire
// would have made anyway, and the lock is then acquired (or waited for) as
// it would have been. A rec that is not a free lock record of name is
// ignored; so is any seed on a Locker that does not wait (Options.Wait
// NoWait: a failed write would end its one attempt).
func (l *Locker) Seed(name string, rec []byte) {
	n, err := parseName(name)
	if err != nil || l.opts.Wait == NoWait || len(rec) == 0 {
		return
	}
	if r, err := decodeLock(n.lockKey(), rec); err != nil || r.Held {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.known[n.String()]; !ok {
		l.known[n.String()] = append([]byte(nil), rec...)
	}
}
