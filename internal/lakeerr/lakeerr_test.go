package lakeerr

import (
	"errors"
	"testing"

	"github.com/lakemeta/lake/metastore"
)

func TestWrapSaysLakeOnce(t *testing.T) {
	inner := errors.Join(metastore.ErrInvalidArgument)
	for _, c := range []struct {
		err  error
		want string
	}{
		{Wrap(metastore.ErrInvalidArgument, "--namespace"), "lake: --namespace: invalid argument"},
		{Wrap(errors.New("plain"), "read %s", "x"), "lake: read x: plain"},
		{Wrap(Wrap(errors.New("lake: lake: deep"), "b"), "a"), "lake: a: b: deep"},
		{Wrap(inner, "j"), "lake: j: invalid argument"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
	if !errors.Is(Wrap(metastore.ErrInvalidArgument, "x"), metastore.ErrInvalidArgument) {
		t.Error("Wrap lost the chain")
	}
	if Wrap(nil, "x") != nil {
		t.Error("Wrap(nil) is not nil")
	}
}
