package nodeapi_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

func TestEscapeKeyRoundTrip(t *testing.T) {
	for _, k := range []string{"tbl/orders", "a b", "what?", "100%", "%2F", "a//b", ".", "..", "...", "a/../b", "ü/表/🦆", "#x", "+", "tab\t", "\n"} {
		esc := nodeapi.EscapeKey(k)
		if strings.ContainsAny(esc, "/?# \t\n") || esc == "." || esc == ".." {
			t.Errorf("EscapeKey(%q) = %q leaves a byte a path would mangle", k, esc)
		}
		if got, err := nodeapi.UnescapeKey(esc); err != nil || got != k {
			t.Errorf("UnescapeKey(EscapeKey(%q)) = %q, %v", k, got, err)
		}
	}
	if got, _ := nodeapi.UnescapeKey("tbl/orders"); got != "tbl/orders" {
		t.Errorf("an unescaped slash: %q", got)
	}
	if _, err := nodeapi.UnescapeKey("%zz"); !errors.Is(err, metastore.ErrInvalidKey) {
		t.Errorf("bad percent-encoding: %v", err)
	}
}

// TestCodesRoundTrip: every sentinel has a code that maps back to it, so
// errors.Is works the same on both sides of the wire.
func TestCodesRoundTrip(t *testing.T) {
	for _, s := range []error{metastore.ErrNotFound, metastore.ErrConflict, metastore.ErrInvalidKey, metastore.ErrInvalidValue,
		metastore.ErrReservedKey, metastore.ErrInvalidArgument, metastore.ErrInvalidCursor, metastore.ErrCursorExpired,
		metastore.ErrWritesPaused, metastore.ErrRefused, metastore.ErrUnavailable, metastore.ErrDiverged} {
		code := nodeapi.CodeOf(fmt.Errorf("wrapped: %w", s))
		if got := nodeapi.Sentinel(code); got != s {
			t.Errorf("%v: code %q maps back to %v", s, code, got)
		}
	}
	if c := nodeapi.CodeOf(metastore.Conflict("k", "r")); c != nodeapi.CodeConflict {
		t.Errorf("a *ConflictError has code %q", c)
	}
	for _, e := range []error{metastore.ErrClosed, context.DeadlineExceeded, context.Canceled} {
		if c := nodeapi.CodeOf(e); c != nodeapi.CodeUnavailable {
			t.Errorf("%v has code %q", e, c)
		}
	}
	if c := nodeapi.CodeOf(errors.New("other")); c != nodeapi.CodeInternal {
		t.Errorf("an unclassified error has code %q", c)
	}
	if nodeapi.Sentinel(nodeapi.CodeTooLarge) != metastore.ErrInvalidValue || nodeapi.Sentinel(nodeapi.CodeInternal) != nil || nodeapi.Sentinel("bogus") != nil {
		t.Error("Sentinel of too_large, internal or an unknown code")
	}
}
