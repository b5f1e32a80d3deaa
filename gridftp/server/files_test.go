package server_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"ferry/checksum"
	"ferry/gridftp"
)

func TestCKSM(t *testing.T) {
	env := startServer(t)
	data := pattern(3<<20 + 12345) // more than one checksum block
	env.file("f", data)
	env.file("empty", nil)
	c := env.login()
	ranges := []struct{ off, n int64 }{{0, -1}, {0, int64(len(data))}, {100, 5000}, {1 << 20, -1}, {int64(len(data)), -1}, {7, 0}}
	for _, alg := range checksum.Names() {
		for _, r := range ranges {
			t.Run(fmt.Sprintf("%s %d %d", alg, r.off, r.n), func(t *testing.T) {
				want, err := checksum.Sum(context.Background(), bytes.NewReader(data), r.off, r.n, alg)
				if err != nil {
					t.Fatal(err)
				}
				c.expectText(fmt.Sprintf("CKSM %s %d %d f", alg, r.off, r.n), "213 "+want)
				c.expectText(fmt.Sprintf("CKSM %s %d %d f", strings.ToLower(alg), r.off, r.n), "213 "+want)
			})
		}
	}
	// Known values (GCT prints ADLER32 as 8 hex digits).
	c.expectText("CKSM MD5 0 -1 empty", "213 d41d8cd98f00b204e9800998ecf8427e")
	c.expectText("CKSM ADLER32 0 -1 empty", "213 00000001")
	c.expectText("CKSM SHA1 0 -1 empty", "213 da39a3ee5e6b4b0d3255bfef95601890afd80709")

	c.send("CKSM BOGUS 0 -1 f")
	if r := c.read(); r.Code != gridftp.CodeParamNotSupported {
		t.Errorf("unknown algorithm: %q", r.String())
	}
	for _, line := range []string{"CKSM MD5 x -1 f", "CKSM MD5 0 -2 f", "CKSM MD5 -1 -1 f", "CKSM MD5 0 -1", "CKSM MD5"} {
		c.expect(line, gridftp.CodeBadArguments)
	}
	c.expect("CKSM MD5 0 -1 missing", gridftp.CodeFileUnavailable)
	c.send("CKSM MD5 0 -1 /")
	if r := c.read(); r.Code/100 != 5 {
		t.Errorf("CKSM of a directory: %q", r.String())
	}
	// A range past the end of the file is refused, not summed short.
	c.send(fmt.Sprintf("CKSM MD5 0 %d f", len(data)+1))
	if r := c.read(); r.Code/100 != 4 && r.Code/100 != 5 {
		t.Errorf("CKSM past the end: %q", r.String())
	}
	// Names with spaces.
	env.file("a b", []byte("abc"))
	c.expectText("CKSM MD5 0 -1 a b", "213 900150983cd24fb0d6963f7d28e17f72")
}

func TestSCKS(t *testing.T) {
	env := startServer(t)
	c := env.login()
	data := []byte("checked content")
	md5sum, _ := checksum.Sum(context.Background(), bytes.NewReader(data), 0, -1, "MD5")
	adler, _ := checksum.Sum(context.Background(), bytes.NewReader(data), 0, -1, "ADLER32")

	for _, mode := range []string{"S", "E"} {
		t.Run("MODE "+mode, func(t *testing.T) {
			c.expect("MODE "+mode, 200)
			stor := func(name string) gridftp.Reply {
				dc := dialData(t, c.pasv())
				c.send("STOR " + name)
				if r := c.read(); r.Code != 150 {
					t.Fatalf("STOR: %q", r.String())
				}
				if mode == "E" {
					send(t, dc, block(0, data), eof(1))
				} else {
					send(t, dc, data)
				}
				dc.Close()
				_, final := c.final()
				return final
			}
			c.expectText("SCKS MD5 "+md5sum, "200 SCKS OK.")
			if r := stor("good"); r.String() != "226 Transfer Complete." {
				t.Fatalf("STOR with the right checksum: %q", r.String())
			}
			c.expectText("SCKS ADLER32 "+strings.ToUpper(adler), "200 SCKS OK.")
			if r := stor("good2"); r.String() != "226 Transfer Complete." {
				t.Fatalf("STOR with the right checksum in upper case: %q", r.String())
			}
			c.expectText("SCKS MD5 00000000000000000000000000000000", "200 SCKS OK.")
			r := stor("bad")
			if r.Code != gridftp.CodeFileUnavailable || r.Lines[0] != "GlobusError: v=1 c=INCORRECT_CHECKSUM" || r.Lines[len(r.Lines)-1] != "End." {
				t.Fatalf("STOR with a wrong checksum: %q", r.String())
			}
			// SCKS applies to the next transfer only.
			if r := stor("after"); r.String() != "226 Transfer Complete." {
				t.Fatalf("STOR after a failed check: %q", r.String())
			}
		})
	}
	c.send("SCKS BOGUS 1234")
	if r := c.read(); r.Code != gridftp.CodeParamNotSupported {
		t.Errorf("SCKS with an unknown algorithm: %q", r.String())
	}
	c.expectText("SCKS MD5", "501 SCKS: expected ALGORITHM CHECKSUM.")
}

func TestFileCommands(t *testing.T) {
	env := startServer(t)
	env.file("f", []byte("hello"))
	env.file("d/inner", []byte("x"))
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(filepath.Join(env.root, "f"), mtime, mtime)
	c := env.login()
	steps := []struct{ line, want string }{
		{"SIZE f", "213 5"},
		{"SIZE /f", "213 5"},
		{"SIZE missing", "550"},
		{"MDTM f", "213 20200102030405"},
		{"MDTM missing", "550"},
		{"MFMT 20210304050607 f", "213 Modify=20210304050607; f"},
		{"MDTM f", "213 20210304050607"},
		{"MFMT 20210304050607.123 f", "213 Modify=20210304050607; f"},
		{"MFMT 2021 f", "501 MFMT: time must be YYYYMMDDHHMMSS."},
		{"MFMT 20210304050607", "501 MFMT: expected TIME PATH."},
		{"MFMT 20210304050607 missing", "550"},
		{"PWD", `257 "/" is current directory.`},
		{"CWD d", "250 CWD command successful."},
		{"PWD", `257 "/d" is current directory.`},
		{"SIZE inner", "213 1"},
		{"CDUP", "250 CWD command successful."},
		{"XPWD", `257 "/" is current directory.`},
		{"CWD f", "550"},
		{"CWD missing", "550"},
		{"MKD new", `257 Directory "/new" created successfully.`},
		{"MKD new", "553"},
		{"MKD /", "553"},
		{"MKD d/inner", "553"},
		{"MKD a/b", "550"},
		{`MKD q"uote`, `257 Directory "/q""uote" created successfully.`},
		{"XMKD x2", `257 Directory "/x2" created successfully.`},
		{"RMD new", "250 RMD command successful."},
		{"RMD new", "550"},
		{"RMD d", "550"},
		{"RMD f", "550"},
		{"RMD /", "550"},
		{"DELE f", "250 DELE command successful."},
		{"DELE f", "550"},
		{"DELE d", "550"},
		{"RNFR d/inner", "350 OK. Send RNTO with destination name."},
		{"RNTO moved", "250 OK."},
		{"SIZE moved", "213 1"},
		{"RNTO again", "503 RNTO must follow RNFR."},
		{"RNFR missing", "550"},
		{"RNTO x", "503 RNTO must follow RNFR."},
		{"RNFR moved", "350 OK. Send RNTO with destination name."},
		{"NOOP", "200 NOOP command successful."},
		{"RNTO x", "503 RNTO must follow RNFR."},
		{"RNFR moved", "350 OK. Send RNTO with destination name."},
		{"RNTO nodir/x", "550"},
		{"RNFR d", "350 OK. Send RNTO with destination name."},
		{"RNTO d2", "250 OK."},
		{"CWD d2", "250 CWD command successful."},
		{"CWD /", "250 CWD command successful."},
	}
	for _, s := range steps {
		c.send(s.line)
		r := c.read()
		if r.String() != s.want && fmt.Sprint(r.Code) != s.want {
			t.Fatalf("%s: got %q, want %q", s.line, r.String(), s.want)
		}
	}
	if fi, err := os.Stat(filepath.Join(env.root, "moved")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("moved: %v", err)
	}
}

// TestRNFRTwice: a client that repeats RNFR (a retry) can still rename.
// dispatch clears the pending name after any command but RNTO when it is
// unchanged, and a second RNFR of the same path leaves it unchanged.
func TestRNFRTwice(t *testing.T) {
	env := startServer(t)
	env.file("a", []byte("a"))
	c := env.login()
	c.expect("RNFR a", 350)
	c.expect("RNFR a", 350)
	c.expectText("RNTO b", "250 OK.")
}

func TestSITE(t *testing.T) {
	env := startServer(t)
	env.file("f", []byte("hello world"))
	env.file("tree/a/b/c", []byte("c"))
	env.file("tree/x", []byte("x"))
	c := env.login()
	steps := []struct{ line, want string }{
		{"SITE CHMOD 600 f", "200 Site Command Successful."},
		{"site chmod 0640 f", "200 Site Command Successful."},
		{"SITE CHMOD 999 f", "501 SITE CHMOD: expected OCTAL-MODE PATH."},
		{"SITE CHMOD 17777 f", "501 SITE CHMOD: expected OCTAL-MODE PATH."},
		{"SITE CHMOD 644", "501 SITE CHMOD: expected OCTAL-MODE PATH."},
		{"SITE CHMOD 644 missing", "550"},
		{"SITE UTIME 20190203040506 f", "200 Site Command Successful."},
		{"MDTM f", "213 20190203040506"},
		{"SITE UTIME 2019 f", "501 SITE UTIME: time must be YYYYMMDDHHMMSS."},
		{"SITE UTIME 20190203040506 missing", "550"},
		{"SITE TRNC 5 f", "200 Site Command Successful."},
		{"SIZE f", "213 5"},
		{"SITE TRNC 20 f", "200 Site Command Successful."},
		{"SIZE f", "213 20"},
		{"SITE TRNC -1 f", "501 SITE TRNC: expected LENGTH PATH."},
		{"SITE TRNC 5", "501 SITE TRNC: expected LENGTH PATH."},
		{"SITE TRNC 0 missing", "550"},
		{"SITE TRNC 0 tree", "550"},
		{"SITE RDEL tree", "250 RDEL command successful."},
		{"SITE RDEL tree", "550"},
		{"SITE RDEL /", "550"},
		{"SITE VERSION", "200 ferry 0.1.0"},
		{"SITE WHOAMI", "200 anonymous"},
		{"SITE CLIENTINFO scheme=ftp;appname=\"globus-url-copy\";appver=\"10.12\";", "250 OK."},
		{"SITE TASKID 1234", "250 OK."},
		{"SITE STORBUFSIZE 1048576", "200 Site Command Successful."},
		{"SITE RETRBUFSIZE 1048576", "200 Site Command Successful."},
		{"SITE STORBUFSIZE x", "501 Bad buffer size."},
		{"SITE BOGUS", "500 Invalid command."},
		{"SITE SETDISKSTACK popen:argv=#cat#/etc/passwd", "500-Setting filesystem driver stack failed.\r\nglobus_xio: Bad parameter, popen driver not whitelisted\r\n500 End."},
		{"SITE SETDISKSTACK ordering", "250 OK."},
		{"SITE SETDISKSTACK default", "250 OK."},
		{"SITE BUFSIZE 1", "500 Invalid command."},
	}
	for _, s := range steps {
		c.send(s.line)
		r := c.read()
		if r.String() != s.want && fmt.Sprint(r.Code) != s.want {
			t.Fatalf("%s: got %q, want %q", s.line, r.String(), s.want)
		}
	}
	fi, err := os.Stat(filepath.Join(env.root, "f"))
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode after SITE CHMOD: %v %v", fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(env.root, "tree")); !os.IsNotExist(err) {
		t.Fatalf("tree after SITE RDEL: %v", err)
	}
	if b := env.content("f"); !bytes.Equal(b, append([]byte("hello"), make([]byte, 15)...)) {
		t.Fatalf("f after SITE TRNC: %q", b)
	}
	c.send("SITE HELP")
	r := c.read()
	if r.Code != gridftp.CodeHelp || !strings.Contains(r.Text(), "CHMOD") || !strings.Contains(r.Text(), "RDEL") {
		t.Fatalf("SITE HELP: %q", r.String())
	}
}

func TestListings(t *testing.T) {
	env := startServer(t)
	env.file("file.txt", []byte("12345"))
	env.file("sub dir/inner", []byte("x"))
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(filepath.Join(env.root, "file.txt"), mtime, mtime)
	os.Chmod(filepath.Join(env.root, "file.txt"), 0o644)
	os.Symlink("file.txt", filepath.Join(env.root, "link"))
	c := env.login()

	// MLST on the control channel.
	r := c.expect("MLST file.txt", gridftp.CodeFileActionOK)
	if len(r.Lines) != 3 || r.Lines[0] != "status of /file.txt" || r.Lines[2] != "End." {
		t.Fatalf("MLST: %q", r.String())
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(env.root, "file.txt"), &st); err != nil {
		t.Fatal(err)
	}
	unique := fmt.Sprintf("%x-%x", st.Dev, st.Ino)
	if r.Lines[1] != " Type=file;Size=5;Modify=20200102030405;Perm=adfrw;UNIX.mode=0644;Unique="+unique+"; /file.txt" {
		t.Fatalf("MLST facts: %q", r.Lines[1])
	}
	// A symlink inside the root is its target: one object.
	if r := c.expect("MLST link", gridftp.CodeFileActionOK); !strings.Contains(r.Lines[1], "Unique="+unique+";") {
		t.Errorf("MLST link: %q, want the file's Unique fact", r.Lines[1])
	}
	e, err := gridftp.ParseEntry(r.Lines[1])
	if err != nil || e.Type != "file" || e.Size != 5 || !e.Modify.Equal(mtime) || e.Mode != 0o644 {
		t.Fatalf("MLST entry %+v, %v", e, err)
	}
	r = c.expect("MLST", gridftp.CodeFileActionOK)
	if e, _ := gridftp.ParseEntry(r.Lines[1]); e.Type != "dir" || e.Name != "/" {
		t.Fatalf("MLST of the cwd: %q", r.String())
	}
	r = c.expect("MLST link", gridftp.CodeFileActionOK)
	if e, _ := gridftp.ParseEntry(r.Lines[1]); e.Type != "file" || e.Target != "file.txt" || e.Size != 5 {
		t.Fatalf("MLST link: %q", r.String())
	}
	c.expect("MLST missing", gridftp.CodeFileUnavailable)

	list := func(line string) (gridftp.Reply, string) {
		t.Helper()
		_, final, data := tryRetr(t, c, line)
		return final, string(data)
	}

	final, data := list("MLSD")
	if final.String() != "226 Transfer Complete." {
		t.Fatalf("MLSD: %q", final.String())
	}
	names := map[string]gridftp.Entry{}
	for _, l := range strings.Split(strings.TrimSuffix(data, "\r\n"), "\r\n") {
		e, err := gridftp.ParseEntry(l)
		if err != nil {
			t.Fatalf("MLSD line %q: %v", l, err)
		}
		names[e.Name] = e
	}
	if len(names) != 5 || names["."].Type != "cdir" || names[".."].Type != "pdir" || names["sub dir"].Type != "dir" ||
		names["file.txt"].Size != 5 || names["link"].Target != "file.txt" {
		t.Fatalf("MLSD entries %+v", names)
	}
	final, data = list("MLSD sub dir")
	if final.Code != 226 || !strings.HasSuffix(data, "; inner\r\n") {
		t.Fatalf("MLSD sub dir: %q %q", final.String(), data)
	}
	if final, _ := list("MLSD file.txt"); final.Code != gridftp.CodeFileUnavailable {
		t.Fatalf("MLSD of a file: %q", final.String())
	}

	// Listings come in the storage's order: sorted here by name, what
	// follows the first skip fields of a line.
	sorted := func(data string, skip int) []string {
		lines := strings.Split(strings.TrimSuffix(data, "\r\n"), "\r\n")
		name := func(l string) string { return strings.Join(strings.Fields(l)[skip:], " ") }
		slices.SortFunc(lines, func(a, b string) int { return strings.Compare(name(a), name(b)) })
		return lines
	}
	final, data = list("NLST")
	if final.Code != 226 || strings.Join(sorted(data, 0), "\r\n") != "file.txt\r\nlink\r\nsub dir" {
		t.Fatalf("NLST: %q %q", final.String(), data)
	}
	final, data = list("LIST")
	lines := sorted(data, 8)
	if final.Code != 226 || len(lines) != 3 {
		t.Fatalf("LIST: %q %q", final.String(), data)
	}
	if !strings.HasPrefix(lines[0], "-rw-r--r--") || !strings.HasSuffix(lines[0], " 5 Jan  2  2020 file.txt") {
		t.Errorf("LIST line %q", lines[0])
	}
	if !strings.HasSuffix(lines[1], " link -> file.txt") && !strings.HasSuffix(lines[1], " 5 Jan  2  2020 link") {
		t.Errorf("LIST line %q", lines[1])
	}
	if !strings.HasPrefix(lines[2], "d") || !strings.HasSuffix(lines[2], " sub dir") {
		t.Errorf("LIST line %q", lines[2])
	}
	final, data = list("LIST -la")
	if final.Code != 226 || len(strings.Split(strings.TrimSuffix(data, "\r\n"), "\r\n")) != 3 {
		t.Fatalf("LIST -la: %q %q", final.String(), data)
	}
	final, data = list("LIST file.txt")
	if final.Code != 226 || !strings.HasSuffix(strings.TrimSpace(data), " file.txt") {
		t.Fatalf("LIST file.txt: %q %q", final.String(), data)
	}
	if final, _ := list("LIST missing"); final.Code != gridftp.CodeFileUnavailable {
		t.Fatalf("LIST missing: %q", final.String())
	}
	c.send("STAT file.txt")
	if r := c.read(); r.Code != gridftp.CodeStatus || len(r.Lines) != 3 || !strings.HasSuffix(r.Lines[1], "file.txt") {
		t.Fatalf("STAT file.txt: %q", r.String())
	}
}
