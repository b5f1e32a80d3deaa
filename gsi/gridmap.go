package gsi

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// Gridmap maps DNs to local users, as GCT's grid-mapfile: one line per DN,
// `"DN" user[,user...]` (an unquoted DN ends at the first blank), blank
// lines and lines starting with # ignored. Within quotes \" is a quote;
// \xHH anywhere is a byte, as in OneLine's output.
type Gridmap struct {
	entries []gridmapEntry
}

type gridmapEntry struct {
	dn    string // normalized (see normalizeDN)
	users []string
}

// ReadGridmap reads a grid-mapfile.
func ReadGridmap(path string) (*Gridmap, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	g, err := ParseGridmap(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// ParseGridmap parses a grid-mapfile. A malformed line (an unclosed quote,
// a DN with no user) is an error naming the line; GCT skips such lines
// silently, which hides mistakes.
func ParseGridmap(r io.Reader) (*Gridmap, error) {
	g := &Gridmap{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		e, ok, err := parseGridmapLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("grid-mapfile line %d: %w", n, err)
		}
		if ok {
			g.entries = append(g.entries, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("grid-mapfile: %w", err)
	}
	return g, nil
}

const gridmapBlanks = " \t\r\n"

func parseGridmapLine(line string) (gridmapEntry, bool, error) {
	line = strings.TrimLeft(line, gridmapBlanks)
	if line == "" || line[0] == '#' {
		return gridmapEntry{}, false, nil
	}
	var dn, rest string
	if line[0] == '"' {
		var b strings.Builder
		i := 1
		for ; i < len(line) && line[i] != '"'; i++ {
			if line[i] == '\\' && i+1 < len(line) && line[i+1] == '"' {
				i++
			}
			b.WriteByte(line[i])
		}
		if i >= len(line) {
			return gridmapEntry{}, false, fmt.Errorf("a closing quote is missing: %s", line)
		}
		dn, rest = b.String(), line[i+1:]
	} else {
		end := strings.IndexAny(line, gridmapBlanks)
		if end < 0 {
			return gridmapEntry{}, false, fmt.Errorf("nothing follows the DN: %s", line)
		}
		dn, rest = line[:end], line[end:]
	}
	var users []string
	for _, u := range strings.FieldsFunc(rest, func(r rune) bool { return r == ',' || strings.ContainsRune(gridmapBlanks, r) }) {
		users = append(users, u)
	}
	if len(users) == 0 {
		return gridmapEntry{}, false, fmt.Errorf("no user for %q", dn)
	}
	return gridmapEntry{dn: normalizeDN(unescapeDN(dn)), users: users}, true, nil
}

// unescapeDN turns a grid-mapfile DN into OneLine's form: \xHH is the byte
// HH, any other backslash escapes the next character; bytes outside
// ' '..'~' are then written \xHH (gridmap.c,
// globus_i_gss_assist_gridmap_parse_globusid). OneLine's own "\/" and "\+"
// are kept as they are, so a DN copied from grid-proxy-info matches.
func unescapeDN(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			switch n := s[i+1]; {
			case n == 'x' && i+3 < len(s) && isHex(s[i+2]) && isHex(s[i+3]):
				c = unhex(s[i+2])<<4 | unhex(s[i+3])
				i += 3
			case n == '/' || n == '+':
				b.WriteByte('\\')
				c = n
				i++
			default:
				c = n
				i++
			}
		}
		if c < ' ' || c > '~' {
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// normalizeDN makes DNs compare as GCT compares them
// (globus_gsi_cert_utils.c, globus_i_gsi_cert_utils_dn_cmp): ignoring
// case, with the attribute names UID= as USERID= and E= and Email= as
// emailAddress=.
func normalizeDN(dn string) string {
	var b strings.Builder
	for i := 0; i < len(dn); i++ {
		b.WriteByte(dn[i])
		if dn[i] != '/' {
			continue
		}
		rest := dn[i+1:]
		for _, r := range [...][2]string{{"UID=", "USERID="}, {"E=", "emailAddress="}, {"Email=", "emailAddress="}} {
			if len(rest) >= len(r[0]) && strings.EqualFold(rest[:len(r[0])], r[0]) {
				b.WriteString(r[1])
				i += len(r[0])
				break
			}
		}
	}
	return strings.ToLower(b.String())
}

// Lookup returns the first user of the first line whose DN is dn.
func (g *Gridmap) Lookup(dn string) (user string, ok bool) {
	if users := g.Users(dn); len(users) > 0 {
		return users[0], true
	}
	return "", false
}

// Users returns all the users of the first line whose DN is dn.
func (g *Gridmap) Users(dn string) []string {
	n := normalizeDN(dn)
	for _, e := range g.entries {
		if e.dn == n {
			return append([]string(nil), e.users...)
		}
	}
	return nil
}
