package nodeapi

import "strings"

// RedactURL returns raw with the user info of its authority (anything
// before an "@" in the host part, such as user:password or a token) replaced
// by "REDACTED", so that an error, a log line or a metric that names a node
// URL never repeats a secret (issue 26). It works on strings url.Parse
// refuses too, since those are the ones errors quote.
func RedactURL(raw string) string {
	rest, prefix := raw, ""
	if i := strings.Index(raw, "://"); i >= 0 {
		prefix, rest = raw[:i+3], raw[i+3:]
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return raw
	}
	return prefix + "REDACTED" + rest[at:]
}
