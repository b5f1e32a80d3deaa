package gridftp

import (
	"errors"
	"fmt"
	"strings"
)

// Fault is what a server's refusal of a command means, read once for the
// engine, the service's workers and its file operations alike.
type Fault int

// Faults, from a reply's GlobusError class (ferry's and GCT's servers send
// one), its words, or its code.
const (
	FaultTransient  Fault = iota // on the way, not in the path: worth another try
	FaultNotFound                // the path does not exist
	FaultPermission              // the path is not allowed
	FaultExists                  // the path exists already
	FaultNotEmpty                // a directory that is not empty
	FaultIsDir                   // a directory where a file is needed
	FaultNotDir                  // a file where a directory is needed
	FaultInvalid                 // a bad name, a path that cannot be, a command not understood
	FaultNoSpace                 // the destination is full or over quota: nothing moves until someone frees space
	FaultChecksum                // the data arrived damaged: send it again
	FaultLogin                   // the login is refused
	FaultRefused                 // refused for no reason given (a 5xx reply without words)
)

// Retry reports whether another try may mend a refusal of kind f: one on
// the way, data that arrived damaged, or a refusal for no reason given (GCT
// answers 500 for failures on the way too, and the tries are bounded).
// internal/fault reads it through Error.Retry.
func (f Fault) Retry() bool {
	return f == FaultTransient || f == FaultChecksum || f == FaultRefused
}

// Fatal reports whether a refusal of kind f stops all the work, not only
// its path: nothing more moves to a destination full or over its quota
// until someone frees space.
func (f Fault) Fatal() bool { return f == FaultNoSpace }

// Retry reports whether another try may mend the refusal e (Fault.Retry).
func (e *Error) Retry() bool { return Classify(e).Retry() }

// Fatal reports whether the refusal e stops all the work (Fault.Fatal).
func (e *Error) Fatal() bool { return Classify(e).Fatal() }

// faultRules are the rules of Classify, first match wins: a GlobusError
// class, or words either server uses, then codes. Words come first since
// GCT answers 500 both for a missing file and a reset connection.
var faultRules = []struct {
	words []string // in the reply's text; nil: any
	code  int      // 0: any; 4 or 5: any of that class
	fault Fault
}{
	{[]string{"c=NO_SPACE", "c=QUOTA_EXCEEDED", "No space left", "Disk quota exceeded", "File too large"}, 0, FaultNoSpace},
	{[]string{"c=PERMISSION_DENIED", "Permission denied", "Operation not permitted"}, 0, FaultPermission},
	{[]string{"c=INCORRECT_CHECKSUM", "ecksum mismatch"}, 0, FaultChecksum},
	{[]string{"c=PATH_EXISTS", "File exists"}, 0, FaultExists},
	{[]string{"Directory not empty"}, 0, FaultNotEmpty},
	{[]string{"c=IS_A_DIRECTORY", "Is a directory"}, 0, FaultIsDir},
	{[]string{"Not a directory"}, 0, FaultNotDir},
	{[]string{"c=PATH_NOT_FOUND", "No such file"}, 0, FaultNotFound},
	{[]string{"c=INVALID_PATH", "File name too long", "symbolic links"}, 0, FaultInvalid},
	{[]string{"c=DATA_CHANNEL", "c=INTERNAL_ERROR", "c=TIMEOUT", "c=ABORTED", "Connection reset", "Broken pipe", "timed out", "Timed out"}, 0, FaultTransient},
	{nil, CodeNotLoggedIn, FaultLogin},
	{nil, CodeNoSpace, FaultNoSpace},
	{nil, CodeExceededStorage, FaultNoSpace},
	{nil, CodeFileUnavailable, FaultNotFound},
	{nil, CodeNameNotAllowed, FaultInvalid},
	{nil, CodeBadArguments, FaultInvalid},
	{nil, CodeNotImplemented, FaultInvalid},
	{nil, CodeParamNotSupported, FaultInvalid},
	{nil, 5, FaultRefused},
	{nil, 4, FaultTransient},
}

// Classify says what err means when it holds a server's reply (an *Error);
// anything else (a broken connection, a timeout) is FaultTransient.
func Classify(err error) Fault {
	var ge *Error
	if !errors.As(err, &ge) {
		return FaultTransient
	}
	text, code := ge.Reply.Text(), ge.Reply.Code
	for _, r := range faultRules {
		if r.code != 0 && r.code != code && r.code != code/100 {
			continue
		}
		if r.words == nil || containsAny(text, r.words) {
			return r.fault
		}
	}
	return FaultTransient
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// Said is what e, a server's refusal, says in one line for users: its
// code and its words, without the lines only programs read. Of a GCT-style
// reply (GlobusError: v=1 c=CLASS, GridFTP-Errno, GridFTP-Reason,
// GridFTP-Error-String, End.) the reason and the error string are kept,
// or the class when nothing else is said.
func (e *Error) Said() string {
	var words []string
	class := ""
	for _, l := range e.Reply.Lines {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "GlobusError:"):
			head, text, _ := strings.Cut(strings.TrimPrefix(l, "GlobusError:"), ": ")
			if _, c, ok := strings.Cut(head, "c="); ok {
				class = strings.Fields(c)[0]
			}
			if text != "" {
				words = append(words, text)
			}
		case strings.HasPrefix(l, "GridFTP-Errno:"), l == "End.", l == "":
		default:
			for _, p := range []string{"GridFTP-Reason:", "GridFTP-Error-String:"} {
				l = strings.TrimSpace(strings.TrimPrefix(l, p))
			}
			words = append(words, l)
		}
	}
	if len(words) == 0 && class != "" {
		words = []string{class}
	}
	return strings.TrimSpace(fmt.Sprintf("%d %s", e.Reply.Code, strings.Join(words, ": ")))
}

// Told is err's text for users, with any server's reply in it as Said
// words it.
func Told(err error) string {
	full := err.Error()
	if ge, ok := errors.AsType[*Error](err); ok {
		return strings.Replace(full, ge.Error(), ge.Said(), 1)
	}
	return full
}
