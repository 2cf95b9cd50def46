// Package lakeerr writes lake's error messages with "lake: " exactly once.
//
// Every error lake returns starts with "lake: " (the metastore sentinels
// do), so an error wrapped with context as fmt.Errorf("lake: CONTEXT: %w",
// err) reads "lake: CONTEXT: lake: …". Wrap says the context without the
// second prefix and keeps err's chain for errors.Is and errors.As.
package lakeerr

import (
	"fmt"
	"strings"
)

// Prefix starts every error message of lake.
const Prefix = "lake: "

// Wrap returns an error reading "lake: CONTEXT: MESSAGE", where MESSAGE is
// err's message without its own "lake: ", and matching everything err
// matches. context is a format with args; nil err gives nil.
func Wrap(err error, context string, args ...any) error {
	if err == nil {
		return nil
	}
	return &wrapped{context: fmt.Sprintf(context, args...), err: err}
}

type wrapped struct {
	context string
	err     error
}

func (w *wrapped) Error() string {
	return Prefix + w.context + ": " + Trim(w.err.Error())
}

func (w *wrapped) Unwrap() error { return w.err }

// Trim returns msg without its leading "lake: " prefixes.
func Trim(msg string) string {
	for strings.HasPrefix(msg, Prefix) {
		msg = msg[len(Prefix):]
	}
	return msg
}

// Unprefixed returns err with its message's "lake: " removed, matching
// everything err matches: for fmt.Errorf("%w: %w", sentinel, Unprefixed(err)).
func Unprefixed(err error) error {
	if err == nil {
		return nil
	}
	return &unprefixed{err}
}

type unprefixed struct{ err error }

func (u *unprefixed) Error() string { return Trim(u.err.Error()) }
func (u *unprefixed) Unwrap() error { return u.err }
