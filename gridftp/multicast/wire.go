package multicast

import (
	"errors"
	"fmt"
	"strings"

	"ferry/gridftp"
)

// What a client that builds trees itself (ferry's engine) needs of the
// layer's wire forms: the stack that starts a tree, where the tree puts
// each destination, and the failure report that names the destinations a
// file did not reach.

// Marker starts the lines of a failure report, which a parent reads from
// its child's reply to learn which of that child's destinations failed.
const Marker = "Multicast: the file did not reach "

// Spec is the SITE SETDISKSTACK argument that makes a server write what
// it receives (when o.LocalWrite) and forward it to o.URLs, each a
// destination "url?opts", at fan-out o.CC with o.P streams to each child,
// in GCT's encoding.
func (o Options) Spec() string {
	body := fmt.Sprintf("cc=%d;P=%d;", max(o.CC, 1), max(o.P, 1))
	if !o.LocalWrite {
		body += "local_write=n;"
	}
	if o.Part {
		body += "part=y;"
	}
	body += "urls="
	for _, u := range o.URLs {
		body += "#" + Encode(u)
	}
	return "file," + Name + ":" + Encode(body)
}

// WithOptions is the destination url told to forward, as a hop, at
// fan-out cc with p streams to each child: "url?cc=N;P=N", which
// ParseHop reads back into Hop.Own.
func WithOptions(url string, cc, p int) string {
	return fmt.Sprintf("%s?cc=%d;P=%d", url, max(cc, 1), max(p, 1))
}

// Inner reports, for each of urls, whether the tree a hop plans for them
// at fan-out cc, with every hop below planning at cc too, gives it
// destinations of its own to forward to. A server that cannot forward
// (GCT without the driver) can only be a leaf.
func Inner(urls []string, cc int) []bool {
	inner := make([]bool, len(urls))
	for i, b := range Below(urls, cc) {
		inner[i] = len(b) > 0
	}
	return inner
}

// Below lists, for each of urls, the positions of the destinations in its
// subtree: those it passes the file on to, directly or through others,
// in the tree Inner describes.
func Below(urls []string, cc int) [][]int {
	below := make([][]int, len(urls))
	at := make(map[string]int, len(urls))
	for i, u := range urls {
		at[u] = i
	}
	var walk func([]string)
	walk = func(us []string) {
		for _, c := range Plan(us, cc) {
			for _, u := range c.Sub {
				below[at[c.URL]] = append(below[at[c.URL]], at[u])
			}
			walk(c.Sub)
		}
	}
	walk(urls)
	return below
}

// Report is the failure report a hop gives in its reply: a Marker line,
// then the destinations, as Show names them, that did not get the file.
func Report(dests []string) string {
	return fmt.Sprintf("%s%d of its destinations:\n%s", Marker, len(dests), strings.Join(dests, "\n"))
}

// Undelivered reads a failure report from err, a server's reply to a
// transfer through the layer: the destinations, as Show names them, that
// did not get the file. ok is false when err is no such report (the
// transfer failed at that server itself, or for another reason).
func Undelivered(err error) (dests []string, ok bool) {
	var ge *gridftp.Error
	if !errors.As(err, &ge) {
		return nil, false
	}
	for _, l := range ge.Reply.Lines {
		l = strings.TrimSpace(l)
		if len(l) > 4 && l[3] == '-' {
			l = l[4:]
		}
		switch {
		case strings.HasPrefix(l, Marker):
			ok = true
		case ok && strings.Contains(l, "://"):
			dests = append(dests, Show(l)) // a GCT child lists URLs as it was given them, passwords and all
		}
	}
	return dests, ok && len(dests) > 0
}
