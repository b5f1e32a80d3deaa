package popen

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testTree is a tree with pub/file.txt, the symlinks in (to pub),
// out (relative, to the root's parent) and abs (absolute, to /etc), in a
// directory of its own.
func testTree(t *testing.T) *tree {
	t.Helper()
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	if err := os.MkdirAll(filepath.Join(root, "pub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "pub", "file.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"in": "pub", "out": "..", "abs": "/etc"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	senv := sessionEnv(t, root, false)
	return &tree{ctx: context.Background(), fs: senv.FS, dir: root}
}

// TestProfiles: each built-in profile takes the safe options of its
// program, however they are spelled, hands the program one spelling of
// them, and confines every path to the tree.
func TestProfiles(t *testing.T) {
	tr := testTree(t)
	root := tr.dir
	for _, tt := range []struct {
		prog string
		args string // "#"-joined
		want string // "#"-joined, or "!" and the start of the refusal
	}{
		// tar: what globus-url-copy's users and the engine send.
		{"tar", "cf#-#dir", "--create#--file=-#dir"},
		{"tar", "cf#-#-C#/pub#./file.txt", "--create#--file=-#--directory=" + root + "/pub#./file.txt"},
		{"tar", "xf#-#-C#/pub", "--extract#--file=-#--directory=" + root + "/pub"},
		{"tar", "xf#-#-C#pub#file.txt", "--extract#--file=-#--directory=" + root + "/pub#file.txt"},
		{"tar", "tvf#-", "--list#--verbose#--file=-"},
		{"tar", "tzfC#-#pub", "--list#--gzip#--file=-#--directory=" + root + "/pub"},
		{"tar", "czf#-#pub", "--create#--gzip#--file=-#pub"},
		{"tar", "xzf#-", "!tar x unpacks plain archives only, not gzip"},
		{"tar", "--get#--zstd#-f#-", "!tar x unpacks plain archives only, not zstd"},
		{"tar", "-cvf#-#pub", "--create#--verbose#--file=-#pub"},
		{"tar", "-cvf-#pub", "--create#--verbose#--file=-#pub"},
		{"tar", "-cf#-#-Cpub#file.txt", "--create#--file=-#--directory=" + root + "/pub#file.txt"},
		{"tar", "--create#--file=-#--directory#in#file.txt", "--create#--file=-#--directory=" + root + "/in#file.txt"},
		{"tar", "cf#-#-C#pub#-C#/#pub", "--create#--file=-#--directory=" + root + "/pub#--directory=" + root + "#pub"},
		{"tar", "cf#-#--#-odd", "--create#--file=-#--#-odd"},
		{"tar", "cf#-#--#-C", "--create#--file=-#--#-C"},
		{"tar", "cf#-#--format=posix#--exclude=*.o#--strip-components=1#pub", "--create#--file=-#--format=posix#--exclude=*.o#--strip-components=1#pub"},
		{"tar", "cf#-#in", "--create#--file=-#in"},
		// tar: what runs programs, reads names from files, leaves the tree.
		{"tar", "cf#-#--checkpoint=1#--checkpoint-action=exec=id#pub", "!option '--checkpoint' not allowed"},
		{"tar", "cf#-#--checkpoint-action#exec=id#pub", "!option '--checkpoint-action' not allowed"},
		{"tar", "cf#-#--checkpoint-act=exec=id#pub", "!option '--checkpoint-act' not allowed"},
		{"tar", "cf#-#-I#id#pub", "!option '-I' not allowed"},
		{"tar", "cIf#id#-#pub", "!option 'I' not allowed"},
		{"tar", "-cIid#-f#-", "!option '-I' not allowed"},
		{"tar", "cf#-#--use-compress-program=id#pub", "!option '--use-compress-program' not allowed"},
		{"tar", "cf#-#--use-compress=id#pub", "!option '--use-compress' not allowed"},
		{"tar", "xf#-#--to-command=id", "!option '--to-command' not allowed"},
		{"tar", "cf#-#-F#id#pub", "!option '-F' not allowed"},
		{"tar", "cf#-#--info-script=id#pub", "!option '--info-script' not allowed"},
		{"tar", "cf#-#--new-volume-script=id#pub", "!option '--new-volume-script' not allowed"},
		{"tar", "cf#-#--rsh-command=id#pub", "!option '--rsh-command' not allowed"},
		{"tar", "cf#host:archive#pub", "!option '--file': the archive is the transfer"},
		{"tar", "cf#/dev/null#pub", "!option '--file': the archive is the transfer"},
		{"tar", "-c#--file=x.tar#pub", "!option '--file': the archive is the transfer"},
		{"tar", "cf#-#-T#pub/file.txt", "!option '-T' not allowed"},
		{"tar", "cf#-#-X#pub/file.txt#pub", "!option '-X' not allowed"},
		{"tar", "chf#-#pub", "!option 'h' not allowed"},
		{"tar", "xPf#-", "!option 'P' not allowed"},
		{"tar", "cf#-#--transform=s/a/b/#pub", "!option '--transform' not allowed"},
		{"tar", "cf#-#-g#snap#pub", "!option '-g' not allowed"},
		{"tar", "cf#-#--remove-files#pub", "!option '--remove-files' not allowed"},
		{"tar", "cf#-#/etc/passwd", "!member '/etc/passwd': name members relative to -C"},
		{"tar", "cf#-#../x", "!path '../x': no '..'"},
		{"tar", "cf#-#pub/../../x", "!path 'pub/../../x': no '..'"},
		{"tar", "cf#-#out/x", "!path 'out/x' leads out"},
		{"tar", "cf#-#abs/passwd", "!path 'abs/passwd' leads out"},
		{"tar", "cf#-#out", "!path 'out' is a symlink that leads out"},
		{"tar", "cf#-#-C#/etc#passwd", "--create#--file=-#--directory=" + root + "/etc#passwd"},
		{"tar", "cf#-#-C#out#x", "!path 'out' is a symlink that leads out"},
		{"tar", "cf#-#-C#..#x", "!path '..': no '..'"},
		{"tar", "cf#-#-C#pub#-C#..#x", "!path '..': no '..'"},
		{"tar", "cf#-#-C#in#-C#abs#passwd", "--create#--file=-#--directory=" + root + "/in#--directory=" + root + "/in/abs#passwd"},
		{"tar", "f#-#pub", "!tar needs one of -c, -x and -t"},
		{"tar", "cxf#-", "!tar takes one of -c, -x and -t"},
		{"tar", "cf", "!option 'f' needs a value"},
		{"tar", "-cf", "!option '-f' needs a value"},
		{"tar", "cf#-#--verbose=1", "!option '--verbose' takes no value"},
		{"tar", "cf#-#--strip-components=-1", "!option '--strip-components': '-1' is not a number"},
		{"tar", "cf#-#--format=weird", "!option '--format': 'weird' is not one of"},
		// md5sum and kin.
		{"md5sum", "pub/file.txt", "--#pub/file.txt"},
		{"sha256sum", "--tag#/pub/file.txt#-", "--tag#--#" + root + "/pub/file.txt#-"},
		{"md5sum", "--#/pub/file.txt#in/file.txt", "--#" + root + "/pub/file.txt#in/file.txt"},
		{"md5sum", "", ""},
		{"md5sum", "-c#pub/file.txt", "!option '-c' not allowed"},
		{"md5sum", "--check#pub/file.txt", "!option '--check' not allowed"},
		{"md5sum", "/etc/passwd", "--#" + root + "/etc/passwd"},
		{"md5sum", "--#../x", "!path '../x': no '..'"},
		{"md5sum", "out/root/pub/file.txt", "!path 'out/root/pub/file.txt' leads out"},
		{"b2sum", "abs/passwd", "!path 'abs/passwd' leads out"},
		// cat.
		{"cat", "pub/file.txt#-", "--#pub/file.txt#-"},
		{"cat", "-v#pub/file.txt", "!option '-v' not allowed"},
		{"cat", "abs/passwd", "!path 'abs/passwd' leads out"},
		// Compressors.
		{"gzip", "", ""},
		{"gzip", "-9", "-9"},
		{"gzip", "-dc#pub/file.txt", "--decompress#--stdout#--#pub/file.txt"},
		{"zstd", "-q#-d", "--quiet#--decompress"},
		{"xz", "pub/file.txt", "!name files only with -c"},
		{"xzcat", "pub/file.txt", "--#pub/file.txt"},
		{"gzip", "-c#abs/passwd", "!path 'abs/passwd' leads out"},
		{"zstd", "-o#x", "!option '-o' not allowed"},
		{"zstd", "--rm#pub/file.txt", "!option '--rm' not allowed"},
		{"xz", "--files=pub/file.txt", "!option '--files' not allowed"},
		{"gzip", "-S#.sh", "!option '-S' not allowed"},
	} {
		args := strings.Split(tt.args, "#")
		if tt.args == "" {
			args = nil
		}
		got, err := approve(Profile("/usr/bin/"+tt.prog), args, tr)
		want, refusal := strings.CutPrefix(tt.want, "!")
		switch {
		case refusal && err == nil:
			t.Errorf("%s %s: %q, want the refusal %q", tt.prog, tt.args, got.args, want)
		case refusal && !strings.HasPrefix(err.Error(), want):
			t.Errorf("%s %s: refused with %q, want %q", tt.prog, tt.args, err, want)
		case !refusal && err != nil:
			t.Errorf("%s %s: %v", tt.prog, tt.args, err)
		case !refusal && strings.Join(got.args, "#") != tt.want:
			t.Errorf("%s %s: %q, want %q", tt.prog, tt.args, strings.Join(got.args, "#"), tt.want)
		}
	}
}

// TestPattern: an operator's declaration of a program's arguments.
func TestPattern(t *testing.T) {
	tr := testTree(t)
	root := tr.dir
	for _, tt := range []struct {
		pattern string
		args    string // "#"-joined
		want    string // "#"-joined, or "!" and the start of the refusal
	}{
		{"", "", ""},
		{"", "x", "!the arguments do not match"},
		{"-c {int}? {path}*", "-c", "-c"},
		{"-c {int}? {path}*", "-c#5#pub/file.txt#/pub", "-c#5#pub/file.txt#" + root + "/pub"},
		{"-c {int}? {path}*", "-c#pub", "-c#pub"},
		{"-c {int}? {path}*", "-c#-5", "!path '-5': not an option"},
		{"-c {int}? {path}*", "-c#out/x", "!path 'out/x' leads out"},
		{"-c {int}? {path}*", "-c#../x", "!path '../x': no '..'"},
		{"-c {int}? {path}*", "-d", "!the arguments do not match"},
		{"-v? {path}", "pub", "pub"},
		{"-v? {path}", "-v#pub", "-v#pub"},
		{"-v? {path}", "-v#-v#pub", "!path '-v': not an option"},
		{"{any}*", "--anything#../at#all", "--anything#../at#all"},
		{"@md5sum", "pub/file.txt", "--#pub/file.txt"},
	} {
		p, err := ParsePattern(tt.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tt.pattern, err)
		}
		args := strings.Split(tt.args, "#")
		if tt.args == "" {
			args = nil
		}
		got, err := approve(p, args, tr)
		want, refusal := strings.CutPrefix(tt.want, "!")
		switch {
		case refusal && (err == nil || !strings.HasPrefix(err.Error(), want)):
			t.Errorf("%q %s: %q, %v; want the refusal %q", tt.pattern, tt.args, got.args, err, want)
		case !refusal && err != nil:
			t.Errorf("%q %s: %v", tt.pattern, tt.args, err)
		case !refusal && strings.Join(got.args, "#") != tt.want:
			t.Errorf("%q %s: %q, want %q", tt.pattern, tt.args, strings.Join(got.args, "#"), tt.want)
		}
	}
	for _, bad := range []string{"@nosuch", "{file}", "?", "-c {path"} {
		if _, err := ParsePattern(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestRunAs: as root, programs run as the session's user, else the
// configured one, else nobody; never as root.
func TestRunAs(t *testing.T) {
	if os.Geteuid() != 0 {
		if r, err := runAsFor("", ""); err != nil || r.cred != nil {
			t.Fatalf("not root: %v, %v; want the server's own user", r, err)
		}
		t.Skip("the rest needs root")
	}
	for _, tt := range []struct {
		session, configured string
		uid                 uint32 // 0: refused
	}{
		{"", "", 65534},
		{"", "nobody", 65534},
		{"daemon", "nobody", 1},
		{"", "daemon", 1},
		{"root", "", 0},
		{"", "root", 0},
		{"no-such-user-here", "", 0},
	} {
		r, err := runAsFor(tt.session, tt.configured)
		switch {
		case tt.uid == 0 && err == nil:
			t.Errorf("%q/%q: runs as %d, want a refusal", tt.session, tt.configured, r.cred.Uid)
		case tt.uid != 0 && (err != nil || r.cred.Uid != tt.uid):
			t.Errorf("%q/%q: %+v, %v; want uid %d", tt.session, tt.configured, r.cred, err, tt.uid)
		}
	}
}
