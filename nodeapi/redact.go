package nodeapi

import "strings"

// RedactURL returns raw with the user info of every URL authority in it
// (anything before an "@" in a host part, such as user:password or a token)
// replaced by "REDACTED": the authority at the start of raw (with or
// without a scheme) and the one after each "://" (a URL inside another's
// query, such as dynamodb://T?endpoint=http://user:pass@host). So an error,
// a log line or a metric that names a URL never repeats a secret (issue
// 26). It works on strings url.Parse refuses too, since those are the ones
// errors quote.
func RedactURL(raw string) string {
	var b strings.Builder
	rest := raw
	if i := strings.Index(rest, "://"); i >= 0 {
		b.WriteString(rest[:i+3])
		rest = rest[i+3:]
	}
	for {
		end := strings.IndexAny(rest, "/?#&; ")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
			b.WriteString("REDACTED")
			rest = rest[at:]
			end -= at
		}
		i := strings.Index(rest[end:], "://")
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:end+i+3])
		rest = rest[end+i+3:]
	}
}
