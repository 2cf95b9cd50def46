package dynamofs

import (
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A head remembers its earlier index positions (issue 31). A reader that
// knows some partitions reads their heads with the shard counters and
// answers a moved shard without its Query when the known heads hold every
// index position the counter moved through since the cursor (knownFill,
// feed.go). A partition that moved twice since then held one of those
// positions and holds another now, so the window stayed unfilled and the
// shard was queried: in the seed's loop of ten workers each catalog
// partition moves about twice between one worker's syncs, and about five
// of a sync's Queries were these.
//
// So the transaction that moves a head to its shard's next position also
// writes, in the same update, the positions it held before (attrPrev: the
// last prevPositions of them, newest first). Each is a position that an
// earlier transaction gave to this head and to no other (a counter's
// position goes to one head, in the transaction that moves the counter),
// so a known head whose position lies in the window accounts for its
// earlier positions in the window as well: the reader reads that head's
// feed from its own position up to the head, which holds both changes. A
// head read before its later move shows neither that move's position nor
// the old one as earlier, and leaves the window unfilled as before.
//
// A stale value (a write that moved the position without it: a repair, a
// lake older than this) is still a list of positions the head held. A
// foreign writer that names another head's position there can hide that
// other partition's move from a reader that knows only this one, as one
// that gives a head another's current position can; lake data check names
// an earlier position that is another head's now, and --repair removes the
// list.

const (
	attrPrev      = "prev"
	prevPositions = 3
)

// prevOf returns the earlier index positions head item h remembers.
func prevOf(h item) []uint64 {
	l, ok := h[attrPrev].(*types.AttributeValueMemberL)
	if !ok {
		return nil
	}
	var out []uint64
	for _, v := range l.Value {
		if n, ok := v.(*types.AttributeValueMemberN); ok {
			if p, err := strconv.ParseUint(n.Value, 10, 64); err == nil && p > 0 {
				out = append(out, p)
			}
		}
	}
	return out
}

// prevAfter is the list a head moving from item h (as read) to another
// index position writes: h's position, then the earlier ones it
// remembers, at most prevPositions; nil if h has no position yet.
func prevAfter(h item) []uint64 {
	pos := getN(h, attrPos)
	if pos == 0 {
		return nil
	}
	out := []uint64{pos}
	for _, p := range prevOf(h) {
		if len(out) == prevPositions {
			break
		}
		if p < pos && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// prevAttr is prevAfter(h) as an attribute value.
func prevAttr(h item) types.AttributeValue {
	l := &types.AttributeValueMemberL{}
	for _, p := range prevAfter(h) {
		l.Value = append(l.Value, num(p))
	}
	return l
}

// withPrev adds to u, an update that moves head h to another index
// position, the write of its earlier positions.
func withPrev(u expression.UpdateBuilder, h item) expression.UpdateBuilder {
	if getN(h, attrPos) == 0 {
		return u
	}
	return u.Set(expression.Name(attrPrev), expression.Value(prevAfter(h))) // a list of numbers
}

// headMoved is set, the attributes a move of head h to another index
// position writes, with the earlier positions it writes beside them: for
// the head's state after the move as a later transaction of the same
// commit predicts it (predict.go).
func headMoved(h item, set map[string]types.AttributeValue) map[string]types.AttributeValue {
	if getN(h, attrPos) != 0 {
		set[attrPrev] = prevAttr(h)
	}
	return set
}
