//go:build interop

package interop

// Resource bounds of a `ferry gridftp` process: no size or offset makes a
// file past --max-file-size (ESTO A 2^50, REST 2^50 + STOR, SITE TRNC 2^62
// made petabyte sparse files); a checksum of a sparse file hashes no more
// than --max-checksum-holes of holes; a session asked for 256 parallel
// streams by a peer that does not read stays within its bounds.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
)

const pebibyte = int64(1) << 50

// wantTooLarge checks a raw client's reply for FILE_TOO_LARGE.
func wantTooLarge(t *testing.T, what string, code int, msg string) {
	t.Helper()
	if code != 501 || !strings.Contains(msg, "c=FILE_TOO_LARGE") {
		t.Errorf("%s: %d %s, want 501 FILE_TOO_LARGE", what, code, msg)
	}
}

func TestFerryMaxFileSize(t *testing.T) {
	needTools(t)
	srv := startFerryConfig(t, ferryConfig{Anonymous: true, Args: []string{"--max-file-size", "1M"}})
	writeFile(t, srv.Path("f"), []byte("hello"))
	small, big := filepath.Join(t.TempDir(), "small"), filepath.Join(t.TempDir(), "big")
	writeRandomFile(t, small, 512<<10)
	writeRandomFile(t, big, 2<<20)

	c := dialFTP(t, srv.Addr())
	c.login("anonymous", "ferry@")
	for _, line := range []string{fmt.Sprint("REST ", pebibyte), fmt.Sprint("ALLO ", pebibyte),
		fmt.Sprint("SITE TRNC ", int64(1)<<62, " f"), fmt.Sprint("REST 0-", pebibyte)} {
		code, msg := c.cmd(line)
		wantTooLarge(t, line, code, msg)
	}
	code, msg := c.transferOut(fmt.Sprint("ESTO A ", pebibyte, " esto"), []byte("x"))
	wantTooLarge(t, "ESTO A 2^50", code, msg)
	if code, msg := c.cmd("MODE E"); code != 200 {
		t.Fatalf("MODE E: %d %s", code, msg)
	}
	hdr := make([]byte, gridftp.HeaderLen)
	gridftp.Header{Count: 1, Offset: uint64(pebibyte)}.Put(hdr)
	eof := make([]byte, gridftp.HeaderLen)
	gridftp.Header{Desc: gridftp.DescEOD | gridftp.DescEOF, Offset: 1}.Put(eof)
	code, msg = c.transferOut("STOR far", append(append(hdr, 'x'), eof...))
	wantTooLarge(t, "a MODE E block at 2^50", code, msg)

	// globus-url-copy: a file past the limit fails, with the reason.
	out, err := gucErr(fileURL(big), srv.URL("big"))
	if err == nil || !strings.Contains(out, "FILE_TOO_LARGE") {
		t.Errorf("globus-url-copy of 2 MiB to a 1 MiB server: %v\n%s", err, out)
	}
	out, err = gucErr("-p", "4", fileURL(big), srv.URL("big4"))
	if err == nil || !strings.Contains(out, "FILE_TOO_LARGE") {
		t.Errorf("globus-url-copy -p 4 of 2 MiB to a 1 MiB server: %v\n%s", err, out)
	}
	guc(t, "-p", "4", fileURL(small), srv.URL("small"))
	if err := compareFiles(small, srv.Path("small")); err != nil {
		t.Error(err)
	}
	for _, name := range []string{"f", "esto", "far", "big", "big4"} {
		if fi, err := os.Stat(srv.Path(name)); err == nil && fi.Size() > 1<<20 {
			t.Errorf("%s is %d bytes", name, fi.Size())
		}
	}

	// The default limit: globus-url-copy -off 2^50 sends ESTO A 2^50.
	dflt := startFerry(t)
	out, err = gucErr("-off", strconv.FormatInt(pebibyte, 10), "-len", "5", fileURL(small), dflt.URL("far"))
	if err == nil || !strings.Contains(out, "FILE_TOO_LARGE") {
		t.Errorf("globus-url-copy -off 2^50: %v\n%s", err, out)
	}
	if fi, err := os.Stat(dflt.Path("far")); err == nil && fi.Size() > 1<<40 {
		t.Errorf("far is %d bytes", fi.Size())
	}
}

// TestFerryChecksumHoles: gfal-sum of a terabyte of holes is refused at
// once instead of hashing zeros; a file with data is summed.
func TestFerryChecksumHoles(t *testing.T) {
	needTools(t, "gfal-sum")
	srv := startFerryConfig(t, ferryConfig{Anonymous: true})
	writeFile(t, srv.Path("huge"), []byte("data"))
	if err := os.Truncate(srv.Path("huge"), 1<<40); err != nil {
		t.Fatal(err)
	}
	writeRandomFile(t, srv.Path("dense"), 3<<20)
	start := time.Now()
	out, err := runTool(context.Background(), cmdTimeout, "", "gfal-sum", srv.URL("huge"), "ADLER32")
	if err == nil {
		t.Errorf("gfal-sum of a terabyte of holes: %s", out)
	}
	c := dialFTP(t, srv.Addr())
	c.login("anonymous", "ferry@")
	if code, msg := c.cmd("CKSM MD5 0 -1 huge"); code != 504 || !strings.Contains(msg, "sparse") {
		t.Errorf("CKSM of a terabyte of holes: %d %s", code, msg)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("refusing took %v: the holes were hashed", d)
	}
	if out := gfal(t, "gfal-sum", srv.URL("dense"), "ADLER32"); !strings.Contains(out, "dense") {
		t.Errorf("gfal-sum dense: %q", out)
	}
}

// rss is the resident memory of process pid.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// TestFerrySessionMemory: a client asks for 256 parallel streams of a
// large file and never reads them. The server opens 64 and its memory
// grows by its buffers (32 MiB), not by a buffer a stream.
func TestFerrySessionMemory(t *testing.T) {
	needTools(t)
	srv := startFerryConfig(t, ferryConfig{Anonymous: true})
	writeFile(t, srv.Path("huge"), nil)
	if err := os.Truncate(srv.Path("huge"), 1<<36); err != nil {
		t.Fatal(err)
	}
	pid := srv.current().cmd.Process.Pid
	c := dialFTP(t, srv.Addr())
	c.login("anonymous", "ferry@")
	for _, line := range []string{"MODE E", "OPTS RETR Parallelism=256,256,256;"} {
		if code, msg := c.cmd(line); code != 200 {
			t.Fatalf("%s: %d %s", line, code, msg)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if code, msg := c.cmd(fmt.Sprintf("PORT 127,0,0,1,%d,%d", port>>8, port&255)); code != 200 {
		t.Fatalf("PORT: %d %s", code, msg)
	}
	before := rss(t, pid)
	if code, msg := c.cmd("RETR huge"); code != 150 {
		t.Fatalf("RETR: %d %s", code, msg)
	}
	var conns []net.Conn
	for {
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(2 * time.Second))
		dc, err := ln.Accept()
		if err != nil {
			break
		}
		defer dc.Close()
		conns = append(conns, dc) // never read
	}
	time.Sleep(time.Second)
	grown := rss(t, pid) - before
	t.Logf("RETR over %d streams nobody reads: RSS +%d MiB", len(conns), grown>>20)
	if len(conns) != 64 {
		t.Errorf("the server opened %d data connections, want 64", len(conns))
	}
	if grown > 64<<20 {
		t.Errorf("RSS grew by %d MiB", grown>>20)
	}
	if code, msg := c.cmd("ABOR"); code != 426 {
		t.Errorf("ABOR: %d %s", code, msg)
	}
}
