package multicast

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"ferry/gridftp"
	"ferry/stack"
)

// Names of the layer in a stack: GCT's, and ferry's alias.
const (
	Name  = "gridftp_multicast"
	Alias = "forward"
)

// GCT's defaults.
const (
	DefaultCC = 2 // children per hop
	DefaultP  = 1 // streams to each child
)

// maxP bounds the streams to one child.
const maxP = 64

// Options are one hop's options.
type Options struct {
	URLs       []string // the destinations below this hop, each "url?opts", decoded
	CC         int      // fan-out
	P          int      // streams to each child
	LocalWrite bool     // write to the layer below, not only forward
	// Part (ferry's own, "part=y") has each child that writes store its
	// copy under its temporary name (internal/partname) and renames it over
	// its name once the copy is checked: a relay's child (local_write=n
	// at the relay), which its client cannot reach to rename.
	Part bool
}

// ParseOptions reads a layer entry's options as GCT does; an unknown
// option or a bad destination is refused.
func ParseOptions(e stack.Entry) (Options, error) {
	o := Options{CC: DefaultCC, P: DefaultP, LocalWrite: true}
	for _, kv := range e.Opts {
		if err := o.set(kv.Key, kv.Value); err != nil {
			return Options{}, stack.Refuse(fmt.Sprintf("%s: %v", e.Name, err))
		}
	}
	if !o.LocalWrite && len(o.URLs) == 0 {
		// GCT fails such a transfer with "Nothing to open".
		return Options{}, stack.Refuse(fmt.Sprintf("%s: local_write=n and no urls: nothing to write to.", e.Name))
	}
	for _, u := range o.URLs {
		if _, err := ParseHop(u); err != nil {
			return Options{}, stack.Refuse(fmt.Sprintf("%s: %v", e.Name, err))
		}
	}
	return o, nil
}

// set sets one option, from an entry or from a destination's "?opts".
func (o *Options) set(k, v string) error {
	var err error
	switch k {
	case "urls":
		o.URLs = nil
		for _, u := range stack.List(v) {
			if u == "" {
				continue
			}
			o.URLs = append(o.URLs, stack.Decode(u))
		}
	case "cc":
		o.CC, err = count(k, v, 1<<10)
	case "P":
		o.P, err = count(k, v, maxP)
	case "tcpbs":
		_, err = count(k, v, 1<<30)
	case "local_write":
		o.LocalWrite, err = yes(v, k)
	case "part":
		o.Part, err = yes(v, k)
	case "subject":
		// GCT parses it and never uses it.
	default:
		err = fmt.Errorf("unknown option %q", k)
	}
	return err
}

func count(k, v string, most int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, fmt.Errorf("%s=%q: want 1 to %d", k, v, most)
	}
	return n, nil
}

// yes reads a GCT boolean, option k's.
func yes(v, k string) (bool, error) {
	switch strings.ToLower(v) {
	case "y", "yes", "true", "t", "1", "on":
		return true, nil
	case "n", "no", "false", "f", "0", "off":
		return false, nil
	}
	return false, fmt.Errorf("%s=%q: want y or n", k, v)
}

// Hop is one destination: where to send, and its own options.
type Hop struct {
	URL gridftp.URL // without "?opts"
	Own Options     // its "?opts" read
}

// ParseHop reads "ftp://[user[:pass]@]host[:port]/path?opts", or
// gsiftp:// (logged in with the session's delegated credential).
func ParseHop(raw string) (Hop, error) {
	base, opts, _ := strings.Cut(raw, "?")
	u, err := gridftp.Parse(base)
	if errors.Is(err, gridftp.ErrNotURL) {
		return Hop{}, fmt.Errorf("destination %q: %v", Show(raw), err)
	}
	if err != nil || u.SSH() || u.Path == "" {
		return Hop{}, fmt.Errorf("destination %q: want ftp://host:port/path or gsiftp://", Show(raw))
	}
	h := Hop{URL: u, Own: Options{CC: DefaultCC, P: DefaultP, LocalWrite: true}}
	for _, kv := range strings.Split(opts, ";") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "urls" {
			return Hop{}, fmt.Errorf("destination %q: bad option %q", Show(raw), kv)
		}
		if err := h.Own.set(k, v); err != nil {
			return Hop{}, fmt.Errorf("destination %q: %v", Show(raw), err)
		}
	}
	return h, nil
}

// Show is how a destination is named to users and in logs: without its
// options and without a password (gridftp.Redact), in the form a ferry
// hop's failure report names it, whoever wrote the URL.
func Show(raw string) string {
	base, _, _ := strings.Cut(raw, "?")
	if u, err := url.Parse(base); err == nil {
		base = u.String()
	}
	return gridftp.Redact(base)
}

// Child is one direct child of a hop: its destination and the ones it
// forwards to in turn.
type Child struct {
	URL string   // "url?opts"
	Sub []string // its subtree, each "url?opts"
}

// Plan splits urls among min(cc, len(urls)) direct children as GCT does:
// the first ones are the children; each then takes, in turn, up to
// ceil(len(urls)/children) of the rest, so that the first children fill
// up before the later ones get any.
func Plan(urls []string, cc int) []Child {
	k := min(cc, len(urls))
	if k <= 0 {
		return nil
	}
	each := (len(urls) + k - 1) / k
	out := make([]Child, k)
	rest := urls[k:]
	for i := range out {
		n := min(each, len(rest))
		out[i] = Child{URL: urls[i], Sub: rest[:n:n]}
		rest = rest[n:]
	}
	return out
}

// encChars are the characters GCT's multicast driver %-encodes
// (GMC_URL_ENC_CHAR), besides "%" and controls.
const encChars = "#;:=+ ,"

// Encode %-encodes s as GCT's multicast driver and globus-url-copy -MC
// do (globus_url_string_hex_encode with encChars).
func Encode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' || c < 0x20 || c >= 0x7f || strings.IndexByte(encChars, c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Stack is the SITE SETDISKSTACK c is sent: GCT's
// "file,gridftp_multicast:" and, encoded once, "urls=#u1#u2;" (each URL
// encoded once more) and the child's own options. A leaf that writes
// gets plain "file": GCT sends it "file,gridftp_multicast:", which only a
// server that offers the multicast driver accepts; any server can be
// ferry's leaf.
func (c Child) Stack() string {
	if h, err := ParseHop(c.URL); len(c.Sub) == 0 && err == nil && h.Own.LocalWrite {
		return "file"
	}
	var body strings.Builder
	if len(c.Sub) > 0 {
		body.WriteString("urls=")
		for _, u := range c.Sub {
			body.WriteByte('#')
			body.WriteString(Encode(u))
		}
		body.WriteByte(';')
	}
	if _, opts, ok := strings.Cut(c.URL, "?"); ok {
		body.WriteString(opts)
	}
	return "file," + Name + ":" + Encode(body.String())
}
