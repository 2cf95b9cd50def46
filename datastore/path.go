package datastore

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/lakemeta/lake/metastore"
)

// Limits of the contract. NB: part of every driver's format; they must not
// grow without checking that a maximal metadata item still fits one DynamoDB
// item and twenty of them one transaction.
const (
	// MaxPathBytes is the longest path, in bytes.
	MaxPathBytes = 1024
	// MaxMetaBytes is the largest metadata of one file.
	MaxMetaBytes = 64 * 1024
	// ChunkSize is the size of every chunk but a file's last.
	ChunkSize = 256 * 1024
	// MaxListLimit is the largest page List may ask for.
	MaxListLimit = 10000
	// InlineMax is the largest file stored inline: its content kept in its
	// metadata record (Info.Inline), written by the commit's own write,
	// with no upload intent and no chunk. A file of at most InlineMax
	// bytes is stored inline; a larger one in chunks. Readers refuse an
	// inline content longer than InlineMax as damage, so it must not
	// shrink (files written inline would no longer read) and may grow
	// only once every reader accepts the larger bound. Why 4 KiB: on
	// DynamoDB a file that small costs at most 4 write units more in its
	// path item, where chunked it costs an intent write, a chunk write and
	// the intent's delete (three items, two round trips), and a commit's
	// transaction of MaxCommit maximal entries, each with its replaced
	// state, stays far below the 4 MB transaction limit; on S3 every
	// puller reads the log objects whole, so inline bytes there must stay
	// small (docs/datastore.md, "Small files inline").
	InlineMax = 4096
)

// ModelPrefix starts the paths that belong to a model's partition.
const ModelPrefix = "data/"

// ValidatePath returns nil if p is a valid file path, or an error matching
// metastore.ErrInvalidKey: non-empty UTF-8 of at most MaxPathBytes without
// NUL, slash-separated segments that are neither empty, "." nor "..", nor
// ReservedSegment (an error matching metastore.ErrReservedKey), and no
// leading or trailing slash. It also refuses control characters
// (hasControl).
func ValidatePath(p string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: path %q %s", metastore.ErrInvalidKey, p, why)
	}
	switch {
	case p == "":
		return fmt.Errorf("%w: empty path", metastore.ErrInvalidKey)
	case len(p) > MaxPathBytes:
		return bad(fmt.Sprintf("is %d bytes, longer than %d", len(p), MaxPathBytes))
	case !utf8.ValidString(p):
		return bad("is not valid UTF-8")
	case strings.ContainsRune(p, 0):
		return bad("contains NUL")
	case hasControl(p):
		return bad("contains a control character (U+0000 to U+001F or U+007F)")
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "":
			return bad("has an empty segment (a leading, trailing or double slash)")
		case ".", "..":
			return bad("has a . or .. segment")
		}
	}
	if metastore.IsControlKey(p) {
		return fmt.Errorf("%w: path %q is under the reserved prefix %q", metastore.ErrReservedKey, p, metastore.ControlPrefix)
	}
	if err := checkReservedSegment(p); err != nil { // reserved.go
		return err
	}
	return nil
}

// hasControl reports whether p holds a C0 control character or DEL: such a
// path (a newline, a tab, an escape) makes a listing printed one path a line
// ambiguous and a terminal misleading, so no path may hold one (issue 26).
func hasControl(p string) bool {
	return strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// Partition returns the partition of a valid path under the default layout,
// LayoutModels (layout.go): its model for data/{model}/… (types of one or
// more segments), otherwise its first segment. A datastore made before
// issue 30 may have another layout: code that serves a datastore computes
// partitions with its Store.Partition (or the layout its driver was given),
// never with this function.
func Partition(p string) string { return LayoutModels.Partition(p) }

// PartitionPrefix returns the prefix every path of partition starts with.
// Under LayoutModels other partitions' paths can start with it too (a
// deeper model, or a shorter reading: layout.go), so one partition's files
// are read with Store.ListPartitionAll, not a listing of this prefix.
func PartitionPrefix(partition string) string {
	if strings.Contains(partition, "/") {
		return ModelPrefix + partition + "/"
	}
	return partition + "/"
}

// ValidatePartition returns nil if name can be a partition: a model
// (TYPE/ID, the type of one or more segments: command/shell/u1) or a first
// segment (which may be "data": the partition of the odd paths under data/
// that name no model, such as data/README), that is any valid path. Which
// names a datastore actually uses depends on its layout.
func ValidatePartition(name string) error {
	if err := ValidatePath(name); err != nil {
		return fmt.Errorf("%w: partition %q: want a model TYPE/ID (TYPE of one or more segments) or a top-level directory", metastore.ErrInvalidArgument, name)
	}
	return nil
}

// PrefixMayMatch reports whether some path of partition can start with
// prefix, so that a listing of prefix needs to read that partition.
func PrefixMayMatch(partition, prefix string) bool {
	pp := PartitionPrefix(partition)
	return strings.HasPrefix(pp, prefix) || strings.HasPrefix(prefix, pp)
}
