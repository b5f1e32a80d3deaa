//go:build interop

package interop

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Pipes (popen): globus-url-copy's -src-pipe, -dst-pipe and -pipe against
// ferry gridftp --popen-whitelist and GCT's popen driver. globus-url-copy
// 10.12 splits a pipe command only on a delimiter that occurs in it, so
// the commands are written "#"-joined. A ferry program's paths are the
// session's, confined to its root (the base of the test); GCT's are the
// host's.

// popenWhitelist is what the servers of these tests let clients run.
const popenWhitelist = "tar:/bin/tar,/bin/false,md5sum:/usr/bin/md5sum"

// startFerryPopen starts ferry serving base, which the programs, run as
// nobody, can reach; its anonymous sessions may run them.
func startFerryPopen(t *testing.T, base string) *ferryServer {
	return startFerryConfig(t, ferryConfig{Root: base, Anonymous: true, Args: []string{"--popen-whitelist", popenWhitelist, "--popen-anonymous"}})
}

func startGCTPopen(t *testing.T) *gctServer {
	return startGCTServer(t, "-fs-whitelist", "popen,file,ordering", "-popen-whitelist", popenWhitelist)
}

// popenModes are the transfer modes each pipe transfer runs in; with
// MODE E globus-url-copy asks for the ordering layer on the receiving side.
var popenModes = []struct {
	name string
	args []string
}{
	{"stream", nil},
	{"modeE-p8", []string{"-fast", "-p", "8"}},
}

// popenSource makes a directory below base holding "tree": makeTree's
// files and one of 5 MB, for tar to pack.
func popenSource(t *testing.T, base string) string {
	t.Helper()
	src := popenDir(t, base)
	makeTree(t, filepath.Join(src, "tree"))
	writeRandomFile(t, filepath.Join(src, "tree", "five.dat"), 5<<20)
	return src
}

// popenDir makes an empty directory below base that programs may write.
func popenDir(t *testing.T, base string) string {
	t.Helper()
	d, err := os.MkdirTemp(base, "d")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

// at is dir as srv's programs name it: below ferry's root from its "/",
// on GCT as it is.
func at(srv server, dir string) string {
	if f, ok := srv.(*ferryServer); ok {
		rel, err := filepath.Rel(f.Root(), dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			panic(dir + " is not below ferry's root " + f.Root())
		}
		return "/" + filepath.ToSlash(rel)
	}
	return dir
}

// tarOut packs src's tree on srv; tarIn unpacks into dst on srv.
func tarOut(srv server, src string) string { return "tar#cf#-#-C#" + at(srv, src) + "#tree" }
func tarIn(srv server, dst string) string  { return "tar#xf#-#-C#" + at(srv, dst) }

// sameTree fails unless got holds want's tree, every file byte for byte.
func sameTree(t *testing.T, want, got string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(want, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		g := filepath.Join(got, rel)
		if d.IsDir() {
			if st, err := os.Stat(g); err != nil || !st.IsDir() {
				t.Errorf("directory %s missing (%v)", rel, err)
			}
			return nil
		}
		n++
		if err := compareFiles(p, g); err != nil {
			t.Error(err)
		}
		return nil
	})
	if err != nil || n < len(treeFiles)+1 {
		t.Fatalf("compared %d files: %v", n, err)
	}
}

// TestPopenTwoParty: a tree packed by tar on ferry (-src-pipe) to a local
// file, and a local tar file unpacked on ferry (-dst-pipe), in stream
// mode and MODE E with 8 streams.
func TestPopenTwoParty(t *testing.T) {
	needTools(t, "tar")
	base := bigTempDir(t)
	srv := startFerryPopen(t, base)
	src := popenSource(t, base)
	for _, m := range popenModes {
		t.Run(m.name, func(t *testing.T) {
			local := t.TempDir()
			got := filepath.Join(local, "got.tar")
			guc(t, append(m.args, "-src-pipe", tarOut(srv, src), srv.URL("x"), fileURL(got))...)
			out := filepath.Join(local, "out")
			os.Mkdir(out, 0o777)
			mustRun(t, "tar", "xf", got, "-C", out)
			sameTree(t, filepath.Join(src, "tree"), filepath.Join(out, "tree"))

			dst := popenDir(t, base)
			guc(t, append(m.args, "-dst-pipe", tarIn(srv, dst), fileURL(got), srv.URL("x"))...)
			sameTree(t, filepath.Join(src, "tree"), filepath.Join(dst, "tree"))
		})
	}
}

// TestPopenPipe: -pipe names the program of the server's side of a
// two-party copy, whichever way it goes.
func TestPopenPipe(t *testing.T) {
	needTools(t, "tar")
	base := bigTempDir(t)
	srv := startFerryPopen(t, base)
	src := popenSource(t, base)
	got := filepath.Join(t.TempDir(), "got.tar")
	guc(t, "-pipe", tarOut(srv, src), srv.URL("x"), fileURL(got))
	dst := popenDir(t, base)
	guc(t, "-pipe", tarIn(srv, dst), fileURL(got), srv.URL("x"))
	sameTree(t, filepath.Join(src, "tree"), filepath.Join(dst, "tree"))
}

// TestPopenThirdParty: tar on one server packs a tree that tar on another
// unpacks, between two ferry servers and between ferry and GCT both ways.
func TestPopenThirdParty(t *testing.T) {
	needTools(t)
	base := bigTempDir(t)
	ferryA, ferryB := startFerryPopen(t, base), startFerryPopen(t, base)
	gct := startGCTPopen(t)
	src := popenSource(t, base)
	for _, pair := range []struct {
		name     string
		from, to server
	}{
		{"ferry-ferry", ferryA, ferryB},
		{"ferry-gct", ferryA, gct},
		{"gct-ferry", gct, ferryB},
	} {
		for _, m := range popenModes {
			t.Run(pair.name+"/"+m.name, func(t *testing.T) {
				dst := popenDir(t, base)
				guc(t, append(m.args, "-src-pipe", tarOut(pair.from, src), "-dst-pipe", tarIn(pair.to, dst), pair.from.URL("x"), pair.to.URL("x"))...)
				sameTree(t, filepath.Join(src, "tree"), filepath.Join(dst, "tree"))
			})
		}
	}
}

// TestPopenFailures: a program the server does not offer is refused, and
// a program that fails fails the copy, with the same words from ferry as
// from GCT.
func TestPopenFailures(t *testing.T) {
	needTools(t, "tar")
	base := bigTempDir(t)
	src := popenSource(t, base)
	local := filepath.Join(t.TempDir(), "local.tar")
	mustRun(t, "tar", "cf", local, "-C", src, "tree")
	for _, start := range []func(*testing.T) server{
		func(t *testing.T) server { return startFerryPopen(t, base) },
		func(t *testing.T) server { return startGCTPopen(t) },
	} {
		srv := start(t)
		t.Run(srv.Name(), func(t *testing.T) {
			for _, tt := range []struct {
				name string
				args []string
				want []string
			}{
				{"not whitelisted", []string{"-src-pipe", "/bin/ls#-l", srv.URL("x"), fileURL(local + ".out")},
					[]string{"500-Setting filesystem driver stack failed.", "500-Approving popen arguments failed.", "500-program '/bin/ls' not whitelisted."}},
				{"failing source", []string{"-src-pipe", "/bin/false#", srv.URL("x"), fileURL(local + ".out")},
					[]string{"popened program exited with an error (exit code: 1)"}},
				{"missing member", []string{"-dst-pipe", tarIn(srv, popenDir(t, base)) + "#tree/nonexistent-member", fileURL(local), srv.URL("x")},
					[]string{"popened program exited with an error (exit code: 2):", "Not found in archive"}},
				{"missing member, MODE E", []string{"-fast", "-p", "8", "-src-pipe", tarOut(srv, src), "-dst-pipe", tarIn(srv, popenDir(t, base)) + "#tree/nonexistent-member", srv.URL("x"), srv.URL("y")},
					[]string{"popened program exited with an error (exit code: 2):", "Not found in archive"}},
			} {
				out, err := gucErr(tt.args...)
				if err == nil {
					t.Errorf("%s: globus-url-copy succeeded:\n%s", tt.name, out)
					continue
				}
				for _, w := range tt.want {
					if !strings.Contains(out, w) {
						t.Errorf("%s: the output lacks %q:\n%s", tt.name, w, out)
					}
				}
			}
		})
	}
}

// TestPopenDocsExample: the example server of docs/gridftp.md ("Programs
// (popen)"), `ferry gridftp --anonymous --popen-whitelist
// tar:/bin/tar,/usr/bin/md5sum`, runs no program for an anonymous client, and a client that may run tar (with
// --popen-anonymous) cannot make it run a command of its own, or read a
// file outside the root, with tar or md5sum. The stacks go verbatim
// (-src-fsstack): -src-pipe splits words on spaces.
func TestPopenDocsExample(t *testing.T) {
	needTools(t, "tar")
	base := bigTempDir(t)
	root, outside := popenDir(t, base), popenDir(t, base)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("outside-the-root"), 0o644)
	os.Mkdir(filepath.Join(root, "pub"), 0o777)
	marker := filepath.Join(outside, "ran")
	attacks := []string{
		"tar#cf#/dev/null#--checkpoint=1#--checkpoint-action%3Dexec%3Dtouch " + marker + "#pub",
		"tar#cf#-#-I#touch " + marker + "#pub",
		"tar#cf#-#--use-compress-program=touch " + marker + "#pub",
		"tar#cf#-#" + outside + "/secret",
		"tar#cf#-#../" + filepath.Base(outside) + "/secret",
		"/usr/bin/md5sum#" + outside + "/secret",
	}
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"as in docs/gridftp.md", nil},
		{"anonymous allowed", []string{"--popen-anonymous"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := startFerryConfig(t, ferryConfig{Root: root, Args: append([]string{"--anonymous", "--popen-whitelist", "tar:/bin/tar,/usr/bin/md5sum"}, tt.args...)})
			for _, a := range attacks {
				got := filepath.Join(t.TempDir(), "got")
				out, _ := gucErr("-src-fsstack", "popen:argv=#"+a, srv.URL("pub"), fileURL(got))
				if _, err := os.Stat(marker); err == nil {
					os.Remove(marker)
					t.Errorf("%s: the client's command ran:\n%s", a, out)
				}
				if b, _ := os.ReadFile(got); strings.Contains(string(b), "outside-the-root") || strings.Contains(string(b), "  "+outside) {
					t.Errorf("%s: a file outside the root reached the client:\n%s", a, b)
				}
				if tt.args == nil && !strings.Contains(out, "popen is not offered to anonymous or read-only sessions.") {
					t.Errorf("%s: an anonymous client was not refused:\n%s", a, out)
				}
			}
		})
	}
}
