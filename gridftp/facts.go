package gridftp

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Entry is one MLST/MLSD line (RFC 3659 facts and a name).
type Entry struct {
	Name   string
	Type   string // "file", "dir", "cdir", "pdir", "OS.unix=slink", ...
	Size   int64
	Modify time.Time // UTC, second precision
	Perm   string
	Mode   uint32 // UNIX.mode; 0 when absent
	Target string // UNIX.slink
	// Unique is the RFC 3659 fact: equal values from one server name one
	// object (hard links, symlinks, two names of one directory).
	Unique string
}

// IsDir reports a directory entry (dir, cdir or pdir).
func (e Entry) IsDir() bool { return e.Type == "dir" || e.Type == "cdir" || e.Type == "pdir" }

// TimeLayout is the MDTM / MLST time format.
const TimeLayout = "20060102150405"

// Format renders the entry as one line without its line ending.
func (e Entry) Format() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Type=%s;Size=%d;Modify=%s;Perm=%s;UNIX.mode=%04o;", e.Type, e.Size,
		e.Modify.UTC().Format(TimeLayout), e.Perm, e.Mode)
	if e.Unique != "" {
		fmt.Fprintf(&b, "Unique=%s;", e.Unique)
	}
	if e.Target != "" {
		fmt.Fprintf(&b, "UNIX.slink=%s;", e.Target)
	}
	b.WriteString(" ")
	b.WriteString(e.Name)
	return b.String()
}

// ErrBadFacts reports an MLSx line without the "facts; name" shape.
var ErrBadFacts = errors.New("gridftp: malformed MLSx line")

// ParseEntry parses "fact=value;fact=value; name". Unknown facts are
// ignored; fact names are case-insensitive.
func ParseEntry(line string) (Entry, error) {
	line = strings.TrimRight(strings.TrimPrefix(line, " "), "\r\n")
	facts, name, ok := strings.Cut(line, " ")
	if !ok || name == "" {
		return Entry{}, fmt.Errorf("%w: %q", ErrBadFacts, truncate(line))
	}
	e := Entry{Name: name}
	for _, f := range strings.Split(facts, ";") {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		switch strings.ToLower(k) {
		case "type":
			e.Type = strings.ToLower(v)
			if strings.HasPrefix(e.Type, "os.unix=slink") {
				e.Type = "OS.unix=slink"
			}
		case "os.unix":
			e.Type = "OS.unix=" + v
		case "size":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return Entry{}, fmt.Errorf("%w: size %q", ErrBadFacts, truncate(v))
			}
			e.Size = n
		case "modify":
			ts, _, _ := strings.Cut(v, ".")
			t, err := time.ParseInLocation(TimeLayout, ts, time.UTC)
			if err != nil {
				return Entry{}, fmt.Errorf("%w: modify %q", ErrBadFacts, truncate(v))
			}
			e.Modify = t
		case "perm":
			e.Perm = v
		case "unix.mode":
			m, err := strconv.ParseUint(v, 8, 32)
			if err == nil {
				e.Mode = uint32(m)
			}
		case "unix.slink":
			e.Target = v
		case "unique":
			e.Unique = v
		}
	}
	return e, nil
}
