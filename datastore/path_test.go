package datastore

import (
	"errors"
	"testing"

	"github.com/lakemeta/lake/metastore"
)

// Control characters make `lake data ls` output ambiguous: refused like ".."
// (issue 26).
func TestValidatePathRefusesControlCharacters(t *testing.T) {
	for _, p := range []string{"a\nb", "a/b\tc", "x\x1b[31m", "del\x7f", "cr\r", "\x01"} {
		if err := ValidatePath(p); !errors.Is(err, metastore.ErrInvalidKey) {
			t.Errorf("ValidatePath(%q) = %v, want ErrInvalidKey", p, err)
		}
	}
	for _, p := range []string{"a/b c", "data/t/i/é", "a~b/ü", "a\u0080b"} {
		if err := ValidatePath(p); err != nil {
			t.Errorf("ValidatePath(%q) = %v, want nil", p, err)
		}
	}
}
