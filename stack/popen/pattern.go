package popen

import (
	"errors"
	"fmt"
	"strings"
)

// ParsePattern reads an operator's declaration of the arguments a program
// takes: "@NAME" for the built-in profile NAME (a program the whitelist
// names otherwise, e.g. "@tar" for /opt/bin/gtar), else words separated by
// spaces that the arguments must match in order: a literal word, {path}
// (a path of the served tree, confined to it as the profiles' operands
// are, not starting with "-"), {int} (a number) or {any} (any argument,
// unchecked: only for a program that checks its own), each followed by ?
// (at most once) or * (any number of times). "" takes no arguments.
//
//	-c {int}? {path}*
func ParsePattern(s string) (Policy, error) {
	if name, ok := strings.CutPrefix(s, "@"); ok {
		if p := profiles[name]; p != nil {
			return p, nil
		}
		return nil, fmt.Errorf("no built-in profile %q", name)
	}
	var p pattern
	for _, w := range strings.Fields(s) {
		var tok token
		switch {
		case strings.HasSuffix(w, "?"):
			tok.max, w = 1, w[:len(w)-1]
		case strings.HasSuffix(w, "*"):
			tok.max, w = -1, w[:len(w)-1]
		default:
			tok.min, tok.max = 1, 1
		}
		switch {
		case w == "":
			return nil, fmt.Errorf("pattern %q: ? or * after nothing", s)
		case w == "{path}" || w == "{int}" || w == "{any}":
			tok.kind = w
		case strings.ContainsAny(w, "{}"):
			return nil, fmt.Errorf("pattern %q: %s: only {path}, {int} and {any}", s, w)
		default:
			tok.literal = w
		}
		p = append(p, tok)
	}
	return p, nil
}

// pattern is an operator's declaration: the arguments match its tokens
// in order.
type pattern []token

// token matches one argument min to max times (max -1: no limit).
type token struct {
	literal  string // else kind
	kind     string // "{path}", "{int}" or "{any}"
	min, max int
}

// errNoMatch is why arguments do not match a pattern.
var errNoMatch = errors.New("the arguments do not match what the server allows for this program")

func (p pattern) approve(args []string, t *tree) (command, error) {
	out, err := p.match(args, t)
	return command{args: out}, err
}

// match matches args against p from its first token, trying each count
// of it from the most, and returns the arguments as the program gets
// them. When none matches, the error says why: a refused path or number
// rather than errNoMatch where there was one, a later token's before
// this one's (an argument this token refuses may be meant for the next).
func (p pattern) match(args []string, t *tree) ([]string, error) {
	if len(p) == 0 {
		if len(args) > 0 {
			return nil, errNoMatch
		}
		return []string{}, nil
	}
	tok, most := p[0], len(args)
	if tok.max >= 0 {
		most = min(most, tok.max)
	}
	why := errNoMatch
	note := func(err error) {
		if why == errNoMatch && err != errNoMatch {
			why = err
		}
	}
	var head []string
	var own error
	for n := 0; n < most; n++ {
		a, err := tok.one(args[n], t)
		if err != nil {
			own, most = err, n
			break
		}
		head = append(head, a)
	}
	for n := most; n >= tok.min; n-- {
		rest, err := p[1:].match(args[n:], t)
		if err == nil {
			return append(head[:n:n], rest...), nil
		}
		note(err)
	}
	if own != nil {
		note(own)
	}
	return nil, why
}

// one matches one argument and returns it as the program gets it.
func (tok token) one(a string, t *tree) (string, error) {
	switch tok.kind {
	case "{path}":
		if strings.HasPrefix(a, "-") {
			return "", fmt.Errorf("path '%s': not an option", a)
		}
		return t.operand("/", a)
	case "{int}":
		return a, number(a)
	case "{any}":
		return a, nil
	}
	if a != tok.literal {
		return "", errNoMatch
	}
	return a, nil
}
