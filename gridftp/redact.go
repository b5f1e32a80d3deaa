package gridftp

import (
	"regexp"
	"strings"
)

// scheme matches the start of a URL, "scheme://", with its ":" as it
// stands or %XX-encoded any number of times ("%3A", "%253A", ...), as a
// destination's URL is inside a disk stack's options (gridftp_multicast's
// urls=, encoded once more at each level of a tree).
var scheme = regexp.MustCompile(`(?i)[a-z][a-z0-9+.\-]*(?::|%(?:25)*3a)//`)

// colon matches the ":" between a URL's user and password, as it stands
// or %XX-encoded.
var colon = regexp.MustCompile(`(?i):|%(?:25)*3a`)

// Redact hides the passwords of the URLs in s: "ftp://user:pass@host"
// becomes "ftp://user:xxxxx@host", as url.URL.Redacted writes it, whether
// the URL stands plain or %XX-encoded inside a disk stack's options. It
// is for everything that logs or prints what a client or a user gave: a
// command, a stack, a destination.
func Redact(s string) string {
	var b strings.Builder
	for {
		loc := scheme.FindStringIndex(s)
		if loc == nil {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:loc[1]])
		s = s[loc[1]:]
		auth := s[:authorityEnd(s)]
		at := strings.LastIndexByte(auth, '@')
		if at < 0 {
			continue
		}
		if c := colon.FindStringIndex(auth[:at]); c != nil {
			b.WriteString(auth[:c[1]])
			b.WriteString("xxxxx")
			s = s[at:]
		}
	}
}

// authorityEnd is where the authority ("user:pass@host:port") that
// starts s ends: at a path, query or fragment, or where the text around
// a URL (a stack's separators, spaces, quotes) goes on.
func authorityEnd(s string) int {
	if i := strings.IndexAny(s, "/?#;, \t\r\n\"'<>"); i >= 0 {
		return i
	}
	return len(s)
}
