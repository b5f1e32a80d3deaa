package myproxy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// protocolVersion is the VERSION of every request and response.
const protocolVersion = "MYPROXYv2"

// Commands of a request (myproxy_protocol.h); ferry sends only GET.
const cmdGet = 0

// Response codes.
const (
	respOK        = 0
	respError     = 1
	respAuthorize = 2 // the server wants more authorization
)

// request is a client's request.
type request struct {
	Command              int
	Username, Passphrase string
	Lifetime             time.Duration // sent in whole seconds
}

// maxRequest bounds an encoded request: the server reads a message as one
// GSI token, one TLS record, and crypto/tls puts no more than about 1150
// bytes in each of the first records of a connection.
const maxRequest = 1024

// encode is the request on the wire: KEY=value lines, then a NUL. A
// value may hold neither a newline nor a NUL (it would end the line or
// the message and let the rest pass for other keys).
func (r request) encode() ([]byte, error) {
	switch {
	case r.Username == "":
		return nil, errors.New("no username")
	case strings.ContainsAny(r.Username, "\n\r\x00"):
		return nil, fmt.Errorf("the username %q holds a newline or NUL", r.Username)
	case strings.ContainsAny(r.Passphrase, "\n\r\x00"):
		return nil, errors.New("the pass phrase holds a newline or NUL")
	case r.Lifetime < time.Second:
		return nil, fmt.Errorf("lifetime %v: less than a second", r.Lifetime)
	}
	var b strings.Builder
	b.WriteString("VERSION=" + protocolVersion + "\n")
	b.WriteString("COMMAND=" + strconv.Itoa(r.Command) + "\n")
	b.WriteString("USERNAME=" + r.Username + "\n")
	b.WriteString("PASSPHRASE=" + r.Passphrase + "\n")
	b.WriteString("LIFETIME=" + strconv.FormatInt(int64(r.Lifetime/time.Second), 10) + "\n")
	b.WriteByte(0)
	if b.Len() > maxRequest {
		return nil, fmt.Errorf("a request of %d bytes: the username and pass phrase are too long", b.Len())
	}
	return []byte(b.String()), nil
}

// response is a server's response.
type response struct {
	Code        int
	Errors      []string // ERROR lines, in order
	AuthMethods []string // AUTHORIZATION_DATA lines of a respAuthorize
}

// maxLines bounds the lines of a response.
const maxLines = 1024

// parseResponse parses a response's text (without its NUL): KEY=value
// lines; VERSION must be MYPROXYv2 and RESPONSE 0, 1 or 2, each once;
// other keys are ignored.
func parseResponse(text []byte) (*response, error) {
	s := string(text)
	if strings.IndexByte(s, 0) >= 0 {
		return nil, errors.New("a NUL inside the response")
	}
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil, errors.New("an empty response")
	}
	lines := strings.Split(s, "\n")
	if len(lines) > maxLines {
		return nil, fmt.Errorf("a response of %d lines", len(lines))
	}
	r := &response{Code: -1}
	version := ""
	for _, line := range lines {
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("response line %q is no KEY=value", clip(line))
		}
		switch key {
		case "VERSION":
			if version != "" {
				return nil, errors.New("two VERSION lines in the response")
			}
			version = val
		case "RESPONSE":
			if r.Code != -1 {
				return nil, errors.New("two RESPONSE lines in the response")
			}
			n, err := strconv.Atoi(val)
			if err != nil || n < respOK || n > respAuthorize || val != strconv.Itoa(n) {
				return nil, fmt.Errorf("response code %q", clip(val))
			}
			r.Code = n
		case "ERROR":
			r.Errors = append(r.Errors, val)
		case "AUTHORIZATION_DATA":
			r.AuthMethods = append(r.AuthMethods, val)
		}
	}
	switch {
	case version == "":
		return nil, errors.New("no VERSION in the response")
	case version != protocolVersion:
		return nil, fmt.Errorf("protocol version %q, not %s", clip(version), protocolVersion)
	case r.Code == -1:
		return nil, errors.New("no RESPONSE in the response")
	}
	return r, nil
}

// clip shortens text from the server for a message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// parseCerts parses the certificates of a GET: a byte with their number,
// then each one's DER. complete is false while b is a prefix of such a
// message; rest is what follows the last certificate (the server's final
// response).
func parseCerts(b []byte) (ders [][]byte, rest []byte, complete bool, err error) {
	if len(b) == 0 {
		return nil, nil, false, nil
	}
	n := int(b[0])
	if n == 0 {
		return nil, nil, false, errors.New("the server sent no certificate")
	}
	rest = b[1:]
	for i := 0; i < n; i++ {
		l, ok, err := derLength(rest)
		if err != nil {
			return nil, nil, false, fmt.Errorf("certificate %d of %d: %w", i, n, err)
		}
		if !ok || len(rest) < l {
			return nil, nil, false, nil
		}
		ders = append(ders, rest[:l])
		rest = rest[l:]
	}
	return ders, rest, true, nil
}

// derLength is the length of the DER SEQUENCE b starts with; ok is false
// while its header is incomplete.
func derLength(b []byte) (l int, ok bool, err error) {
	if len(b) < 2 {
		return 0, false, nil
	}
	if b[0] != 0x30 {
		return 0, false, fmt.Errorf("not a DER SEQUENCE (tag 0x%02x)", b[0])
	}
	if b[1] < 0x80 {
		return 2 + int(b[1]), true, nil
	}
	k := int(b[1] & 0x7f)
	if k == 0 || k > 3 {
		return 0, false, errors.New("a DER length that is indefinite or over 16 MB")
	}
	if len(b) < 2+k {
		return 0, false, nil
	}
	for _, x := range b[2 : 2+k] {
		l = l<<8 | int(x)
	}
	return 2 + k + l, true, nil
}
