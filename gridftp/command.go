package gridftp

import (
	"errors"
	"strings"
)

// Command is one control-channel command: an upper-case verb and its
// argument, with spaces inside the argument kept (file names may hold them).
type Command struct {
	Verb string
	Arg  string
}

func (c Command) String() string {
	if c.Arg == "" {
		return c.Verb
	}
	return c.Verb + " " + c.Arg
}

// ErrBadCommand reports a line that holds no verb.
var ErrBadCommand = errors.New("gridftp: malformed command")

// ParseCommand splits a control line into verb and argument. Leading Telnet
// IAC sequences (sent before ABOR by some clients) are dropped. Verbs are
// letters only, at most 4 + 4 characters ("SITE" is one verb; its
// subcommand stays in Arg).
func ParseCommand(line string) (Command, error) {
	line = stripTelnet(strings.TrimRight(line, "\r\n"))
	verb, arg, _ := strings.Cut(line, " ")
	if verb == "" || len(verb) > 8 {
		return Command{}, ErrBadCommand
	}
	for i := 0; i < len(verb); i++ {
		c := verb[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return Command{}, ErrBadCommand
		}
	}
	if strings.ContainsAny(arg, "\x00\r\n") {
		return Command{}, ErrBadCommand
	}
	return Command{Verb: strings.ToUpper(verb), Arg: arg}, nil
}

// stripTelnet removes Telnet IAC commands (IAC IP, IAC DM, ...) from the
// start of a line.
func stripTelnet(s string) string {
	for len(s) >= 2 && s[0] == 0xff {
		s = s[2:]
	}
	for len(s) >= 1 && (s[0] == 0xf2 || s[0] == 0xff) {
		s = s[1:]
	}
	return s
}
