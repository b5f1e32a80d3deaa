package gridops_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/service/domain"
	"ferry/service/gridops"
)

// startServer runs a ferry endpoint server over a temp root that accepts
// anonymous logins and alice/secret.
func startServer(t *testing.T) (url, root string) {
	t.Helper()
	root, fs := servertest.Root(t)
	srv := &server.Server{FS: fs, Anonymous: true, Auth: servertest.Users{"alice": "secret"}, DataTimeout: 5 * time.Second}
	return "ftp://" + servertest.Serve(t, srv), root
}

// deadURL is a server that does not answer.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	return "ftp://" + ln.Addr().String()
}

func write(t *testing.T, p, data string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

var alice = domain.Login{User: "alice", Password: "secret"}

func TestCheck(t *testing.T) {
	url, _ := startServer(t)
	dead := deadURL(t)
	ops := &gridops.Ops{Timeout: 5 * time.Second}
	for _, tc := range []struct {
		name    string
		servers []string
		auth    string
		login   domain.Login
		want    string // error code; "" for success
	}{
		{"password", []string{url}, domain.AuthPassword, alice, ""},
		{"wrong password", []string{url}, domain.AuthPassword, domain.Login{User: "alice", Password: "nope"}, domain.EUnauthorized},
		{"unknown user", []string{url}, domain.AuthPassword, domain.Login{User: "mallory", Password: "x"}, domain.EUnauthorized},
		{"anonymous ignores the login", []string{url}, domain.AuthAnonymous, domain.Login{User: "alice", Password: "nope"}, ""},
		{"first server dead, second answers", []string{dead, url}, domain.AuthPassword, alice, ""},
		{"no server answers", []string{dead, dead}, domain.AuthPassword, alice, domain.EUnavailable},
		{"no servers", nil, domain.AuthPassword, alice, domain.EUnavailable},
		{"not an ftp URL", []string{"http://example.org/"}, domain.AuthPassword, alice, domain.EInvalid},
		{"credentials in the URL", []string{strings.Replace(url, "ftp://", "ftp://u:p@", 1)}, domain.AuthPassword, alice, domain.EInvalid},
		{"no host (the port of a server here)", []string{"ftp://:" + url[strings.LastIndex(url, ":")+1:]}, domain.AuthPassword, alice, domain.EInvalid},
		{"a gsiftp:// server of a password endpoint", []string{strings.Replace(url, "ftp://", "gsiftp://", 1)}, domain.AuthPassword, alice, domain.EInvalid},
		{"control characters in the login", []string{url}, domain.AuthPassword, domain.Login{User: "alice\r\nDELE /x", Password: "secret"}, domain.EInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := domain.Endpoint{Owner: "o", Name: "ep", Servers: tc.servers, Auth: tc.auth}
			err := ops.Check(context.Background(), ep, tc.login)
			if got := code(err); got != tc.want {
				t.Fatalf("Check = %v (code %q), want code %q", err, got, tc.want)
			}
		})
	}
}

func code(err error) string {
	if err == nil {
		return ""
	}
	return domain.ErrorCode(err)
}

func TestOperations(t *testing.T) {
	url, root := startServer(t)
	ep := domain.Endpoint{Owner: "o", Name: "ep", Servers: []string{url}, Auth: domain.AuthPassword}
	ops := &gridops.Ops{Timeout: 5 * time.Second}
	ctx := context.Background()
	outside := t.TempDir() // a directory next to the root that no session may reach
	write(t, filepath.Join(outside, "secret"), "do not touch")
	write(t, filepath.Join(root, "dir", "a"), "aaa")
	write(t, filepath.Join(root, "dir", "c"), "ccc")
	write(t, filepath.Join(root, "dir", "sub", "b"), "b")
	os.Symlink(outside, filepath.Join(root, "out"))
	os.Symlink("dir", filepath.Join(root, "in"))
	var removed [2]int // the files (links among them) and directories a delete told
	count := func(dir bool) {
		if dir {
			removed[1]++
		} else {
			removed[0]++
		}
	}

	for _, tc := range []struct {
		name    string
		op      func() error
		want    string // error code; "" for success
		gone    string // a path under root that must be gone afterwards
		made    string // a path under root that must exist afterwards
		removed [2]int // the files and directories the op told it deleted
	}{
		{name: "mkdir", op: func() error { return ops.Mkdir(ctx, ep, alice, "/new") }, made: "new"},
		{name: "mkdir existing", op: func() error { return ops.Mkdir(ctx, ep, alice, "/dir") }, want: domain.EConflict},
		{name: "mkdir in missing parent", op: func() error { return ops.Mkdir(ctx, ep, alice, "/no/such") }, want: domain.ENotFound},
		{name: "mkdir through a link leading out", op: func() error { return ops.Mkdir(ctx, ep, alice, "/out/x") }, want: domain.EForbidden},
		{name: "mkdir climbing out is confined", op: func() error { return ops.Mkdir(ctx, ep, alice, "/../../../climbed") }, made: "climbed"},
		{name: "rename", op: func() error { return ops.Rename(ctx, ep, alice, "/dir/a", "/dir/a2", false) }, gone: "dir/a", made: "dir/a2"},
		{name: "rename missing", op: func() error { return ops.Rename(ctx, ep, alice, "/nope", "/x", false) }, want: domain.ENotFound},
		{name: "rename out of the root", op: func() error { return ops.Rename(ctx, ep, alice, "/dir/a2", "/out/stolen", false) }, want: domain.EForbidden},
		{name: "rename from outside the root", op: func() error { return ops.Rename(ctx, ep, alice, "/out/secret", "/got", false) }, want: domain.EForbidden},
		{name: "rename onto a file", op: func() error { return ops.Rename(ctx, ep, alice, "/dir/c", "/dir/a2", false) }, want: domain.EConflict, made: "dir/c"},
		{name: "rename onto a directory", op: func() error { return ops.Rename(ctx, ep, alice, "/dir/c", "/dir/sub", false) }, want: domain.EConflict, made: "dir/c"},
		{name: "rename onto a file, overwriting", op: func() error { return ops.Rename(ctx, ep, alice, "/dir/c", "/dir/a2", true) }, gone: "dir/c", made: "dir/a2"},
		{name: "command smuggled in a path", op: func() error { return ops.Mkdir(ctx, ep, alice, "/x\r\nDELE /dir/a2") }, want: domain.EInvalid},
		{name: "delete a directory without recursive", op: func() error { return ops.Delete(ctx, ep, alice, "/dir", false, count) }, want: domain.EInvalid},
		{name: "delete missing", op: func() error { return ops.Delete(ctx, ep, alice, "/nope", false, count) }, want: domain.ENotFound},
		{name: "delete the root", op: func() error { return ops.Delete(ctx, ep, alice, "/../", true, count) }, want: domain.EForbidden},
		{name: "delete through a link leading out", op: func() error { return ops.Delete(ctx, ep, alice, "/out/secret", false, count) }, want: domain.EForbidden},
		{name: "delete a link leading out removes only the link", op: func() error { return ops.Delete(ctx, ep, alice, "/out", true, count) }, gone: "out", removed: [2]int{1, 0}},
		{name: "delete a link to a directory keeps the directory", op: func() error { return ops.Delete(ctx, ep, alice, "/in", true, count) }, gone: "in", made: "dir/sub/b", removed: [2]int{1, 0}},
		{name: "delete a file", op: func() error { return ops.Delete(ctx, ep, alice, "/dir/a2", false, count) }, gone: "dir/a2", removed: [2]int{1, 0}},
		{name: "delete recursively", op: func() error { return ops.Delete(ctx, ep, alice, "/dir", true, count) }, gone: "dir", removed: [2]int{1, 2}},
		{name: "wrong password", op: func() error {
			return ops.Mkdir(ctx, ep, domain.Login{User: "alice", Password: "x"}, "/never")
		}, want: domain.EUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			removed = [2]int{}
			err := tc.op()
			if got := code(err); got != tc.want {
				t.Fatalf("got %v (code %q), want code %q", err, got, tc.want)
			}
			if removed != tc.removed {
				t.Errorf("told %d files and %d directories deleted, want %d and %d", removed[0], removed[1], tc.removed[0], tc.removed[1])
			}
			if err != nil && !strings.Contains(err.Error(), "/") && !strings.Contains(err.Error(), "o#ep") {
				t.Errorf("message %q names neither the path nor the endpoint", err)
			}
			if tc.gone != "" {
				if _, err := os.Lstat(filepath.Join(root, tc.gone)); !os.IsNotExist(err) {
					t.Errorf("%s still exists (%v)", tc.gone, err)
				}
			}
			if tc.made != "" {
				if _, err := os.Stat(filepath.Join(root, tc.made)); err != nil {
					t.Errorf("%s missing: %v", tc.made, err)
				}
			}
			if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "do not touch" {
				t.Fatalf("the file outside the root was touched: %q %v", b, err)
			}
		})
	}
}

// list collects the entries ops.List gives.
func list(ctx context.Context, ops *gridops.Ops, ep domain.Endpoint, l domain.Login, p string) ([]domain.FileInfo, error) {
	var out []domain.FileInfo
	err := ops.List(ctx, ep, l, p, func(fi domain.FileInfo) error {
		out = append(out, fi)
		return nil
	})
	return out, err
}

func TestList(t *testing.T) {
	url, root := startServer(t)
	ep := domain.Endpoint{Owner: "o", Name: "ep", Servers: []string{url}, Auth: domain.AuthAnonymous}
	ops := &gridops.Ops{Timeout: 5 * time.Second}
	mtime := time.Date(2021, 2, 3, 4, 5, 6, 0, time.UTC)
	write(t, filepath.Join(root, "d", "f.txt"), "hello")
	os.Chtimes(filepath.Join(root, "d", "f.txt"), mtime, mtime)
	os.Chmod(filepath.Join(root, "d", "f.txt"), 0o640)
	os.Mkdir(filepath.Join(root, "d", "sub"), 0o750)
	os.Symlink("/etc", filepath.Join(root, "d", "out"))

	for _, tc := range []struct {
		path string
		want []domain.FileInfo // names, types, sizes and permissions
		code string
	}{
		{path: "/d", want: []domain.FileInfo{
			{Name: "f.txt", Type: "file", Size: 5, Permissions: "0640", Modified: mtime},
			{Name: "out", Type: "link"},
			{Name: "sub", Type: "dir", Permissions: "0750"},
		}},
		{path: "/d/sub", want: nil},
		{path: "/nope", code: domain.ENotFound},
		{path: "/d/f.txt", code: domain.EInvalid},
		{path: "/../../../etc", code: domain.ENotFound}, // confined: the root has no etc
		{path: "/d/out", code: domain.EInvalid},         // the link itself, not what it leads to
		{path: "/d/out/", code: domain.EInvalid},
		{path: "/d/out/ssh", code: domain.EForbidden},
	} {
		t.Run(tc.path, func(t *testing.T) {
			got, err := list(context.Background(), ops, ep, domain.Login{}, tc.path)
			if code(err) != tc.code {
				t.Fatalf("List = %v (code %q), want code %q", err, code(err), tc.code)
			}
			sort.Slice(got, func(i, j int) bool { return got[i].Name < got[j].Name })
			if len(got) != len(tc.want) {
				t.Fatalf("List = %+v, want %+v", got, tc.want)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Name != w.Name || g.Type != w.Type || g.Size != w.Size ||
					(w.Permissions != "" && g.Permissions != w.Permissions) ||
					(!w.Modified.IsZero() && !g.Modified.Equal(w.Modified)) {
					t.Errorf("entry %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// TestBehindRelay: every operation that would connect to an endpoint
// behind a relay is refused, naming the head node, and nothing connects
// to its server; the engine is given its address for the relay only.
func TestBehindRelay(t *testing.T) {
	var dials atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			c.Close()
		}
	}()
	ep := domain.Endpoint{Owner: "alice", Name: "inner", Servers: []string{"ftp://" + ln.Addr().String()}, Auth: domain.AuthPassword,
		Via: "0b9a1c3e-0000-4000-8000-000000000001", ViaName: "alice#head"}
	other := domain.Endpoint{Owner: "alice", Name: "other", Servers: []string{"ftp://" + ln.Addr().String()}, Auth: domain.AuthAnonymous}
	ops := &gridops.Ops{Timeout: 5 * time.Second}
	ctx := context.Background()
	for _, tc := range []struct {
		name, what string
		call       func() error
	}{
		{"check", "check a login", func() error { return ops.Check(ctx, ep, alice) }},
		{"list", "list", func() error { _, err := list(ctx, ops, ep, alice, "/"); return err }},
		{"mkdir", "make a directory", func() error { return ops.Mkdir(ctx, ep, alice, "/d") }},
		{"rename", "rename", func() error { return ops.Rename(ctx, ep, alice, "/a", "/b", false) }},
		{"delete", "delete", func() error { return ops.Delete(ctx, ep, alice, "/a", false, nil) }},
		{"transfer from it", "be a transfer's source", func() error {
			return ops.CheckTransfer(ctx, ep, other, alice, domain.Login{}, []domain.Item{{Src: "/a", Dst: "/b"}}, domain.Options{})
		}},
		{"servers", "reach it", func() error { _, err := gridops.Servers(ep, nil, nil); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if code(err) != domain.EInvalid || !strings.Contains(err.Error(), "alice#head") || !strings.Contains(err.Error(), tc.what) {
				t.Fatalf("%v (code %q), want %s naming alice#head and %q", err, code(err), domain.EInvalid, tc.what)
			}
		})
	}
	e, err := gridops.Relayed(ep, 0, alice)
	if err != nil || e.Addr != ln.Addr().String() || e.User != "alice" || e.Password != "secret" {
		t.Fatalf("Relayed = %+v, %v", e, err)
	}
	if n := dials.Load(); n != 0 {
		t.Fatalf("%d connections to the server of an endpoint behind a relay, want none", n)
	}
}
