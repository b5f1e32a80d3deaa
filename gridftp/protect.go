package gridftp

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// The protected control channel of RFC 2228 as GCT runs it after AUTH
// GSSAPI: a client sends each command line wrapped, base64 encoded, as
// "ENC <token>" (or "MIC <token>" when the mechanism only signs), and a
// server sends each line of a reply wrapped alone, as "632-<token>" on
// every line but the last and "632 <token>" on the last (631 for signed
// only); the line inside keeps its own reply code.

// Wrapper protects a message (gss.Context.Wrap).
type Wrapper func(msg []byte) ([]byte, error)

// Unwrapper opens a protected message (gss.Context.Unwrap).
type Unwrapper func(token []byte) ([]byte, error)

// ErrProtection is a protected line that is malformed or does not open.
var ErrProtection = errors.New("gridftp: bad protected line")

// Protected reply codes.
const (
	CodeSafeReply    = 631 // integrity-protected reply line
	CodePrivateReply = 632 // confidentiality-protected reply line
)

// SealCommand is line (without its line break) as a protected command.
func SealCommand(line string, wrap Wrapper) (string, error) {
	tok, err := wrap([]byte(line + "\r\n"))
	if err != nil {
		return "", err
	}
	return "ENC " + base64.StdEncoding.EncodeToString(tok), nil
}

// OpenCommand reads a protected command line ("ENC <token>", "MIC
// <token>"; "CONF" is not offered) into the line it carries. ok is false
// for a line that is not protected.
func OpenCommand(line string, unwrap Unwrapper) (inner string, ok bool, err error) {
	verb, arg, _ := strings.Cut(line, " ")
	switch strings.ToUpper(verb) {
	case "ENC", "MIC":
	default:
		return "", false, nil
	}
	tok, err := base64.StdEncoding.DecodeString(strings.TrimSpace(arg))
	if err != nil {
		return "", true, fmt.Errorf("%w: %v", ErrProtection, err)
	}
	msg, err := unwrap(tok)
	if err != nil {
		return "", true, fmt.Errorf("%w: %v", ErrProtection, err)
	}
	s := strings.TrimSuffix(string(msg), "\n")
	s = strings.TrimSuffix(s, "\r")
	if strings.ContainsAny(s, "\r\n") {
		return "", true, fmt.Errorf("%w: more than one line in a token", ErrProtection)
	}
	return s, true, nil
}

// SealReply is r as protected reply lines, ready to write.
func SealReply(r Reply, wrap Wrapper) ([]byte, error) {
	var plain bytes.Buffer
	r.WriteTo(&plain)
	lines := strings.SplitAfter(strings.TrimSuffix(plain.String(), "\r\n"), "\r\n")
	var out bytes.Buffer
	for i, l := range lines {
		if !strings.HasSuffix(l, "\r\n") {
			l += "\r\n"
		}
		tok, err := wrap([]byte(l))
		if err != nil {
			return nil, err
		}
		sep := byte('-')
		if i == len(lines)-1 {
			sep = ' '
		}
		fmt.Fprintf(&out, "%d%c%s\r\n", CodePrivateReply, sep, base64.StdEncoding.EncodeToString(tok))
	}
	return out.Bytes(), nil
}

// OpenReplies reads protected reply lines from r and yields the plain
// text they carry, for ReadReply. A line that is not protected is an
// error: after AUTH a server protects every reply.
type OpenReplies struct {
	R      *bufio.Reader
	Unwrap Unwrapper
	lr     *LineReader
	buf    []byte
}

func (o *OpenReplies) Read(p []byte) (int, error) {
	if o.lr == nil {
		o.lr = &LineReader{R: o.R}
	}
	for len(o.buf) == 0 {
		line, err := o.lr.ReadLine()
		if err != nil {
			return 0, err
		}
		if len(line) < 5 || (line[3] != ' ' && line[3] != '-') ||
			(line[:3] != "631" && line[:3] != "632" && line[:3] != "633") {
			return 0, fmt.Errorf("%w: an unprotected reply %q", ErrProtection, truncate(line))
		}
		tok, err := base64.StdEncoding.DecodeString(strings.TrimSpace(line[4:]))
		if err != nil {
			return 0, fmt.Errorf("%w: %v", ErrProtection, err)
		}
		msg, err := o.Unwrap(tok)
		if err != nil {
			return 0, fmt.Errorf("%w: %v", ErrProtection, err)
		}
		if !bytes.HasSuffix(msg, []byte("\n")) {
			msg = append(msg, '\r', '\n')
		}
		o.buf = msg
	}
	n := copy(p, o.buf)
	o.buf = o.buf[n:]
	return n, nil
}
