package catalog

import "testing"

// A row path is never the directory of another row's (issue 30): models of
// more than two segments are one escaped segment, models of two keep the
// path rows always had.
func TestRowPathRoundTrip(t *testing.T) {
	for _, c := range []struct{ model, path string }{
		{"t/i", "ns/t/i"},
		{"command/shell", "ns/command/shell"},
		{"command/shell/u1", "ns/command%2Fshell%2Fu1"},
		{"@webframp/system/w1-i3", "ns/@webframp%2Fsystem%2Fw1-i3"},
		{"a%2Fb/c/d", "ns/a%252Fb%2Fc%2Fd"},
	} {
		if got := rowPath("ns", c.model); got != c.path {
			t.Errorf("rowPath(%q) = %q, want %q", c.model, got, c.path)
		}
		ns, m, ok := parseRowPath(c.path)
		if !ok || ns != "ns" || m != c.model {
			t.Errorf("parseRowPath(%q) = %q, %q, %v", c.path, ns, m, ok)
		}
	}
	for _, bad := range []string{"ns", "ns/x", "ns/a/b/c", "ns/a%2Fb", "ns/a%ZZ%2Fb%2Fc", "ns/a%2fb%2Fc"} {
		if ns, m, ok := parseRowPath(bad); ok {
			t.Errorf("parseRowPath(%q) = %q, %q, true; want not a row", bad, ns, m)
		}
	}
}
