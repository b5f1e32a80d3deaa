// Package passwd reads and edits the password file of ferry's endpoint
// server (ferry gridftp) for password authentication.
//
// The file holds one "user:hash" entry a line, where hash is a bcrypt hash
// ("$2a$12$..."). Lines that are blank or whose first non-blank character is
// '#' are ignored; Set and Remove keep them. The file must not be
// world-writable. Set and Remove rewrite it atomically (a temporary file in
// the same directory, then rename) with mode 0600; they do not lock it, so
// two concurrent edits can lose one of them.
package passwd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
)

// defaultCost is the bcrypt cost Set uses when given 0.
const defaultCost = 12

// maxPassword is the longest password bcrypt takes, in bytes.
const maxPassword = 72

// maxUser is the longest user name, in bytes.
const maxUser = 256

// maxFile is the largest password file Load reads.
const maxFile = 64 << 20

var (
	// ErrNoUser is wrapped by Remove's error for a user the file lacks.
	ErrNoUser = errors.New("no such user")
	// ErrInvalidUser is wrapped by the error for a user name that cannot be
	// stored in the file.
	ErrInvalidUser = errors.New("invalid user name")
)

// SyntaxError is a malformed line of a password file.
type SyntaxError struct {
	Path string
	Line int // 1-based
	Msg  string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("passwd: %s:%d: %s", e.Path, e.Line, e.Msg)
}

// File is a loaded password file. It is safe for concurrent use.
type File struct {
	users map[string][]byte // user → bcrypt hash
	dummy []byte            // compared against for unknown users
}

// line is one line of a password file as read, with its entry if it has one.
type line struct {
	text string
	user string // "" for blank lines and comments
	hash []byte
}

// Load reads the password file at path. It refuses a file that is
// world-writable or not a regular file, and reports malformed lines as
// *SyntaxError. It computes one bcrypt hash (at the highest cost found in
// the file) to compare unknown users against.
func Load(path string) (*File, error) {
	lines, err := read(path)
	if err != nil {
		return nil, err
	}
	f := &File{users: make(map[string][]byte)}
	cost := bcrypt.MinCost // no users: nothing to hide
	for _, l := range lines {
		if l.user == "" {
			continue
		}
		f.users[l.user] = l.hash
		if c, _ := bcrypt.Cost(l.hash); c > cost {
			cost = c
		}
	}
	// A hash of the highest cost in the file, so that checking an unknown
	// user takes as long as checking a known one.
	f.dummy, err = bcrypt.GenerateFromPassword([]byte("ferry: no such user"), cost)
	if err != nil {
		return nil, fmt.Errorf("passwd: %w", err)
	}
	return f, nil
}

// Check reports whether password is user's password. For an unknown user it
// still runs a bcrypt comparison, so that its time does not tell whether the
// user exists.
func (f *File) Check(user, password string) bool {
	hash, ok := f.users[user]
	if !ok || password == "" || len(password) > maxPassword {
		// bcrypt ignores bytes past the 72nd: refuse rather than accept a
		// password that only shares its first 72 bytes.
		bcrypt.CompareHashAndPassword(f.dummy, []byte(password))
		return false
	}
	return bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil
}

// Users returns the users of the file, sorted.
func (f *File) Users() []string {
	users := make([]string, 0, len(f.users))
	for u := range f.users {
		users = append(users, u)
	}
	slices.Sort(users)
	return users
}

// ValidateUser reports whether user can be stored in a password file: not
// empty, at most 256 bytes of UTF-8, no ':', no whitespace, no control or
// other invisible characters, not starting with '#'.
func ValidateUser(user string) error {
	if why := userProblem(user); why != "" {
		return fmt.Errorf("passwd: %w %q: %s", ErrInvalidUser, user, why)
	}
	return nil
}

// userProblem says what is wrong with user, or "".
func userProblem(user string) string {
	switch {
	case user == "":
		return "empty"
	case len(user) > maxUser:
		return "longer than 256 bytes"
	case !utf8.ValidString(user):
		return "not UTF-8"
	case user[0] == '#':
		return "starts with '#'"
	}
	for _, r := range user {
		switch {
		case r == ':':
			return "contains ':'"
		case unicode.IsSpace(r):
			return "contains whitespace"
		case unicode.IsControl(r):
			return "contains a control character"
		case !unicode.IsPrint(r):
			return "contains an invisible character"
		}
	}
	return ""
}

// hashPassword checks password's length and returns its bcrypt hash at cost (0
// means defaultCost).
func hashPassword(password string, cost int) ([]byte, error) {
	switch {
	case password == "":
		return nil, errors.New("passwd: empty password")
	case len(password) > maxPassword:
		return nil, fmt.Errorf("passwd: password longer than %d bytes", maxPassword)
	}
	if cost == 0 {
		cost = defaultCost
	}
	if cost < bcrypt.MinCost || cost > bcrypt.MaxCost {
		return nil, fmt.Errorf("passwd: bcrypt cost %d outside %d..%d", cost, bcrypt.MinCost, bcrypt.MaxCost)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		return nil, fmt.Errorf("passwd: %w", err)
	}
	return hash, nil
}

// Set gives user the password, adding the user or replacing the entry, and
// rewrites the file at path atomically with mode 0600 (creating it if
// needed). cost is the bcrypt cost; 0 means 12.
func Set(path, user, password string, cost int) error {
	if err := ValidateUser(user); err != nil {
		return err
	}
	hash, err := hashPassword(password, cost)
	if err != nil {
		return err
	}
	lines, err := read(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	entry := line{text: user + ":" + string(hash), user: user, hash: hash}
	if i := slices.IndexFunc(lines, func(l line) bool { return l.user == user }); i >= 0 {
		lines[i] = entry
	} else {
		lines = append(lines, entry)
	}
	return write(path, lines)
}

// Remove deletes user's entry from the file at path, rewriting it
// atomically with mode 0600. A user the file lacks is an error wrapping
// ErrNoUser.
func Remove(path, user string) error {
	lines, err := read(path)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(lines, func(l line) bool { return l.user == user })
	if i < 0 {
		return fmt.Errorf("passwd: %s: %q: %w", path, user, ErrNoUser)
	}
	return write(path, slices.Delete(lines, i, i+1))
}

// read reads and parses the file at path.
func read(path string) ([]line, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("passwd: %w", err)
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nil, fmt.Errorf("passwd: %w", err)
	}
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("passwd: %s: not a regular file", path)
	case fi.Mode().Perm()&0o002 != 0:
		return nil, fmt.Errorf("passwd: %s: refusing a world-writable password file (mode %v; chmod o-w)", path, fi.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(file, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("passwd: %w", err)
	}
	if len(data) > maxFile {
		return nil, fmt.Errorf("passwd: %s: larger than %d bytes", path, maxFile)
	}
	return parse(path, data)
}

func parse(path string, data []byte) ([]line, error) {
	var lines []line
	seen := make(map[string]int) // user → line number
	for n, text := range bytes.Split(data, []byte("\n")) {
		num := n + 1
		t := strings.TrimSpace(string(text))
		if t == "" || t[0] == '#' {
			lines = append(lines, line{text: string(text)})
			continue
		}
		fail := func(format string, args ...any) error {
			return &SyntaxError{Path: path, Line: num, Msg: fmt.Sprintf(format, args...)}
		}
		user, hash, ok := strings.Cut(t, ":")
		if !ok {
			return nil, fail("want user:hash, found no ':'")
		}
		if why := userProblem(user); why != "" {
			return nil, fail("%v %q: %s", ErrInvalidUser, user, why)
		}
		if first, dup := seen[user]; dup {
			return nil, fail("user %q already on line %d", user, first)
		}
		if err := validHash(hash); err != nil {
			return nil, fail("user %q: %v", user, err)
		}
		seen[user] = num
		lines = append(lines, line{text: t, user: user, hash: []byte(hash)})
	}
	// bytes.Split leaves an empty last element for a final newline.
	if len(lines) > 0 && lines[len(lines)-1].user == "" && lines[len(lines)-1].text == "" {
		lines = lines[:len(lines)-1]
	}
	return lines, nil
}

func validHash(hash string) error {
	if hash == "" {
		return errors.New("empty hash")
	}
	if len(hash) != 60 || !strings.HasPrefix(hash, "$2") {
		return errors.New("not a bcrypt hash")
	}
	if _, err := bcrypt.Cost([]byte(hash)); err != nil {
		return fmt.Errorf("not a bcrypt hash: %v", err)
	}
	return nil
}

// write replaces the file at path with lines: a temporary file in the same
// directory, synced, then renamed over it.
func write(path string, lines []line) (err error) {
	var buf bytes.Buffer
	for _, l := range lines {
		buf.WriteString(l.text)
		buf.WriteByte('\n')
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return fmt.Errorf("passwd: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("passwd: %w", err)
	}
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("passwd: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("passwd: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("passwd: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("passwd: %w", err)
	}
	// Make the rename itself durable; not every system can sync a directory.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
