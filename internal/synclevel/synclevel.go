// Package synclevel is the one home of a transfer's sync level: when a
// file the destination already has is skipped. It holds the levels'
// names, what each compares, and their encodings: the names and numbers
// of the command line, the transfer API's numbers 0 to 3 (absent: always
// copy) and the service's records (-1: always copy).
//
// No level skips a destination file whose size is not the source's: what
// a canceled or broken transfer left may be short yet newer than its
// source. So exists and size skip the same files.
package synclevel

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Level says when a file that exists at the destination is skipped. The
// zero value, None, copies every file; the others are the transfer API's
// levels 0 (Exists) to 3 (Checksum), in that order.
type Level int

// The sync levels.
const (
	None     Level = iota // copy every file
	Exists                // skip when the destination has the file, of the source's size
	Size                  // skip when the sizes match
	Mtime                 // skip when the sizes match and the source is not newer
	Checksum              // skip when the sizes and the checksums match
)

// levels are the names of Exists to Checksum and when each skips a file,
// by API number. The web app words them once, in web/assets/tasks.js.
var levels = [...]struct{ name, skips string }{
	{"exists", "if it is there, of the source's size"},
	{"size", "if the sizes match"},
	{"mtime", "if the sizes match and the source is not newer"},
	{"checksum", "if the sizes and the checksums match"},
}

// Usage is the help text of a command line's sync level flag: the names,
// what each compares and the default.
var Usage = "skip a file the destination has: " +
	list(func(n int, name, skips string) string { return fmt.Sprintf("%s (%d) %s", name, n, skips) }, "; ", "; ") +
	" (default: copy every file)"

// list joins the levels as f writes each, with sep between them and last
// before the last.
func list(f func(n int, name, skips string) string, sep, last string) string {
	var b strings.Builder
	for i, l := range levels {
		switch i {
		case 0:
		case len(levels) - 1:
			b.WriteString(last)
		default:
			b.WriteString(sep)
		}
		b.WriteString(f(i, l.name, l.skips))
	}
	return b.String()
}

// String returns the level's name: "none", "exists", "size", "mtime" or
// "checksum".
func (l Level) String() string {
	if l == None {
		return "none"
	}
	if n := l.API(); n != nil {
		return levels[*n].name
	}
	return "Level(" + strconv.Itoa(int(l)) + ")"
}

// Parse reads a level by name or API number; "" and "none" are None.
func Parse(s string) (Level, error) {
	if s == "" || s == "none" {
		return None, nil
	}
	for i, l := range levels {
		if s == l.name || s == strconv.Itoa(i) {
			return Level(i + 1), nil
		}
	}
	return None, fmt.Errorf("sync level %q: want %s (0-%d)", s,
		list(func(_ int, name, _ string) string { return name }, ", ", " or "), len(levels)-1)
}

// API returns the level's number in the transfer API, 0 to 3, or nil for
// None, which the API leaves out.
func (l Level) API() *int {
	if l <= None || int(l) > len(levels) {
		return nil
	}
	n := int(l) - 1
	return &n
}

// FromAPI reads the transfer API's number of a level; nil is None.
func FromAPI(n *int) (Level, error) {
	if n == nil {
		return None, nil
	}
	if *n < 0 || *n >= len(levels) {
		return None, fmt.Errorf("sync level %d: want %s", *n,
			list(func(n int, name, _ string) string { return fmt.Sprintf("%d (%s)", n, name) }, ", ", " or "))
	}
	return Level(*n + 1), nil
}

// MarshalJSON writes the level as the service records it: its API
// number, or -1 for None.
func (l Level) MarshalJSON() ([]byte, error) {
	if l == None {
		return []byte("-1"), nil
	}
	n := l.API()
	if n == nil {
		return nil, fmt.Errorf("sync level %d: out of range", int(l))
	}
	return strconv.AppendInt(nil, int64(*n), 10), nil
}

// UnmarshalJSON reads a level written by MarshalJSON.
func (l *Level) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("sync level: %w", err)
	}
	if n == -1 {
		*l = None
		return nil
	}
	v, err := FromAPI(&n)
	if err != nil {
		return err
	}
	*l = v
	return nil
}
