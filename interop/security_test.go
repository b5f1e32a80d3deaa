//go:build interop

package interop

// Confinement: no path a client sends — "..", absolute file names, percent
// encodings, symlinks planted inside the root — reads, lists, changes or
// creates anything outside ferry's root.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fileState is what a snapshot records of one path.
type fileState struct {
	mode  fs.FileMode
	size  int64
	mtime time.Time
	sum   string
}

// snapshot records every path under dir (without following symlinks).
func snapshot(t testing.TB, dir string) map[string]fileState {
	t.Helper()
	m := map[string]fileState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fileState{mode: info.Mode(), size: info.Size(), mtime: info.ModTime()}
		if info.Mode().IsRegular() {
			h := sha256.Sum256(readFile(t, p))
			st.sum = hex.EncodeToString(h[:])
		}
		rel, _ := filepath.Rel(dir, p)
		m[rel] = st
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// diffSnapshots describes how two snapshots differ ("" if they do not).
func diffSnapshots(before, after map[string]fileState) string {
	var b strings.Builder
	for _, p := range sortedKeys(before) {
		a, ok := after[p]
		switch {
		case !ok:
			fmt.Fprintf(&b, "removed: %s\n", p)
		case a != before[p]:
			fmt.Fprintf(&b, "changed: %s: %+v -> %+v\n", p, before[p], a)
		}
	}
	for _, p := range sortedKeys(after) {
		if _, ok := before[p]; !ok {
			fmt.Fprintf(&b, "created: %s\n", p)
		}
	}
	return b.String()
}

// confinementFixture is a root with symlinks pointing out of it, next to an
// "outside" directory holding a secret.
type confinementFixture struct {
	base, root, outside string
	secret              []byte
	srv                 *ferryServer
}

func newConfinementFixture(t *testing.T) *confinementFixture {
	t.Helper()
	base := t.TempDir()
	f := &confinementFixture{
		base:    base,
		root:    filepath.Join(base, "root"),
		outside: filepath.Join(base, "outside"),
		secret:  []byte(fmt.Sprintf("FERRY-INTEROP-SECRET-%d\n", time.Now().UnixNano())),
	}
	writeFile(t, filepath.Join(f.outside, "secret.txt"), f.secret)
	writeFile(t, filepath.Join(f.outside, outsideMarker), []byte("marker\n"))
	writeFile(t, filepath.Join(f.root, "inside.txt"), []byte("inside\n"))
	writeFile(t, filepath.Join(f.root, "sub", "file.txt"), []byte("sub\n"))
	for link, target := range map[string]string{
		"link-dir":        "../outside",
		"link-abs":        filepath.Join(f.outside, "secret.txt"),
		"link-etc":        "/etc",
		"sub/link-up":     "../../outside",
		"link-abs-dir":    f.outside,
		"sub/link-secret": "../../outside/secret.txt",
	} {
		if err := os.Symlink(target, filepath.Join(f.root, link)); err != nil {
			t.Fatal(err)
		}
	}
	f.srv = startFerryConfig(t, ferryConfig{Root: f.root, Anonymous: true})
	return f
}

// leaks reports whether data holds the secret or a password file.
func (f *confinementFixture) leaks(data []byte) bool {
	return bytes.Contains(data, bytes.TrimSpace(f.secret)) || bytes.Contains(data, []byte("root:x:0:0"))
}

// outsideMarker is a name found only outside the root: a listing holding it
// listed outside. (Listings show no target of a link that leads out.)
const outsideMarker = "zz-outside-marker.dat"

// finalLinks are escapingPaths whose last element is a symlink inside the
// root: describing the link itself (lstat: its size, mtime, target string)
// is fine, describing or reading what it points to is not.
var finalLinks = map[string]bool{"link-abs": true, "sub/link-secret": true}

// escapingPaths all name something outside the root (or nothing at all).
func (f *confinementFixture) escapingPaths() []string {
	return []string{
		"../outside/secret.txt",
		"/../outside/secret.txt",
		"../../../../../../../../etc/passwd",
		"/etc/passwd",
		"..//outside/secret.txt",
		"./../outside/secret.txt",
		"sub/../../outside/secret.txt",
		"/sub/../../../outside/secret.txt",
		"%2e%2e/outside/secret.txt",
		"..%2Foutside%2Fsecret.txt",
		`..\outside\secret.txt`,
		filepath.Join(f.outside, "secret.txt"), // the real absolute name
		"link-dir/secret.txt",
		"link-abs",
		"link-abs-dir/secret.txt",
		"link-etc/passwd",
		"sub/link-up/secret.txt",
		"sub/link-secret",
	}
}

func TestFerryConfinement(t *testing.T) {
	needTools(t, "curl", "lftp")
	f := newConfinementFixture(t)
	before := snapshot(t, f.outside)
	t.Cleanup(func() {
		if d := diffSnapshots(before, snapshot(t, f.outside)); d != "" {
			t.Errorf("files outside the root changed:\n%s", d)
		}
	})

	c := dialFTP(t, f.srv.Addr())
	c.login("anonymous", "ferry@")
	if data, code, msg := c.transferIn("RETR inside.txt"); code != 226 || string(data) != "inside\n" {
		t.Fatalf("control: RETR inside.txt: %d %s, data %q", code, msg, data)
	}

	t.Run("read", func(t *testing.T) {
		for _, p := range f.escapingPaths() {
			data, code, msg := c.transferIn("RETR " + p)
			if f.leaks(data) {
				t.Errorf("RETR %s: LEAKED data outside the root: %q", p, data)
			}
			if code < 400 {
				t.Errorf("RETR %s: %d %s, want a 4xx/5xx refusal", p, code, msg)
			}
		}
	})
	t.Run("stat", func(t *testing.T) {
		secretSize := strconv.Itoa(len(f.secret))
		for _, p := range f.escapingPaths() {
			for _, verb := range []string{"SIZE ", "MDTM ", "MLST ", "CKSM MD5 0 -1 ", "CKSM ADLER32 0 -1 "} {
				code, msg := c.cmd(verb + p)
				switch {
				case finalLinks[p] && !strings.HasPrefix(verb, "CKSM"):
					if code < 400 && (msg == secretSize || strings.Contains(msg, "Size="+secretSize+";") ||
						strings.Contains(msg, "Type=file;")) {
						t.Errorf("%s%s: %d %s: describes the target outside the root", verb, p, code, msg)
					}
				case code < 400:
					t.Errorf("%s%s: %d %s, want a 4xx/5xx refusal", verb, p, code, msg)
				}
			}
		}
	})
	t.Run("list", func(t *testing.T) {
		dirs := []string{"..", "../outside", "/..", "link-dir", "link-abs-dir", "sub/link-up", "link-etc",
			f.outside, "sub/../..", "%2e%2e"}
		for _, p := range dirs {
			for _, verb := range []string{"MLSD ", "LIST ", "NLST "} {
				data, code, msg := c.transferIn(verb + p)
				if bytes.Contains(data, []byte(outsideMarker)) || bytes.Contains(data, []byte("passwd")) {
					t.Errorf("%s%s: listed outside the root (%d %s):\n%s", verb, p, code, msg, data)
				}
			}
		}
	})
	t.Run("link targets", func(t *testing.T) {
		// Listings name the links but never where they lead out of the
		// root, nor where the root is.
		reveals := func(text string) bool {
			return strings.Contains(text, "outside") || strings.Contains(text, "/etc") || strings.Contains(text, f.base)
		}
		for _, line := range []string{"MLSD /", "LIST", "LIST -la", "MLSD sub", "LIST sub", "NLST"} {
			data, code, msg := c.transferIn(line)
			if code != 226 || reveals(string(data)) || !bytes.Contains(data, []byte("link-dir")) && !bytes.Contains(data, []byte("link-up")) {
				t.Errorf("%s: %d %s:\n%s", line, code, msg, data)
			}
		}
		for _, link := range []string{"link-dir", "link-abs", "link-etc", "link-abs-dir", "sub/link-up", "sub/link-secret"} {
			for _, verb := range []string{"MLST ", "STAT "} {
				if code, msg := c.cmd(verb + link); reveals(msg) {
					t.Errorf("%s%s: %d %s", verb, link, code, msg)
				}
			}
		}
		out, err := runTool(t.Context(), cmdTimeout, "", "curl", "-sS", "--max-time", "30", "ftp://"+f.srv.Addr()+"/")
		if err != nil || reveals(out) || !strings.Contains(out, "link-dir") {
			t.Errorf("curl LIST: %v\n%s", err, out)
		}
		if out := lftpScript(t, f.srv, "cls -l /"); reveals(out) || !strings.Contains(out, "link-dir") {
			t.Errorf("lftp cls -l:\n%s", out)
		}
	})
	t.Run("cwd", func(t *testing.T) {
		for _, p := range []string{"..", "../..", "/.."} {
			if code, msg := c.cmd("CWD " + p); code >= 300 {
				t.Logf("CWD %s: %d %s", p, code, msg) // refusing is fine too
			}
			if code, msg := c.cmd("PWD"); !strings.Contains(msg, `"/"`) {
				t.Errorf("after CWD %s, PWD: %d %s, want \"/\"", p, code, msg)
			}
			if data, code, msg := c.transferIn("RETR outside/secret.txt"); code < 400 || f.leaks(data) {
				t.Errorf("after CWD %s, RETR outside/secret.txt: %d %s %q", p, code, msg, data)
			}
		}
		for _, p := range []string{"../outside", "link-dir", "link-abs-dir", "sub/link-up", "link-etc", f.outside} {
			if code, msg := c.cmd("CWD " + p); code < 400 {
				t.Errorf("CWD %s: %d %s, want a refusal", p, code, msg)
			}
			if data, code, msg := c.transferIn("RETR secret.txt"); code < 400 || f.leaks(data) {
				t.Errorf("after CWD %s, RETR secret.txt: %d %s %q", p, code, msg, data)
			}
			c.cmd("CWD /")
		}
	})
	t.Run("globus-url-copy", func(t *testing.T) {
		addr := "ftp://" + f.srv.Addr()
		for _, u := range []string{
			addr + "/../outside/secret.txt",
			addr + "/%2E%2E/outside/secret.txt",
			addr + "/..%2Foutside%2Fsecret.txt",
			addr + "/%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd",
			addr + "/link-dir/secret.txt",
			addr + "/sub/link-secret",
			addr + escapePath(filepath.Join(f.outside, "secret.txt")),
		} {
			out := filepath.Join(t.TempDir(), "out")
			if _, err := gucErr(u, fileURL(out)); err == nil {
				t.Errorf("globus-url-copy %s: succeeded, want a failure", u)
			}
			if b, err := os.ReadFile(out); err == nil && f.leaks(b) {
				t.Errorf("globus-url-copy %s: LEAKED data outside the root", u)
			}
		}
		local := filepath.Join(t.TempDir(), "evil")
		writeFile(t, local, []byte("EVIL\n"))
		for _, u := range []string{
			addr + "/../outside/evil.txt",
			addr + "/%2E%2E/outside/secret.txt",
			addr + "/link-dir/evil.txt",
			addr + "/link-abs",
		} {
			gucErr(fileURL(local), u)
		}
		if d := diffSnapshots(before, snapshot(t, f.outside)); d != "" {
			t.Errorf("files outside the root changed:\n%s", d)
		}
	})
	t.Run("curl", func(t *testing.T) {
		addr := "ftp://" + f.srv.Addr()
		for _, u := range []string{
			addr + "/../outside/secret.txt",
			addr + "/%2e%2e/outside/secret.txt",
			addr + "/%2F..%2Foutside/secret.txt",
			addr + "/link-dir/secret.txt",
		} {
			out, err := runTool(t.Context(), cmdTimeout, "", "curl", "-sS", "--max-time", "30", "--path-as-is", u)
			if err == nil {
				t.Errorf("curl --path-as-is %s: succeeded, want a failure", u)
			}
			if f.leaks([]byte(out)) {
				t.Errorf("curl --path-as-is %s: LEAKED data outside the root", u)
			}
		}
	})
	// Last: some of these may legitimately remove the planted links.
	t.Run("write", func(t *testing.T) {
		evil := []byte("EVIL\n")
		for _, p := range []string{"../outside/secret.txt", "../outside/new.txt", "/../outside/new.txt",
			"link-dir/new.txt", "link-dir/secret.txt", "link-abs", "link-abs-dir/new.txt",
			"sub/link-up/new.txt", "sub/link-secret", filepath.Join(f.outside, "new.txt")} {
			c.transferOut("STOR "+p, evil)
			c.transferOut("APPE "+p, evil)
		}
		for _, line := range []string{
			"MKD ../outside/newdir", "MKD link-dir/newdir", "MKD sub/link-up/newdir",
			"DELE ../outside/secret.txt", "DELE link-dir/secret.txt", "DELE sub/link-secret/",
			"RMD ../outside", "RMD link-dir/",
			"SITE CHMOD 777 link-abs", "SITE CHMOD 777 ../outside/secret.txt", "SITE CHMOD 777 link-dir",
			"SITE UTIME 20000101000000 link-abs", "SITE UTIME 20000101000000 link-dir/secret.txt",
			"MFMT 20000101000000 link-abs",
			"SITE TRNC 0 link-abs",
		} {
			c.cmd(line)
		}
		for _, pair := range [][2]string{
			{"../outside/secret.txt", "stolen.txt"},
			{"link-dir/secret.txt", "stolen2.txt"},
			{"inside.txt", "../outside/moved.txt"},
			{"sub/file.txt", "link-dir/moved.txt"},
		} {
			if code, _ := c.cmd("RNFR " + pair[0]); code == 350 {
				c.cmd("RNTO " + pair[1])
			}
		}
		for _, p := range []string{"stolen.txt", "stolen2.txt"} {
			if b, err := os.ReadFile(filepath.Join(f.root, p)); err == nil && f.leaks(b) {
				t.Errorf("%s: secret renamed into the root", p)
			}
		}
		if d := diffSnapshots(before, snapshot(t, f.outside)); d != "" {
			t.Errorf("files outside the root changed:\n%s", d)
		}
	})
}
