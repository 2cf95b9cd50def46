package lock

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// lockRecord is the value of rec/NS/NAME, the record fenced writes are
// guarded on. It holds only what does not change while a holder holds the
// lock (the renewals go to the expiry record), so that a renewal never
// makes the holder's own fenced write in flight fail.
//
// NB: the JSON field names are a stored format read by every lake version
// that shares a store; they must not change.
type lockRecord struct {
	Token Token `json:"token"`
	Held  bool  `json:"held"`
	// Holder identity; set while held.
	Holder string `json:"holder,omitempty"`
	Host   string `json:"host,omitempty"`
	PID    int    `json:"pid,omitempty"`
	// Acquired is the holder's wall clock when it sent the acquisition.
	Acquired time.Time `json:"acquired,omitzero"`
	// LeaseMS is the holder's lease; a waiter without a clock-skew bound
	// observes the record unchanged for this long before taking over.
	LeaseMS int64 `json:"lease_ms,omitempty"`
	// Expires is the initial expiry (Acquired + lease); renewals extend it
	// in the expiry record.
	Expires time.Time `json:"expires,omitzero"`
	// Released is when the lock was last released; Forced is set when a
	// forced release (or a takeover to free, when the sequence is exhausted)
	// broke the holder of Token.
	Released time.Time `json:"released,omitzero"`
	Forced   bool      `json:"forced,omitempty"`
}

// expiryRecord is the value of exp/NS/NAME: the expiry of the holder of
// Token, renewed by a write fenced on the lock record. A record for another
// token is stale and ignored.
type expiryRecord struct {
	Token   Token     `json:"token"`
	Expires time.Time `json:"expires"`
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs are encoded
	}
	return b
}

func decodeLock(key string, b []byte) (lockRecord, error) {
	var r lockRecord
	if err := json.Unmarshal(b, &r); err != nil || r.Token == 0 {
		return r, fmt.Errorf("lake: lock record %q is not a lock record (%d bytes)", key, len(b))
	}
	return r, nil
}

func decodeExpiry(key string, b []byte) (expiryRecord, error) {
	var r expiryRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("lake: expiry record %q is not an expiry record (%d bytes)", key, len(b))
	}
	return r, nil
}

func decodeGen(key string, b []byte) (uint32, error) {
	g, err := strconv.ParseUint(string(b), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("lake: generation record %q is not a generation (%d bytes)", key, len(b))
	}
	return uint32(g), nil
}

// wall returns the wall clock without its monotonic reading, in UTC, for
// records that other machines read.
func wall(t time.Time) time.Time { return t.Round(0).UTC() }
