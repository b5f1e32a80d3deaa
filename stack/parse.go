package stack

import (
	"errors"
	"fmt"
	"strings"
)

// Entry is one layer of a stack as a client names it: "name[:options]".
type Entry struct {
	Name string
	Opts []Option // in the order given
}

// Option is one "key=value" of an entry's options.
type Option struct{ Key, Value string }

// Get returns the value of the last option named key.
func (e Entry) Get(key string) (string, bool) {
	for i := len(e.Opts) - 1; i >= 0; i-- {
		if e.Opts[i].Key == key {
			return e.Opts[i].Value, true
		}
	}
	return "", false
}

// ErrSyntax reports a stack that does not parse.
var ErrSyntax = errors.New("bad stack")

// Parse reads a stack in the grammar of GCT's SITE SETDISKSTACK, bottom
// first. Like GCT it keeps empty names (which no layer has) and decodes
// the options once, "%%" to "%" and "%XX" to a byte, before it splits them
// at ";" and "=": a "," inside an option must travel as %2C. Empty options
// are skipped; one without "=" is refused here rather than when a
// transfer starts.
func Parse(s string) ([]Entry, error) {
	var out []Entry
	for _, raw := range strings.Split(s, ",") {
		name, opts, hasOpts := strings.Cut(raw, ":")
		e := Entry{Name: name}
		if hasOpts {
			for _, kv := range split(hexDecode(opts), ';') {
				if kv == "" {
					continue // globus-url-copy's multicast options start with ";"
				}
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return nil, fmt.Errorf("%w: layer %s: option %q is not key=value", ErrSyntax, name, kv)
				}
				e.Opts = append(e.Opts, Option{Key: k, Value: v})
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// List splits a list-valued option, whose first character is the
// delimiter of its elements: "#tar#cf#-" is [tar cf -].
func List(v string) []string {
	if v == "" {
		return nil
	}
	return split(v[1:], v[0])
}

// split cuts s at every sep as GCT's globus_list_from_string does: empty
// elements stay, except one at the very end.
func split(s string, sep byte) []string {
	parts := strings.Split(s, string(sep))
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// Decode undoes GCT's URL hex encoding once, as Parse does to options: for
// layers whose option values are themselves encoded (multicast URLs).
func Decode(s string) string { return hexDecode(s) }

// hexDecode undoes GCT's URL hex encoding once: "%%" is "%", "%XX" the
// byte XX, and any other "%" stays as it is.
func hexDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' {
			switch {
			case i+1 < len(s) && s[i+1] == '%':
				i++
			case i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
				c = unhex(s[i+1])<<4 | unhex(s[i+2])
				i += 2
			}
		}
		b.WriteByte(c)
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
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// Format writes entries in the grammar Parse reads, for a client: each
// option value is encoded so that the server's one decoding gives it back
// and its "," and "%" split or decode nothing. A value cannot hold ";": the
// server splits the options at it after decoding, so Format refuses one.
func Format(entries []Entry) (string, error) {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		if e.Name == "" || strings.ContainsAny(e.Name, ",:") {
			return "", fmt.Errorf("%w: layer name %q", ErrSyntax, e.Name)
		}
		b.WriteString(e.Name)
		for j, o := range e.Opts {
			if j == 0 {
				b.WriteByte(':')
			} else {
				b.WriteByte(';')
			}
			if o.Key == "" || strings.ContainsAny(o.Key, "=;,%") {
				return "", fmt.Errorf("%w: option name %q", ErrSyntax, o.Key)
			}
			if strings.Contains(o.Value, ";") {
				return "", fmt.Errorf("%w: option %s: a value cannot hold \";\"", ErrSyntax, o.Key)
			}
			b.WriteString(o.Key)
			b.WriteByte('=')
			b.WriteString(encodeValue(o.Value))
		}
	}
	return b.String(), nil
}

// encodeValue escapes "%", "," and controls as %XX.
func encodeValue(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '%' || c == ',' || c < 0x20 || c == 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// JoinList writes a list-valued option with the first of delims that none
// of elems holds, as GCT's clients do (a fixed choice, not their buggy one).
func JoinList(elems []string, delims string) (string, error) {
	for i := 0; i < len(delims); i++ {
		d := delims[i : i+1]
		clash := false
		for _, e := range elems {
			if strings.Contains(e, d) {
				clash = true
				break
			}
		}
		if !clash {
			return d + strings.Join(elems, d), nil
		}
	}
	return "", fmt.Errorf("%w: every delimiter of %q occurs in the list", ErrSyntax, delims)
}
