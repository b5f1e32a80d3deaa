package domain

import (
	"strings"
	"time"
	"unicode"
)

// Bookmark is a user's name for a path on an endpoint, as globus-cli's
// bookmarks are. Names are unique per user.
type Bookmark struct {
	ID           string // a UUID
	UserID       int64
	Name         string
	EndpointID   string
	EndpointName string // owner#name; filled in by reads
	Path         string
	Created      time.Time
}

// maxBookmarkName bounds a bookmark's name, in characters.
const maxBookmarkName = 128

// ValidBookmarkName refuses a bookmark name that is empty, longer than
// maxBookmarkName characters, or holds a control character.
func ValidBookmarkName(s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return Errorf(EInvalid, "a bookmark needs a name")
	case len([]rune(s)) > maxBookmarkName:
		return Errorf(EInvalid, "bookmark name %q: longer than %d characters", s, maxBookmarkName)
	case strings.ContainsFunc(s, unicode.IsControl):
		return Errorf(EInvalid, "bookmark name %q: contains a control character", s)
	}
	return nil
}
