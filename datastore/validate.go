package datastore

import (
	"fmt"
	"regexp"

	"github.com/lakemeta/lake/metastore"
)

// These checks are what Store does before it calls a Driver; a node that
// runs a Driver for remote clients (package server) makes them itself.

var versionRE = regexp.MustCompile(`^[0-9a-f]{1,64}$`)

// CheckVersion returns nil if v can be a version id (lowercase hex, as
// Upload makes them).
func CheckVersion(v string) error {
	if !versionRE.MatchString(v) {
		return fmt.Errorf("%w: version %q is not a version id", metastore.ErrInvalidArgument, v)
	}
	return nil
}

// CheckStaged returns nil if s can be a staged upload.
func CheckStaged(s Staged) error {
	if err := ValidatePath(s.Path); err != nil {
		return err
	}
	if err := CheckVersion(s.Version); err != nil {
		return err
	}
	if len(s.Meta) > MaxMetaBytes || s.Chunks < 0 || s.Size < 0 {
		return fmt.Errorf("%w: staged file %q was not returned by Upload", metastore.ErrInvalidArgument, s.Path)
	}
	return nil
}

// CheckCommit returns nil if fence and entries can be one driver commit of
// at most maxCommit entries: distinct valid paths, each entry a staged file
// or a delete.
func CheckCommit(fence *Fence, entries []Entry, maxCommit int) error {
	if fence != nil {
		if err := metastore.ValidateKey(fence.Key); err != nil {
			return fmt.Errorf("fence: %w", err)
		}
	}
	if len(entries) > maxCommit {
		return fmt.Errorf("%w: %d entries in one commit, more than %d", metastore.ErrInvalidArgument, len(entries), maxCommit)
	}
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if (e.Put == nil) == (e.Delete == "") {
			return fmt.Errorf("%w: a commit entry is either a staged file or a delete", metastore.ErrInvalidArgument)
		}
		p := e.Path()
		if err := ValidatePath(p); err != nil {
			return err
		}
		if seen[p] {
			return fmt.Errorf("%w: path %q appears twice in one commit", metastore.ErrInvalidArgument, p)
		}
		seen[p] = true
		if e.Put != nil {
			if err := CheckStaged(*e.Put); err != nil {
				return err
			}
		}
	}
	return CommitClash(entries) // clash.go
}
