package gridftp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Reply codes used by ferry, tagged with the document that defines them.
const (
	CodeRestartMarker     = 111 // GFD.20 range marker
	CodePerfMarker        = 112 // GFD.20 performance marker
	CodeReusingData       = 125 // RFC 959: data connection already open
	CodeOpeningData       = 150 // RFC 959
	CodeOK                = 200 // RFC 959
	CodeFeatures          = 211 // RFC 2389
	CodeStatus            = 212 // RFC 959 (directory status)
	CodeFileStatus        = 213 // RFC 959 / 3659
	CodeHelp              = 214 // RFC 959
	CodeSystem            = 215 // RFC 959
	CodeReady             = 220 // RFC 959
	CodeClosing           = 221 // RFC 959
	CodeTransferComplete  = 226 // RFC 959
	CodePassive           = 227 // RFC 959
	CodeExtPassive        = 229 // RFC 2428; GFD.20 SPAS
	CodeLoggedIn          = 230 // RFC 959
	CodeAuthDone          = 235 // RFC 2228: security data exchange complete
	CodeFileActionOK      = 250 // RFC 959
	CodePathCreated       = 257 // RFC 959
	CodeNeedPassword      = 331 // RFC 959
	CodeAuthNeedData      = 334 // RFC 2228: AUTH accepted, ADAT must follow
	CodeAuthMoreData      = 335 // RFC 2228: ADAT accepted, more is needed
	CodePending           = 350 // RFC 959
	CodeNotAvailable      = 421 // RFC 959
	CodeCantOpenData      = 425 // RFC 959
	CodeTransferAborted   = 426 // RFC 959
	CodeLocalError        = 451 // RFC 959
	CodeNoSpace           = 452 // RFC 959
	CodeSyntaxError       = 500 // RFC 959
	CodeBadArguments      = 501 // RFC 959
	CodeNotImplemented    = 502 // RFC 959
	CodeBadSequence       = 503 // RFC 959
	CodeParamNotSupported = 504 // RFC 959
	CodeNotLoggedIn       = 530 // RFC 959
	CodeProtDenied        = 533 // RFC 2228: an unprotected command when protection is on
	CodeAuthRejected      = 535 // RFC 2228: the security data is refused
	CodeProtNotSupported  = 536 // RFC 2228
	CodeFileUnavailable   = 550 // RFC 959
	CodeExceededStorage   = 552 // RFC 959: over the storage allocation
	CodeNameNotAllowed    = 553 // RFC 959
)

// Reply is one control-channel reply. Lines holds the text without the code:
// a single line for an ordinary reply; for a multi-line reply the first line
// follows "NNN-", the middle lines are sent as they are (RFC 2389 style lines
// start with a space) and the last follows "NNN ".
type Reply struct {
	Code  int
	Lines []string
}

// Text joins the reply's lines with newlines.
func (r Reply) Text() string { return strings.Join(r.Lines, "\n") }

// Preliminary reports a 1xx reply: more replies to the same command follow.
func (r Reply) Preliminary() bool { return r.Code >= 100 && r.Code < 200 }

// Positive reports a 2xx or 3xx reply.
func (r Reply) Positive() bool { return r.Code >= 200 && r.Code < 400 }

// WriteTo writes the reply in wire form.
func (r Reply) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	switch len(r.Lines) {
	case 0:
		fmt.Fprintf(&b, "%03d \r\n", r.Code)
	case 1:
		fmt.Fprintf(&b, "%03d %s\r\n", r.Code, r.Lines[0])
	default:
		fmt.Fprintf(&b, "%03d-%s\r\n", r.Code, r.Lines[0])
		for _, l := range r.Lines[1 : len(r.Lines)-1] {
			b.WriteString(l)
			b.WriteString("\r\n")
		}
		fmt.Fprintf(&b, "%03d %s\r\n", r.Code, r.Lines[len(r.Lines)-1])
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// String is the reply in wire form without the final line break.
func (r Reply) String() string {
	var b strings.Builder
	r.WriteTo(&b)
	return strings.TrimSuffix(b.String(), "\r\n")
}

// Error is a reply that reports failure (4xx, 5xx) seen as a Go error.
type Error struct{ Reply Reply }

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s", e.Reply.Code, strings.Join(e.Reply.Lines, " / "))
}

// Temporary reports a 4xx reply: the same command may succeed later.
func (e *Error) Temporary() bool { return e.Reply.Code >= 400 && e.Reply.Code < 500 }

// MaxReplyLines bounds a multi-line reply so that a hostile peer cannot make
// a reader buffer without limit.
const MaxReplyLines = 10000

// ErrMalformedReply reports a reply line that does not start with a code.
var ErrMalformedReply = errors.New("gridftp: malformed reply")

// ReadReply reads one reply. Both multi-line styles are accepted: lines
// "NNN-text" and free text lines (RFC 959 / RFC 2389), ended by "NNN text"
// with the code of the first line. The continuation prefix "NNN-" is removed
// from middle lines; other middle lines are kept as they are.
func ReadReply(r *bufio.Reader) (Reply, error) {
	line, err := ReadLine(r)
	if err != nil {
		return Reply{}, err
	}
	code, sep, text, ok := splitCodeLine(line)
	if !ok {
		return Reply{}, fmt.Errorf("%w: %q", ErrMalformedReply, truncate(line))
	}
	rep := Reply{Code: code, Lines: []string{text}}
	if sep != '-' {
		return rep, nil
	}
	for {
		line, err := ReadLine(r)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Reply{}, err
		}
		if c, s, t, ok := splitCodeLine(line); ok && c == code {
			rep.Lines = append(rep.Lines, t)
			if s == ' ' {
				return rep, nil
			}
		} else {
			rep.Lines = append(rep.Lines, line)
		}
		if len(rep.Lines) > MaxReplyLines {
			return Reply{}, fmt.Errorf("%w: more than %d lines", ErrMalformedReply, MaxReplyLines)
		}
	}
}

// splitCodeLine splits "NNN text" or "NNN-text".
func splitCodeLine(line string) (code int, sep byte, text string, ok bool) {
	if len(line) < 3 {
		return 0, 0, "", false
	}
	c, err := strconv.Atoi(line[:3])
	if err != nil || c < 100 || c > 699 || line[0] == '+' || line[0] == '-' {
		return 0, 0, "", false
	}
	if len(line) == 3 {
		return c, ' ', "", true
	}
	if line[3] != ' ' && line[3] != '-' {
		return 0, 0, "", false
	}
	return c, line[3], line[4:], true
}

// MaxLine bounds one control-channel line (a command or a reply line).
const MaxLine = 16 << 10

// ErrLineTooLong reports a control line over MaxLine bytes.
var ErrLineTooLong = errors.New("gridftp: line too long")

// LineReader reads control lines. A line cut by a read deadline is kept
// and completed by the next call, so a deadline never garbles a command.
type LineReader struct {
	R       *bufio.Reader
	partial []byte
}

// ReadLine reads one CRLF- or LF-terminated line of at most MaxLine bytes,
// without its line ending.
func (lr *LineReader) ReadLine() (string, error) {
	for {
		frag, err := lr.R.ReadSlice('\n')
		if len(lr.partial)+len(frag) > MaxLine {
			lr.partial = nil
			return "", ErrLineTooLong
		}
		lr.partial = append(lr.partial, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF && len(lr.partial) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
		line := strings.TrimSuffix(string(lr.partial[:len(lr.partial)-1]), "\r")
		lr.partial = lr.partial[:0]
		return line, nil
	}
}

// ReadLine reads one control line (see MaxLine), without its line ending.
// Unlike LineReader it loses a partial line to an error.
func ReadLine(r *bufio.Reader) (string, error) {
	lr := LineReader{R: r}
	return lr.ReadLine()
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
