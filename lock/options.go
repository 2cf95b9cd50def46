package lock

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// Defaults of Options. The lease and wait are those of the seed's lock
// (a 30-second TTL, a 60-second wait).
const (
	DefaultLease = 30 * time.Second
	DefaultWait  = 60 * time.Second
)

// NoWait as Options.Wait makes Acquire try once and fail with ErrTimeout if
// the lock is held.
const NoWait time.Duration = -1

// Bounds checked by New.
const (
	MinLease     = 10 * time.Millisecond
	MaxLease     = 24 * time.Hour
	MaxWait      = 24 * time.Hour
	MaxClockSkew = time.Hour
)

// Options configure a Locker. The zero value is usable: a 30 s lease, a
// heartbeat of a third of it, a 60 s wait and no clock-skew bound.
type Options struct {
	// Lease is how long a holder keeps the lock without renewing it.
	Lease time.Duration
	// Heartbeat is the interval between renewals: at most Lease/3, so that
	// two renewals may fail before the lease runs out. Zero means Lease/3.
	Heartbeat time.Duration
	// Wait bounds how long Acquire waits for a held lock; zero means
	// DefaultWait, NoWait one attempt.
	Wait time.Duration
	// ClockSkew, when set, is a bound on how far apart the clocks of any two
	// holders may be: a waiter then takes over a dead holder once the
	// holder's expiry plus ClockSkew has passed on its own clock. Zero (no
	// bound) makes a waiter observe the lock unchanged for a full lease of
	// the holder's on its own monotonic clock first: slower, and safe
	// whatever the clocks say.
	ClockSkew time.Duration
	// Holder identifies this process in Inspect and in the timeout error;
	// empty means HOST-PID-RANDOM.
	Holder string
}

// resolve fills the defaults and refuses contradictions.
func (o *Options) resolve() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Lease == 0 {
		r.Lease = DefaultLease
	}
	if r.Lease < MinLease || r.Lease > MaxLease {
		return r, fmt.Errorf("%w: lease %v is outside %v..%v", metastore.ErrInvalidArgument, r.Lease, MinLease, MaxLease)
	}
	if r.Heartbeat == 0 {
		r.Heartbeat = r.Lease / 3
	}
	if r.Heartbeat < time.Millisecond || r.Heartbeat > r.Lease/3 {
		return r, fmt.Errorf("%w: heartbeat %v must be between 1ms and a third of the lease (%v)", metastore.ErrInvalidArgument, r.Heartbeat, r.Lease/3)
	}
	switch {
	case r.Wait == 0:
		r.Wait = DefaultWait
	case r.Wait == NoWait:
	case r.Wait < 0 || r.Wait > MaxWait:
		return r, fmt.Errorf("%w: wait %v is outside 0..%v", metastore.ErrInvalidArgument, r.Wait, MaxWait)
	}
	if r.ClockSkew < 0 || r.ClockSkew > MaxClockSkew {
		return r, fmt.Errorf("%w: clock skew %v is outside 0..%v", metastore.ErrInvalidArgument, r.ClockSkew, MaxClockSkew)
	}
	if len(r.Holder) > 256 {
		return r, fmt.Errorf("%w: holder id is longer than 256 bytes", metastore.ErrInvalidArgument)
	}
	if r.Holder == "" {
		var b [4]byte
		rand.Read(b[:])
		r.Holder = fmt.Sprintf("%s-%d-%s", hostname(), os.Getpid(), hex.EncodeToString(b[:]))
	}
	return r, nil
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown-host"
	}
	return h
}
