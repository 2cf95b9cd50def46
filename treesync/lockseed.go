package treesync

// lockRecordFile keeps, in the state directory, the lock record this tree's last
// sync released (lock.Locker.Known), so that the next sync, a new process,
// acquires the lock with one conditional write instead of a read and a
// write (lock.Locker.Seed, which says why a record no longer true cannot
// take the lock from anyone: it costs the read it saved). Issue 31.
const lockRecordFile = "lockrecord"

// maxLockFile bounds what seedLock reads: a lock record is a few hundred
// bytes; anything longer is not one lake wrote.
const maxLockFile = 4096

// seedLock gives the tree's Locker the lock record the last sync released.
func (t *Tree) seedLock() {
	if b, ok := t.fs.readSmallState(lockRecordFile, maxLockFile); ok {
		t.locker.Seed(t.LockName(), b)
	}
}

// saveLock keeps the record the sync's release wrote, for the next sync. A
// failure costs the next sync one read, no more: it is not reported.
func (t *Tree) saveLock() {
	if b := t.locker.Known(t.LockName()); b != nil {
		t.fs.keepState(lockRecordFile, b)
	}
}
