package gridftp

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Transfers of many files in one (ferry's tar and checksum-list layers)
// name their members on the control channel and say how each fared while
// the data moves:
//
//	SITE MEMBERS dir/a dir/b%20c      names for the next RETR or STOR, appended
//	113-Members                       an intermediate reply, as 111 and 112 are
//	 ok dir/a 51200 0cc175b9c0f1b6a831c399e269772661
//	 fail dir/b%20c 550 PATH_NOT_FOUND: no such file
//	113 End.
//
// Names are relative to the transfer's path, with bytes below "!", "%" and
// DEL escaped as %XX. Every member of a transfer is reported once, before
// its final reply.

// CodeMembers is ferry's intermediate reply that reports members.
const CodeMembers = 113

// Member is how one member of a many-file transfer fared.
type Member struct {
	Name string
	Size int64  // bytes moved, when it arrived
	Sum  string // hex checksum, when one was asked for
	// Fault, when the member did not arrive, is the reply a transfer of it
	// alone would have got, for Classify.
	Fault *Reply
}

// EncodeName escapes a member name for the control channel.
func EncodeName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c == '%' || c == 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// DecodeName undoes EncodeName.
func DecodeName(s string) (string, error) {
	name, err := url.PathUnescape(s)
	if err != nil || name == "" {
		return "", fmt.Errorf("%w: member name %q", ErrMalformedReply, s)
	}
	return name, nil
}

// MembersReply is the 113 reply that reports ms.
func MembersReply(ms []Member) Reply {
	lines := make([]string, 0, len(ms)+2)
	lines = append(lines, "Members")
	for _, m := range ms {
		name := EncodeName(m.Name)
		if m.Fault != nil {
			msg := strings.Join(m.Fault.Lines, " ")
			msg = strings.Map(func(r rune) rune {
				if r < ' ' || r == 0x7f {
					return ' '
				}
				return r
			}, msg)
			lines = append(lines, fmt.Sprintf(" fail %s %03d %s", name, m.Fault.Code, msg))
			continue
		}
		sum := m.Sum
		if sum == "" {
			sum = "-"
		}
		lines = append(lines, fmt.Sprintf(" ok %s %d %s", name, m.Size, sum))
	}
	return Reply{Code: CodeMembers, Lines: append(lines, "End.")}
}

// ParseMembers reads a 113 reply.
func ParseMembers(r Reply) ([]Member, error) {
	if r.Code != CodeMembers || len(r.Lines) < 2 {
		return nil, fmt.Errorf("%w: not a members reply: %s", ErrMalformedReply, r)
	}
	var out []Member
	for _, l := range r.Lines[1 : len(r.Lines)-1] {
		f := strings.SplitN(strings.TrimPrefix(l, " "), " ", 4)
		if len(f) < 4 {
			return nil, fmt.Errorf("%w: member line %q", ErrMalformedReply, l)
		}
		name, err := DecodeName(f[1])
		if err != nil {
			return nil, err
		}
		m := Member{Name: name}
		switch f[0] {
		case "ok":
			if m.Size, err = strconv.ParseInt(f[2], 10, 64); err != nil || m.Size < 0 {
				return nil, fmt.Errorf("%w: member line %q", ErrMalformedReply, l)
			}
			if f[3] != "-" {
				m.Sum = f[3]
			}
		case "fail":
			code, err := strconv.Atoi(f[2])
			if err != nil || code < 400 || code > 599 {
				return nil, fmt.Errorf("%w: member line %q", ErrMalformedReply, l)
			}
			m.Fault = &Reply{Code: code, Lines: []string{f[3]}}
		default:
			return nil, fmt.Errorf("%w: member line %q", ErrMalformedReply, l)
		}
		out = append(out, m)
	}
	return out, nil
}

// MembersCommands are the SITE MEMBERS commands that name names, each
// line at most limit bytes long (one name longer than that gets a line of
// its own).
func MembersCommands(names []string, limit int) []string {
	var cmds []string
	var b strings.Builder
	for _, n := range names {
		e := EncodeName(n)
		if b.Len() > 0 && b.Len()+1+len(e) > limit {
			cmds = append(cmds, b.String())
			b.Reset()
		}
		if b.Len() == 0 {
			b.WriteString("SITE MEMBERS")
		}
		b.WriteByte(' ')
		b.WriteString(e)
	}
	if b.Len() > 0 {
		cmds = append(cmds, b.String())
	}
	return cmds
}
