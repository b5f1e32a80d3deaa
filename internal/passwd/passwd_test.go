package passwd_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"ferry/internal/passwd"
)

const cost = bcrypt.MinCost // fast tests

func hash(t *testing.T, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func writeFile(t *testing.T, content string, mode fs.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

func load(t *testing.T, path string) *passwd.File {
	t.Helper()
	f, err := passwd.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestLoadCheck(t *testing.T) {
	long := strings.Repeat("x", 72) // bcrypt's longest password
	content := "# ferry password file\n" +
		"\n" +
		"alice:" + hash(t, "wonderland") + "\n" +
		"   # indented comment\n" +
		"  bob:" + hash(t, "builder") + "  \r\n" + // surrounding blanks, CRLF
		"émile:" + hash(t, "zola") + "\n" +
		"long:" + hash(t, long) + "\n" +
		"empty:" + hash(t, "") // no final newline
	f := load(t, writeFile(t, content, 0o600))

	if got, want := f.Users(), []string{"alice", "bob", "empty", "long", "émile"}; !slices.Equal(got, want) {
		t.Errorf("Users = %q, want %q", got, want)
	}
	tests := []struct {
		user, password string
		want           bool
	}{
		{"alice", "wonderland", true},
		{"bob", "builder", true},
		{"émile", "zola", true},
		{"long", long, true},
		{"alice", "Wonderland", false},
		{"alice", "wonderland ", false},
		{"alice", "", false},
		{"Alice", "wonderland", false},
		{"bob", "wonderland", false},
		{"carol", "wonderland", false},
		{"", "", false},
		{"empty", "", false},           // an empty password never checks
		{"long", long + "tail", false}, // bcrypt would ignore the tail
		{"# ferry password file", "", false},
	}
	for _, tt := range tests {
		if got := f.Check(tt.user, tt.password); got != tt.want {
			t.Errorf("Check(%q, %q) = %v, want %v", tt.user, tt.password, got, tt.want)
		}
	}
}

func TestLoadEmpty(t *testing.T) {
	for _, content := range []string{"", "\n\n", "# nobody\n"} {
		f := load(t, writeFile(t, content, 0o600))
		if len(f.Users()) != 0 || f.Check("root", "root") {
			t.Errorf("%q: users %q", content, f.Users())
		}
	}
}

func TestLoadErrors(t *testing.T) {
	good := hash(t, "pw")
	tests := []struct {
		name    string
		content string
		line    int
		msg     string
	}{
		{"NoColon", "# c\nalice " + good + "\n", 2, "no ':'"},
		{"EmptyUser", ":" + good + "\n", 1, "empty"},
		{"SpaceInUser", "al ice:" + good + "\n", 1, "whitespace"},
		{"TabInUser", "al\tice:" + good + "\n", 1, "whitespace"},
		{"ControlInUser", "al\x01ice:" + good + "\n", 1, "control"},
		{"InvisibleInUser", "al\u200bice:" + good + "\n", 1, "invisible"},
		{"NotUTF8", "al\xffice:" + good + "\n", 1, "UTF-8"},
		{"EmptyHash", "\n\nalice:\n", 3, "empty hash"},
		{"PlainPassword", "alice:secret\n", 1, "not a bcrypt hash"},
		{"BadCost", "alice:$2a$99" + good[6:] + "\n", 1, "not a bcrypt hash"},
		{"Truncated", "alice:" + good[:59] + "\n", 1, "not a bcrypt hash"},
		{"ExtraField", "alice:" + good + ":x\n", 1, "not a bcrypt hash"},
		{"Duplicate", "alice:" + good + "\nbob:" + good + "\nalice:" + good + "\n", 3, "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := passwd.Load(writeFile(t, tt.content, 0o600))
			se, ok := errors.AsType[*passwd.SyntaxError](err)
			if !ok {
				t.Fatalf("Load = %v, want a *SyntaxError", err)
			}
			if se.Line != tt.line || !strings.Contains(se.Msg, tt.msg) {
				t.Errorf("Load = %v, want line %d and %q", err, tt.line, tt.msg)
			}
			if !strings.Contains(err.Error(), ":"+string(rune('0'+tt.line))+":") {
				t.Errorf("message %q lacks the line number", err)
			}
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	content := "alice:" + hash(t, "pw") + "\n"
	tests := []struct {
		name string
		path func(t *testing.T) string
		ok   bool
	}{
		{"Private", func(t *testing.T) string { return writeFile(t, content, 0o600) }, true},
		{"GroupWritable", func(t *testing.T) string { return writeFile(t, content, 0o660) }, true},
		{"WorldReadable", func(t *testing.T) string { return writeFile(t, content, 0o644) }, true},
		{"WorldWritable", func(t *testing.T) string { return writeFile(t, content, 0o666) }, false},
		{"WorldWritableOnly", func(t *testing.T) string { return writeFile(t, content, 0o602) }, false},
		{"Missing", func(t *testing.T) string { return filepath.Join(t.TempDir(), "missing") }, false},
		{"Directory", func(t *testing.T) string { return t.TempDir() }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := passwd.Load(tt.path(t))
			if (err == nil) != tt.ok {
				t.Errorf("Load = %v, want ok %v", err, tt.ok)
			}
		})
	}
	_, err := passwd.Load(filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestValidateUser(t *testing.T) {
	tests := []struct {
		user string
		ok   bool
	}{
		{"alice", true},
		{"alice.smith@example.org", true},
		{"a-b_c+d", true},
		{"émile", true},
		{"用户", true},
		{"a#b", true},
		{"", false},
		{"a:b", false},
		{":", false},
		{"a b", false},
		{" a", false},
		{"a\t", false},
		{"a\nb", false},
		{"a\u00a0b", false}, // no-break space
		{"a\u3000b", false}, // ideographic space
		{"a\x00b", false},
		{"a\x7fb", false},
		{"a\u0085b", false}, // C1 control
		{"a\u200bb", false}, // zero-width space
		{"a\xffb", false},
		{"#alice", false},
		{strings.Repeat("a", 256), true},
		{strings.Repeat("a", 257), false},
	}
	for _, tt := range tests {
		err := passwd.ValidateUser(tt.user)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateUser(%q) = %v, want ok %v", tt.user, err, tt.ok)
		}
		if err != nil && !errors.Is(err, passwd.ErrInvalidUser) {
			t.Errorf("ValidateUser(%q) = %v, want ErrInvalidUser", tt.user, err)
		}
	}
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// onlyFile fails if dir holds anything but name (a temporary file left over).
func onlyFile(t *testing.T, dir, name string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != name {
			t.Errorf("left in the directory: %s", e.Name())
		}
	}
}

func TestSet(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "passwd")

	// Creates the file.
	if err := passwd.Set(path, "alice", "one", cost); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, path); m != 0o600 {
		t.Errorf("mode = %v, want 0600", m)
	}
	// Adds a user, keeping comments.
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, append([]byte("# admins\n\n"), data...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := passwd.Set(path, "bob", "two", cost+1); err != nil {
		t.Fatal(err)
	}
	// Replaces a user.
	if err := passwd.Set(path, "alice", "three", cost); err != nil {
		t.Fatal(err)
	}
	f := load(t, path)
	checks := []struct {
		user, password string
		want           bool
	}{
		{"alice", "three", true},
		{"alice", "one", false},
		{"bob", "two", true},
	}
	for _, c := range checks {
		if got := f.Check(c.user, c.password); got != c.want {
			t.Errorf("Check(%q, %q) = %v, want %v", c.user, c.password, got, c.want)
		}
	}
	data, _ = os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 4 || lines[0] != "# admins" || lines[1] != "" ||
		!strings.HasPrefix(lines[2], "alice:$2a$04$") || !strings.HasPrefix(lines[3], "bob:$2a$05$") {
		t.Errorf("file =\n%s", data)
	}
	if m := mode(t, path); m != 0o600 {
		t.Errorf("mode after rewrite = %v, want 0600", m)
	}
	onlyFile(t, dir, "passwd")
}

func TestSetErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "passwd")
	tests := []struct {
		name, user, password string
		cost                 int
	}{
		{"EmptyUser", "", "pw", cost},
		{"ColonUser", "a:b", "pw", cost},
		{"SpaceUser", "a b", "pw", cost},
		{"ControlUser", "a\x1bb", "pw", cost},
		{"EmptyPassword", "alice", "", cost},
		{"LongPassword", "alice", strings.Repeat("x", 72+1), cost},
		{"LowCost", "alice", "pw", bcrypt.MinCost - 1},
		{"HighCost", "alice", "pw", bcrypt.MaxCost + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := passwd.Set(path, tt.user, tt.password, tt.cost); err == nil {
				t.Errorf("Set succeeded")
			}
			if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a failed Set created the file")
			}
		})
	}
	t.Run("WorldWritable", func(t *testing.T) {
		path := writeFile(t, "", 0o666)
		if err := passwd.Set(path, "alice", "pw", cost); err == nil {
			t.Errorf("Set on a world-writable file succeeded")
		}
	})
	t.Run("Malformed", func(t *testing.T) {
		path := writeFile(t, "garbage\n", 0o600)
		err := passwd.Set(path, "alice", "pw", cost)
		if _, ok := errors.AsType[*passwd.SyntaxError](err); !ok {
			t.Errorf("Set on a malformed file = %v, want a *SyntaxError", err)
		}
		if data, _ := os.ReadFile(path); string(data) != "garbage\n" {
			t.Errorf("a failed Set changed the file: %q", data)
		}
	})
}

func TestRemove(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "passwd")
	content := "# keep me\n" +
		"alice:" + hash(t, "a") + "\n" +
		"bob:" + hash(t, "b") + "\n" +
		"carol:" + hash(t, "c") + "\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := passwd.Remove(path, "bob"); err != nil {
		t.Fatal(err)
	}
	f := load(t, path)
	if got := f.Users(); !slices.Equal(got, []string{"alice", "carol"}) {
		t.Errorf("Users = %q", got)
	}
	if f.Check("bob", "b") || !f.Check("alice", "a") || !f.Check("carol", "c") {
		t.Errorf("wrong entries after Remove")
	}
	if data, _ := os.ReadFile(path); !strings.HasPrefix(string(data), "# keep me\nalice:") {
		t.Errorf("file =\n%s", data)
	}
	if m := mode(t, path); m != 0o600 {
		t.Errorf("mode = %v, want 0600", m)
	}
	if err := passwd.Remove(path, "bob"); !errors.Is(err, passwd.ErrNoUser) {
		t.Errorf("Remove(bob) again = %v, want ErrNoUser", err)
	}
	if err := passwd.Remove(filepath.Join(dir, "missing"), "bob"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove in a missing file = %v, want fs.ErrNotExist", err)
	}
	onlyFile(t, dir, "passwd")
}
