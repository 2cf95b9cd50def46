package datastore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lakemeta/lake/metastore"
)

// A path is a file or a directory, never both: no live file's path is a
// directory of another live file's path (data/x and data/x/y). Every driver
// refuses a commit that would break this, in the same atomic write that
// checks its fence, with the error Clash returns.

// ClashReason starts the metastore.ConflictError reason of a commit refused
// because it would make a path both a file and a directory; the reason's
// rest is the other path. NB: must not change (clients parse it through the
// node).
const ClashReason = "a path is a file or a directory, never both; it clashes with "

// Clash returns the conflict of a commit that would make the file path and
// the live (or committed-with-it) file other a file and a directory at once:
// a *metastore.ConflictError keyed by path, matching metastore.ErrConflict.
func Clash(path, other string) error {
	return metastore.Conflict(path, ClashReason+other)
}

// ClashError is the clash of a refused commit, as a caller reads it back
// (AsClash).
type ClashError struct {
	// Path is the committed file refused; Other the file it clashes with.
	Path, Other string
}

// Why says what is wrong with Path and the way out.
func (c *ClashError) Why() string {
	if strings.HasPrefix(c.Path, c.Other+"/") {
		return fmt.Sprintf("the store has the file %s, so %s cannot be a file below it: a path is a file or a directory, never both (rename one of them, or remove %s with `lake data rm`)", c.Other, c.Path, c.Other)
	}
	return fmt.Sprintf("the store has the file %s below it, so %s cannot be a file: a path is a file or a directory, never both (rename one of them, or remove %s with `lake data rm`)", c.Other, c.Path, c.Other)
}

// AsClash returns the clash err reports, if it is one.
func AsClash(err error) (*ClashError, bool) {
	var ce *metastore.ConflictError
	if !errors.As(err, &ce) {
		return nil, false
	}
	other, ok := strings.CutPrefix(ce.Reason, ClashReason)
	if !ok {
		return nil, false
	}
	return &ClashError{Path: ce.Key, Other: other}, true
}

// Ancestors returns the directories above path, shortest first: "a" and
// "a/b" for "a/b/c".
func Ancestors(path string) []string {
	var out []string
	for i := 0; i < len(path); i++ {
		if path[i] == '/' {
			out = append(out, path[:i])
		}
	}
	return out
}

// CommitClash returns the Clash of two files of one commit, one a
// directory of the other (O(entries × depth)); nil if there is none. A
// delete in the same commit does not excuse it: the check is about the
// files a commit leaves live, and a put of data/x with a delete of data/x/y
// is legal (the delete frees the name).
func CommitClash(entries []Entry) error {
	puts := make(map[string]bool, len(entries))
	for _, e := range entries {
		if e.Put != nil {
			puts[e.Put.Path] = true
		}
	}
	for _, e := range entries {
		if e.Put == nil {
			continue
		}
		for _, a := range Ancestors(e.Put.Path) {
			if puts[a] {
				return Clash(e.Put.Path, a)
			}
		}
	}
	return nil
}
