package datastore

import (
	"fmt"
	"strings"

	"github.com/lakemeta/lake/metastore"
)

// ReservedSegment is the name of a working tree's private state directory
// (package treesync). No path of the datastore may have it as a segment,
// in any letter case: a tree would otherwise pull another client's entry
// into its own state (a case-insensitive file system writes .LAKE/dirty
// into .lake/dirty). NB: must not change; trees rely on it.
const ReservedSegment = ".lake"

// checkReservedSegment returns an error matching metastore.ErrReservedKey
// if p has a ReservedSegment segment.
func checkReservedSegment(p string) error {
	for _, seg := range strings.Split(p, "/") {
		if strings.EqualFold(seg, ReservedSegment) {
			return fmt.Errorf("%w: path %q has a segment %q, reserved for working trees' own state", metastore.ErrReservedKey, p, seg)
		}
	}
	return nil
}
