//go:build interop

package interop

// Other FTP clients: gfal2 (the library CERN FTS3 and Rucio use), lftp and
// curl. gfal2's gridftp plugin takes ftp:// URLs for clear-text logins
// (gsiftp:// always attempts GSI and fails without a proxy certificate).

import (
	"context"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// seedListing creates the directory the listing tests look at and returns
// the names it holds.
func seedListing(t *testing.T, srv server) []string {
	t.Helper()
	dir := srv.Path("list")
	writeRandomFile(t, filepath.Join(dir, "f1.dat"), 200<<10+1)
	writeRandomFile(t, filepath.Join(dir, "empty.dat"), 0)
	writeRandomFile(t, filepath.Join(dir, "name with space.dat"), 1234)
	writeRandomFile(t, filepath.Join(dir, "sub", "inner.dat"), 10)
	return []string{"empty.dat", "f1.dat", "name with space.dat", "sub"}
}

// names turns listing output (one name per line) into a sorted set, dropping
// "." and "..", blank lines and a trailing "/" on directories.
func names(out string) []string {
	var ns []string
	for _, l := range strings.Split(out, "\n") {
		// lftp's cls writes a stray "\r" (its status line) inside lines.
		l = strings.ReplaceAll(l, "\r", "")
		l = strings.TrimSuffix(strings.TrimRight(l, " \t"), "/")
		if l == "" || l == "." || l == ".." {
			continue
		}
		ns = append(ns, l)
	}
	slices.Sort(ns)
	return slices.Compact(ns)
}

// checkLongListing checks that every name ends some line of a long listing.
func checkLongListing(t *testing.T, what, out string, want []string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r") // gfal-ls -l ends lines with a tab
	}
	for _, n := range want {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasSuffix(l, " "+n) }) {
			t.Errorf("%s: no line for %q in:\n%s", what, n, out)
		}
	}
}

// gfal runs a gfal2 command, failing the test on error.
func gfal(t *testing.T, name string, args ...string) string {
	t.Helper()
	return mustRun(t, name, args...)
}

func TestGCTGfal(t *testing.T) {
	needTools(t, "gfal-copy", "gfal-ls", "gfal-sum")
	testGfal(t, startGCT)
}

func TestFerryGfal(t *testing.T) {
	needTools(t, "gfal-copy", "gfal-ls", "gfal-sum")
	testGfal(t, startFerry)
}

// testGfal: gfal-ls of a directory, gfal-copy both ways (one with ADLER32
// verification, which asks the server for CKSM), and gfal-sum ADLER32 and
// MD5 against locally computed values.
func testGfal(t *testing.T, start starter) {
	srv := start(t)
	want := seedListing(t, srv)
	src := srv.Path("list/f1.dat")

	t.Run("ls", func(t *testing.T) {
		out := gfal(t, "gfal-ls", srv.URL("list/"))
		if got := names(out); !slices.Equal(got, want) {
			t.Errorf("gfal-ls names %q, want %q\n%s", got, want, out)
		}
		out = gfal(t, "gfal-ls", "-l", srv.URL("list/"))
		checkLongListing(t, "gfal-ls -l", out, want)
	})
	t.Run("copy-get", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "got.dat")
		gfal(t, "gfal-copy", "-t", "60", srv.URL("list/f1.dat"), fileURL(out))
		if err := compareFiles(src, out); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("copy-put", func(t *testing.T) {
		local := filepath.Join(t.TempDir(), "up.dat")
		writeRandomFile(t, local, 3<<20+5)
		gfal(t, "gfal-copy", "-t", "60", fileURL(local), srv.URL("gfal-up.dat"))
		if err := compareFiles(local, srv.Path("gfal-up.dat")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("copy-put-adler32", func(t *testing.T) {
		local := filepath.Join(t.TempDir(), "up.dat")
		writeRandomFile(t, local, 1<<20+5)
		gfal(t, "gfal-copy", "-t", "60", "-K", "ADLER32", fileURL(local), srv.URL("gfal-up-cksm.dat"))
		if err := compareFiles(local, srv.Path("gfal-up-cksm.dat")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("copy-get-adler32", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "got.dat")
		gfal(t, "gfal-copy", "-t", "60", "-K", "ADLER32", srv.URL("list/f1.dat"), fileURL(out))
		if err := compareFiles(src, out); err != nil {
			t.Fatal(err)
		}
	})
	for _, c := range []struct {
		alg  string
		want func(testing.TB, string) string
	}{
		{"ADLER32", adler32File},
		{"MD5", md5File},
	} {
		t.Run("sum-"+c.alg, func(t *testing.T) {
			for _, rel := range []string{"list/f1.dat", "list/empty.dat"} {
				out := gfal(t, "gfal-sum", srv.URL(rel), c.alg)
				f := strings.Fields(out)
				if len(f) == 0 {
					t.Fatalf("gfal-sum %s: no output", rel)
				}
				if got, want := strings.ToLower(f[len(f)-1]), c.want(t, srv.Path(rel)); got != want {
					t.Errorf("gfal-sum %s %s = %s, want %s", rel, c.alg, got, want)
				}
			}
		})
	}
}

// lftpScript runs an lftp script against srv. The settings make lftp fail
// fast instead of retrying for minutes, and skip its AUTH TLS attempt.
func lftpScript(t *testing.T, srv server, script string) string {
	t.Helper()
	full := strings.Join([]string{
		"set cmd:fail-exit yes",
		"set ftp:ssl-allow no",
		"set net:max-retries 1",
		"set net:timeout 15",
		"set net:reconnect-interval-base 1",
		"set xfer:clobber on",
		"open ftp://" + srv.Addr(),
		"user anonymous ferry@",
		script,
	}, "\n")
	return mustRun(t, "lftp", "-c", full)
}

// urlPath is the decoded path of srv.URL(rel), as FTP commands take it.
func urlPath(t *testing.T, srv server, rel string) string {
	t.Helper()
	u, err := url.Parse(srv.URL(rel))
	if err != nil {
		t.Fatal(err)
	}
	return u.Path
}

// lftpQuote double-quotes an lftp argument.
func lftpQuote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

func TestGCTLftp(t *testing.T)   { needTools(t, "lftp"); testLftp(t, startGCT) }
func TestFerryLftp(t *testing.T) { needTools(t, "lftp"); testLftp(t, startFerry) }

// testLftp: cls (MLSD when FEAT offers MLST), ls (LIST), get and put.
func testLftp(t *testing.T, start starter) {
	srv := start(t)
	want := seedListing(t, srv)
	dir := urlPath(t, srv, "list/")

	t.Run("cls", func(t *testing.T) {
		out := lftpScript(t, srv, "cls -1 -B "+lftpQuote(dir))
		if got := names(out); !slices.Equal(got, want) {
			t.Errorf("cls names %q, want %q\n%s", got, want, out)
		}
	})
	t.Run("ls", func(t *testing.T) {
		out := lftpScript(t, srv, "ls "+lftpQuote(dir))
		checkLongListing(t, "lftp ls", out, want)
	})
	t.Run("get", func(t *testing.T) {
		local := t.TempDir()
		lftpScript(t, srv, "lcd "+lftpQuote(local)+"\n"+
			"get "+lftpQuote(urlPath(t, srv, "list/f1.dat"))+" -o got.dat\n"+
			"get "+lftpQuote(urlPath(t, srv, "list/name with space.dat"))+" -o spaced.dat\n"+
			"get "+lftpQuote(urlPath(t, srv, "list/empty.dat"))+" -o empty.dat")
		for name, remote := range map[string]string{"got.dat": "f1.dat", "spaced.dat": "name with space.dat", "empty.dat": "empty.dat"} {
			if err := compareFiles(srv.Path("list/"+remote), filepath.Join(local, name)); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("put", func(t *testing.T) {
		local := filepath.Join(t.TempDir(), "up.dat")
		writeRandomFile(t, local, 1<<20+17)
		lftpScript(t, srv, "put "+lftpQuote(local)+" -o "+lftpQuote(urlPath(t, srv, "lftp-up.dat")))
		if err := compareFiles(local, srv.Path("lftp-up.dat")); err != nil {
			t.Fatal(err)
		}
	})
}

// curl runs curl quietly (errors still shown) with a time limit.
func curl(t *testing.T, extra []string, args ...string) string {
	t.Helper()
	out, err := runTool(context.Background(), cmdTimeout, "", "curl",
		append(append([]string{"-sS", "--max-time", "60"}, extra...), args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// GCT quirk: curl sends EPSV before TYPE I, and GCT keeps the type that was
// current at EPSV/PASV time for that data channel, so binary files come back
// mangled as ASCII. Sending TYPE I first (-Q) works around it. ferry must
// honour TYPE whenever it arrives before RETR/STOR, so its test sends no -Q.
func TestGCTCurl(t *testing.T) {
	needTools(t, "curl")
	testCurl(t, startGCT, []string{"-Q", "TYPE I"})
}

func TestFerryCurl(t *testing.T) { needTools(t, "curl"); testCurl(t, startFerry, nil) }

// testCurl: download (CWD per directory, EPSV, TYPE I, SIZE, RETR), LIST,
// NLST, upload (STOR).
func testCurl(t *testing.T, start starter, extra []string) {
	srv := start(t)
	want := seedListing(t, srv)
	t.Run("get", func(t *testing.T) {
		for _, rel := range []string{"list/f1.dat", "list/name with space.dat", "list/empty.dat"} {
			out := filepath.Join(t.TempDir(), "got.dat")
			curl(t, extra, "-o", out, srv.HomeURL(rel))
			if err := compareFiles(srv.Path(rel), out); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("list", func(t *testing.T) {
		out := curl(t, extra, srv.HomeURL("list/"))
		checkLongListing(t, "curl LIST", out, want)
	})
	t.Run("nlst", func(t *testing.T) {
		out := curl(t, extra, "--list-only", srv.HomeURL("list/"))
		if got := names(out); !slices.Equal(got, want) {
			t.Errorf("curl NLST names %q, want %q\n%s", got, want, out)
		}
	})
	t.Run("put", func(t *testing.T) {
		local := filepath.Join(t.TempDir(), "up.dat")
		writeRandomFile(t, local, 1<<20+3)
		curl(t, extra, "-T", local, srv.HomeURL("curl-up.dat"))
		if err := compareFiles(local, srv.Path("curl-up.dat")); err != nil {
			t.Fatal(err)
		}
	})
}
