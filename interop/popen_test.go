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
// the commands are written "#"-joined.

// popenWhitelist is what the servers of these tests let clients run.
const popenWhitelist = "tar:/bin/tar,/bin/false,md5sum:/usr/bin/md5sum"

func startFerryPopen(t *testing.T) *ferryServer {
	return startFerryConfig(t, ferryConfig{Anonymous: true, Args: []string{"--popen-whitelist", popenWhitelist}})
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

// popenSource makes a directory holding "tree": makeTree's files and one
// of 5 MB, for tar to pack.
func popenSource(t *testing.T) string {
	t.Helper()
	src := bigTempDir(t)
	makeTree(t, filepath.Join(src, "tree"))
	writeRandomFile(t, filepath.Join(src, "tree", "five.dat"), 5<<20)
	return src
}

// tarOut packs src's tree; tarIn unpacks into dst.
func tarOut(src string) string { return "tar#cf#-#-C#" + src + "#tree" }
func tarIn(dst string) string  { return "tar#xf#-#-C#" + dst }

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
	srv := startFerryPopen(t)
	src := popenSource(t)
	for _, m := range popenModes {
		t.Run(m.name, func(t *testing.T) {
			local := t.TempDir()
			got := filepath.Join(local, "got.tar")
			guc(t, append(m.args, "-src-pipe", tarOut(src), srv.URL("x"), fileURL(got))...)
			out := filepath.Join(local, "out")
			os.Mkdir(out, 0o777)
			mustRun(t, "tar", "xf", got, "-C", out)
			sameTree(t, filepath.Join(src, "tree"), filepath.Join(out, "tree"))

			dst := bigTempDir(t)
			guc(t, append(m.args, "-dst-pipe", tarIn(dst), fileURL(got), srv.URL("x"))...)
			sameTree(t, filepath.Join(src, "tree"), filepath.Join(dst, "tree"))
		})
	}
}

// TestPopenPipe: -pipe names the program of the server's side of a
// two-party copy, whichever way it goes.
func TestPopenPipe(t *testing.T) {
	needTools(t, "tar")
	srv := startFerryPopen(t)
	src := popenSource(t)
	got := filepath.Join(t.TempDir(), "got.tar")
	guc(t, "-pipe", tarOut(src), srv.URL("x"), fileURL(got))
	dst := bigTempDir(t)
	guc(t, "-pipe", tarIn(dst), fileURL(got), srv.URL("x"))
	sameTree(t, filepath.Join(src, "tree"), filepath.Join(dst, "tree"))
}

// TestPopenThirdParty: tar on one server packs a tree that tar on another
// unpacks, between two ferry servers and between ferry and GCT both ways.
func TestPopenThirdParty(t *testing.T) {
	needTools(t)
	ferryA, ferryB := startFerryPopen(t), startFerryPopen(t)
	gct := startGCTPopen(t)
	src := popenSource(t)
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
				dst := bigTempDir(t)
				guc(t, append(m.args, "-src-pipe", tarOut(src), "-dst-pipe", tarIn(dst), pair.from.URL("x"), pair.to.URL("x"))...)
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
	src := popenSource(t)
	local := filepath.Join(t.TempDir(), "local.tar")
	mustRun(t, "tar", "cf", local, "-C", src, "tree")
	for _, start := range []func(*testing.T) server{
		func(t *testing.T) server { return startFerryPopen(t) },
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
				{"missing member", []string{"-dst-pipe", tarIn(bigTempDir(t)) + "#tree/nonexistent-member", fileURL(local), srv.URL("x")},
					[]string{"popened program exited with an error (exit code: 2):", "Not found in archive"}},
				{"missing member, MODE E", []string{"-fast", "-p", "8", "-src-pipe", tarOut(src), "-dst-pipe", tarIn(bigTempDir(t)) + "#tree/nonexistent-member", srv.URL("x"), srv.URL("y")},
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
