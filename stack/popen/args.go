package popen

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Policy approves the arguments a client gives a program and returns them
// as the program gets them: every option one the policy knows to be safe,
// every path operand confined to the session's tree. A program whose
// policy is nil takes no arguments.
type Policy interface {
	approve(args []string, t *tree) (command, error)
}

// command is a program's approved arguments and, for a program that
// unpacks what it is fed, the check its input passes on its way (nil:
// none).
type command struct {
	args  []string
	input inputCheck
}

// profiles are the built-in policies, by the base name of the program.
var profiles = builtins()

func builtins() map[string]Policy {
	p := map[string]Policy{"tar": tarPolicy{}, "cat": catPolicy{}}
	for _, sum := range []string{"md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum"} {
		p[sum] = sumPolicy{}
	}
	for _, c := range []string{"gzip", "xz", "bzip2", "zstd", "gunzip", "unxz", "bunzip2", "unzstd"} {
		p[c] = compressPolicy{}
	}
	for _, c := range []string{"zcat", "xzcat", "bzcat", "zstdcat"} {
		p[c] = compressPolicy{toStdout: true}
	}
	return p
}

// Profile is the built-in policy of the program named name (its base
// name: "tar", "md5sum", "gzip" ...), nil when there is none.
func Profile(name string) Policy { return profiles[path.Base(name)] }

// errNoArgs refuses arguments to a program that takes none.
var errNoArgs = errors.New("the program takes no arguments from clients")

// approve applies p, nil taking no arguments.
func approve(p Policy, args []string, t *tree) (command, error) {
	if p == nil {
		if len(args) > 0 {
			return command{}, errNoArgs
		}
		return command{}, nil
	}
	return p.approve(args, t)
}

// option is one option of a program that a policy accepts: its long name
// ("" if none), its short letter (0 if none) and what its value must be
// (nil: it takes none).
type option struct {
	long  string
	short byte
	value func(v string) error
}

// options are the options a policy accepts.
type options []option

func (os options) byLong(name string) (option, bool) {
	for _, o := range os {
		if o.long != "" && o.long == name {
			return o, true
		}
	}
	return option{}, false
}

func (os options) byShort(c byte) (option, bool) {
	for _, o := range os {
		if o.short != 0 && o.short == c {
			return o, true
		}
	}
	return option{}, false
}

// parsed is an option as the command line gave it, with its value.
type parsed struct {
	option
	val string
}

// name is the option's name: its long name, else its letter.
func (o option) name() string {
	if o.long == "" {
		return "-" + string(o.short)
	}
	return "--" + o.long
}

// arg is the option as the program gets it: by its name, its value
// joined to it ("--file=-", "-T4"), never a separate word.
func (p parsed) arg() string {
	switch {
	case p.value == nil:
		return p.name()
	case p.long == "":
		return p.name() + p.val
	}
	return p.name() + "=" + p.val
}

// cmdline walks a command line the way getopt_long does in order (GNU
// tar's ARGP_IN_ORDER): "--" ends the options; "--name=v" or "--name v"
// is a long option, named in full (no abbreviations: one that names a
// dangerous option by a prefix is as unknown as any other); "-abc" is
// letters, the first that takes a value taking the rest of the word or
// the next argument; anything else, and all after "--", are operands.
// opt and operand (told whether it came after "--") see each in turn.
func (os options) cmdline(args []string, opt func(parsed) error, operand func(string, bool) error) error {
	dashes := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func(name string) (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("option '%s' needs a value", name)
			}
			i++
			return args[i], nil
		}
		var ps []parsed
		var err error
		switch {
		case dashes || a == "-" || !strings.HasPrefix(a, "-"):
			err = operand(a, dashes)
		case a == "--":
			dashes = true
		case strings.HasPrefix(a, "--"):
			ps, err = os.long(a[2:], next)
		default:
			ps, err = os.short(a[1:], next)
		}
		for _, p := range ps {
			if err == nil {
				err = check(p)
			}
			if err == nil {
				err = opt(p)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// long reads a long option, "name" or "name=value", its value from next
// when it takes one and has none.
func (os options) long(a string, next func(string) (string, error)) ([]parsed, error) {
	name, val, hasVal := strings.Cut(a, "=")
	o, ok := os.byLong(name)
	switch {
	case !ok:
		return nil, fmt.Errorf("option '--%s' not allowed", name)
	case o.value == nil && hasVal:
		return nil, fmt.Errorf("option '--%s' takes no value", name)
	case o.value != nil && !hasVal:
		v, err := next("--" + name)
		if err != nil {
			return nil, err
		}
		val = v
	}
	return []parsed{{option: o, val: val}}, nil
}

// short reads a word of letters, the first that takes a value taking the
// rest of the word or, if none is left, next.
func (os options) short(letters string, next func(string) (string, error)) ([]parsed, error) {
	var ps []parsed
	for j := 0; j < len(letters); j++ {
		o, ok := os.byShort(letters[j])
		if !ok {
			return nil, fmt.Errorf("option '-%c' not allowed", letters[j])
		}
		p := parsed{option: o}
		if o.value != nil {
			p.val = letters[j+1:]
			if p.val == "" {
				v, err := next("-" + string(letters[j]))
				if err != nil {
					return nil, err
				}
				p.val = v
			}
			return append(ps, p), nil
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// check applies an option's rule to its value.
func check(p parsed) error {
	if p.value == nil {
		return nil
	}
	if err := p.value(p.val); err != nil {
		return fmt.Errorf("option '%s': %w", p.name(), err)
	}
	return nil
}

// Rules for option values.
var (
	anyValue = func(string) error { return nil }
	number   = func(v string) error {
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			return fmt.Errorf("'%s' is not a number", v)
		}
		return nil
	}
	stdio = func(v string) error {
		if v != "-" {
			return errors.New("the archive is the transfer: only '-'")
		}
		return nil
	}
	// dirValue is -C's: a path, which the policy itself confines.
	dirValue = func(string) error { return nil }
)

// oneOf allows the values listed.
func oneOf(vs ...string) func(string) error {
	return func(v string) error {
		for _, w := range vs {
			if v == w {
				return nil
			}
		}
		return fmt.Errorf("'%s' is not one of %s", v, strings.Join(vs, ", "))
	}
}

// tarPolicy is GNU tar's: create (c), extract (x) or list (t) with the
// archive on the transfer (-f -), -C DIR, the built-in compressions and a
// few options about what is packed or how it is unpacked. Members are
// paths relative to the last -C (or the served tree's root), confined to
// the tree; -C is too, and becomes its place on disk.
type tarPolicy struct{}

var tarOptions = options{
	{long: "create", short: 'c'},
	{long: "extract", short: 'x'},
	{long: "get"},
	{long: "list", short: 't'},
	{long: "file", short: 'f', value: stdio},
	{long: "directory", short: 'C', value: dirValue},
	{long: "verbose", short: 'v'},
	{long: "gzip", short: 'z'},
	{long: "gunzip"},
	{long: "ungzip"},
	{long: "bzip2", short: 'j'},
	{long: "xz", short: 'J'},
	{long: "zstd"},
	{long: "preserve-permissions", short: 'p'},
	{long: "same-permissions"},
	{long: "no-same-permissions"},
	{long: "no-same-owner"},
	{long: "numeric-owner"},
	{long: "keep-old-files", short: 'k'},
	{long: "skip-old-files"},
	{long: "touch", short: 'm'},
	{long: "sparse", short: 'S'},
	{long: "recursion"},
	{long: "no-recursion"},
	{long: "one-file-system"},
	{long: "exclude", value: anyValue},
	{long: "exclude-vcs"},
	{long: "wildcards"},
	{long: "no-wildcards"},
	{long: "strip-components", value: number},
	{long: "format", short: 'H', value: oneOf("gnu", "oldgnu", "pax", "posix", "ustar", "v7")},
	{long: "blocking-factor", short: 'b', value: number},
	{long: "totals"},
}

// tarModes are the options that choose what tar does.
var tarModes = map[string]bool{"create": true, "extract": true, "get": true, "list": true}

func (tarPolicy) approve(args []string, t *tree) (command, error) {
	args, err := tarOldStyle(args)
	if err != nil {
		return command{}, err
	}
	var out []string
	mode, dir, dashes, compressed := "", "/", false, ""
	err = tarOptions.cmdline(args, func(p parsed) error {
		switch {
		case tarModes[p.long]:
			if mode != "" {
				return errors.New("tar takes one of -c, -x and -t")
			}
			mode = p.long
		case tarCompressions[p.long] != "":
			compressed = tarCompressions[p.long]
		case p.long == "directory":
			name, err := t.resolve(dir, p.val)
			if err != nil {
				return err
			}
			dir, p.val = name, t.local(name)
		}
		out = append(out, p.arg())
		return nil
	}, func(a string, afterDashes bool) error {
		if path.IsAbs(a) {
			return fmt.Errorf("member '%s': name members relative to -C", a)
		}
		if _, err := t.resolve(dir, a); err != nil {
			return err
		}
		if afterDashes && !dashes {
			out, dashes = append(out, "--"), true
		}
		out = append(out, a)
		return nil
	})
	switch {
	case err != nil:
		return command{}, err
	case mode == "":
		return command{}, errors.New("tar needs one of -c, -x and -t")
	case mode == "extract" || mode == "get":
		check, err := tarCheck(compressed)
		return command{args: out, input: check}, err
	}
	return command{args: out}, nil
}

// tarCompressions are tar's compression options, by the name of the
// compression.
var tarCompressions = map[string]string{
	"gzip": "gzip", "gunzip": "gzip", "ungzip": "gzip",
	"bzip2": "bzip2", "xz": "xz", "zstd": "zstd",
}

// tarOldStyle turns tar's old-style first word ("cvf -", "xzfC - dir")
// into options, each letter's value taken from the words after it in
// order, as tar does.
func tarOldStyle(args []string) ([]string, error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return args, nil
	}
	var out []string
	rest := args[1:]
	for i := 0; i < len(args[0]); i++ {
		c := args[0][i]
		o, ok := tarOptions.byShort(c)
		if !ok {
			return nil, fmt.Errorf("option '%c' not allowed", c)
		}
		out = append(out, "-"+string(c))
		if o.value != nil {
			if len(rest) == 0 {
				return nil, fmt.Errorf("option '%c' needs a value", c)
			}
			out, rest = append(out, rest[0]), rest[1:]
		}
	}
	return append(out, rest...), nil
}

// files approves a command line of options, then path operands (after
// "--" too) confined to the tree, relative to where the program runs.
// The program gets the options, "--" and the operands, "-" (standard
// input) as it is.
func files(opts options, args []string, t *tree) (flags, operands []string, err error) {
	err = opts.cmdline(args, func(p parsed) error {
		flags = append(flags, p.arg())
		return nil
	}, func(a string, _ bool) error {
		if a != "-" {
			var err error
			if a, err = t.operand("/", a); err != nil {
				return err
			}
		}
		operands = append(operands, a)
		return nil
	})
	return flags, operands, err
}

// joined is flags, then "--" and the operands if any.
func joined(flags, operands []string) []string {
	if len(operands) == 0 {
		return flags
	}
	return append(append(flags, "--"), operands...)
}

// sumPolicy is md5sum's and its kin's (sha*sum, b2sum): sums of files
// of the tree, or of the standard input; not --check, which reads the
// names to open from a file.
type sumPolicy struct{}

var sumOptions = options{
	{long: "binary", short: 'b'},
	{long: "text", short: 't'},
	{long: "tag"},
	{long: "zero", short: 'z'},
}

func (sumPolicy) approve(args []string, t *tree) (command, error) {
	flags, operands, err := files(sumOptions, args, t)
	return command{args: joined(flags, operands)}, err
}

// catPolicy is cat's: files of the tree, or the standard input.
type catPolicy struct{}

func (catPolicy) approve(args []string, t *tree) (command, error) {
	flags, operands, err := files(nil, args, t)
	return command{args: joined(flags, operands)}, err
}

// compressPolicy is gzip's, xz's, bzip2's and zstd's (and their
// decompressing and cat names): levels, -d, -c, -k, -q; files of the tree
// only with -c (or a cat name: toStdout), so that a program never writes
// files of its own, and never -o, --rm or a list of names read from a
// file.
type compressPolicy struct{ toStdout bool }

var compressOptions = options{
	{long: "stdout", short: 'c'},
	{long: "to-stdout"},
	{long: "decompress", short: 'd'},
	{long: "uncompress"},
	{long: "keep", short: 'k'},
	{long: "quiet", short: 'q'},
	{long: "fast"},
	{long: "best"},
	{short: '1'}, {short: '2'}, {short: '3'}, {short: '4'}, {short: '5'},
	{short: '6'}, {short: '7'}, {short: '8'}, {short: '9'},
}

func (c compressPolicy) approve(args []string, t *tree) (command, error) {
	flags, operands, err := files(compressOptions, args, t)
	if err != nil {
		return command{}, err
	}
	if len(operands) > 0 && !c.toStdout && !slices.ContainsFunc(flags, func(f string) bool { return f == "--stdout" || f == "--to-stdout" }) {
		return command{}, errors.New("name files only with -c: the program writes the transfer, not files")
	}
	return command{args: joined(flags, operands)}, nil
}
