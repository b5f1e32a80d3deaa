package core_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/service/core"
	"ferry/service/domain"
	"ferry/service/gridops"
	"ferry/service/secret"
	"ferry/service/sqlstore"
)

// newService is a core over a real SQLite store and real file
// operations, with users alice and bob.
func newService(t *testing.T) (*core.Service, domain.User, domain.User) {
	t.Helper()
	db, err := sqlstore.Open(t.Context(), filepath.Join(t.TempDir(), "ferry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	box, err := secret.New(bytes.Repeat([]byte{7}, secret.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	s := &core.Service{Store: db, Ops: &gridops.Ops{Timeout: 10 * time.Second}, Box: box}
	var users [2]domain.User
	for i, name := range []string{"alice", "bob"} {
		users[i] = domain.User{Name: name, PasswordHash: "x"}
		if err := db.CreateUser(t.Context(), &users[i]); err != nil {
			t.Fatal(err)
		}
	}
	return s, users[0], users[1]
}

// wantErr fails unless err has code and a message holding msg ("" and
// "": no error).
func wantErr(t *testing.T, err error, code, msg string) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("got %v; want no error", err)
		}
		return
	}
	if domain.ErrorCode(err) != code || !strings.Contains(domain.ErrorMessage(err), msg) {
		t.Fatalf("got %v (%s); want %s with %q", err, domain.ErrorCode(err), code, msg)
	}
}

func servers(uris ...string) []domain.ServerSpec {
	out := make([]domain.ServerSpec, len(uris))
	for i, u := range uris {
		out[i] = domain.ServerSpec{URI: u}
	}
	return out
}

// The rules of an endpoint spec: what a new endpoint must have, which
// servers and auth methods go together, how servers and MyProxy servers
// are written down.
func TestCreateEndpointRules(t *testing.T) {
	s, alice, _ := newService(t)
	tests := []struct {
		name      string
		spec      domain.EndpointSpec
		code, msg string
		auth      string   // of the endpoint made
		servers   []string // as stored
		myproxy   string
	}{
		{name: "no name", spec: domain.EndpointSpec{Servers: servers("ftp://h:2811")}, code: domain.EInvalid, msg: "needs a name and its servers"},
		{name: "no servers", spec: domain.EndpointSpec{Name: new("a")}, code: domain.EInvalid, msg: "needs a name and its servers"},
		{name: "plain", spec: domain.EndpointSpec{Name: new("plain"), Servers: servers("ftp://H.example:2811/")},
			auth: domain.AuthAnonymous, servers: []string{"ftp://H.example:2811"}},
		{name: "parts", spec: domain.EndpointSpec{Name: new("parts"), Servers: []domain.ServerSpec{{Host: "h.example", Port: 2812}}},
			auth: domain.AuthAnonymous, servers: []string{"ftp://h.example:2812"}},
		{name: "gsiftp makes gsi", spec: domain.EndpointSpec{Name: new("grid"), Servers: servers("gsiftp://h.example:2811")},
			auth: domain.AuthGSI, servers: []string{"gsiftp://h.example:2811"}},
		{name: "sshftp", spec: domain.EndpointSpec{Name: new("ssh"), Servers: servers("sshftp://h.example")},
			code: domain.EInvalid, msg: `scheme "sshftp" is not supported`},
		{name: "a path", spec: domain.EndpointSpec{Name: new("p"), Servers: servers("ftp://h.example:2811/data")},
			code: domain.EInvalid, msg: "is not a server's URL"},
		{name: "too many", spec: domain.EndpointSpec{Name: new("many"), Servers: servers(strings.Split(strings.Repeat("ftp://h:1 ", 17), " ")[:17]...)},
			code: domain.EInvalid, msg: "1 to 16 servers"},
		{name: "gsiftp with passwords", spec: domain.EndpointSpec{Name: new("mixed"), AuthMethod: new(domain.AuthPassword), Servers: servers("gsiftp://h:2811")},
			code: domain.EInvalid, msg: "auth method must be gsi"},
		{name: "myproxy on anonymous", spec: domain.EndpointSpec{Name: new("mp"), Servers: servers("ftp://h:2811"), MyProxyServer: new("mp.example")},
			code: domain.EInvalid, msg: "only a gsi endpoint names one"},
		{name: "myproxy spelt once", spec: domain.EndpointSpec{Name: new("mp2"), Servers: servers("gsiftp://h:2811"), MyProxyServer: new("MP.Example")},
			auth: domain.AuthGSI, servers: []string{"gsiftp://h:2811"}, myproxy: "mp.example:7512"},
		{name: "bad description", spec: domain.EndpointSpec{Name: new("d"), Servers: servers("ftp://h:2811"), Description: new("a\x00b")},
			code: domain.EInvalid, msg: "description: contains a control character"},
		{name: "empty servers", spec: domain.EndpointSpec{Name: new("x"), Servers: []domain.ServerSpec{}}, code: domain.EInvalid, msg: "1 to 16 servers"},
		{name: "bad name", spec: domain.EndpointSpec{Name: new("a#b"), Servers: servers("ftp://h:1")}, code: domain.EInvalid},
		{name: "gsi with ftp", spec: domain.EndpointSpec{Name: new("x"), Servers: servers("ftp://h:21"), AuthMethod: new(domain.AuthGSI)},
			code: domain.EInvalid, msg: "a gsi endpoint's servers are gsiftp://host:port"},
		{name: "gsi and ftp mixed", spec: domain.EndpointSpec{Name: new("x"), Servers: servers("gsiftp://h", "ftp://h")},
			code: domain.EInvalid, msg: "a gsi endpoint's servers are gsiftp://host:port"},
		{name: "gsi via a head node", spec: domain.EndpointSpec{Name: new("x"), Servers: servers("gsiftp://h"), Via: new("plain")},
			code: domain.EInvalid, msg: "cannot be reached through a head node"},
		{name: "sftp", spec: domain.EndpointSpec{Name: new("x"), Servers: servers("sftp://h:22")}, code: domain.EInvalid, msg: `scheme "sftp" is not supported`},
		{name: "an IPv6 zone", spec: domain.EndpointSpec{Name: new("x"), Servers: servers("ftp://[fe80::1%25eth0]:21")}, code: domain.EInvalid},
		{name: "port 0", spec: domain.EndpointSpec{Name: new("x"), Servers: []domain.ServerSpec{{Host: "h"}}}, code: domain.EInvalid},
		{name: "bad port", spec: domain.EndpointSpec{Name: new("x"), Servers: []domain.ServerSpec{{Host: "h", Port: 70000}}}, code: domain.EInvalid},
		{name: "credentials in the URI", spec: domain.EndpointSpec{Name: new("x"), Servers: servers("ftp://u:p@h:1")},
			code: domain.EInvalid, msg: "is not a server's URL"},
		{name: "auth method", spec: domain.EndpointSpec{Name: new("x"), Servers: servers("ftp://h:1"), AuthMethod: new("kerberos")},
			code: domain.EInvalid, msg: `auth method "kerberos": want one of`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := s.CreateEndpoint(t.Context(), alice, tc.spec)
			wantErr(t, err, tc.code, tc.msg)
			if err != nil {
				return
			}
			if v.Auth != tc.auth || strings.Join(v.Servers, " ") != strings.Join(tc.servers, " ") || v.MyProxyServer != tc.myproxy {
				t.Errorf("made %s %v %q; want %s %v %q", v.Auth, v.Servers, v.MyProxyServer, tc.auth, tc.servers, tc.myproxy)
			}
			if got, err := s.FindEndpoint(t.Context(), alice, v.ID); err != nil || got.ID != v.ID {
				t.Errorf("FindEndpoint: %v, %v", got.ID, err)
			}
		})
	}
}

// The rules of a change to an endpoint.
func TestUpdateEndpointRules(t *testing.T) {
	s, alice, _ := newService(t)
	if _, err := s.CreateEndpoint(t.Context(), alice, domain.EndpointSpec{Name: new("data"), Servers: servers("ftp://h:2811")}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		spec      domain.EndpointSpec
		code, msg string
	}{
		{"gsiftp to an anonymous endpoint", domain.EndpointSpec{Servers: servers("gsiftp://h")}, domain.EInvalid, "the endpoint's auth method must be gsi"},
		{"negative max_concurrent", domain.EndpointSpec{MaxConcurrent: new(-1)}, domain.EInvalid, "at most -1 concurrent tasks"},
		{"default directory with NUL", domain.EndpointSpec{DefaultDir: new("/a\x00")}, domain.EInvalid, ""},
		{"connect afterwards", domain.EndpointSpec{AuthMethod: new(domain.AuthConnect)}, domain.EInvalid, "from its creation on, or never"},
		{"via itself", domain.EndpointSpec{Via: new("data")}, domain.EInvalid, "cannot be reached through itself"},
		{"fine", domain.EndpointSpec{Description: new("the data"), MaxConcurrent: new(3)}, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := s.UpdateEndpoint(t.Context(), alice, "data", tc.spec)
			wantErr(t, err, tc.code, tc.msg)
			if err == nil && (v.Description != "the data" || v.MaxConcurrent != 3) {
				t.Errorf("updated to %q, %d", v.Description, v.MaxConcurrent)
			}
		})
	}
}

// Another user's private endpoint is not found, a public one is seen but
// not changed, and a head node cannot be deleted.
func TestEndpointVisibility(t *testing.T) {
	s, alice, bob := newService(t)
	ctx := t.Context()
	priv, err := s.CreateEndpoint(ctx, alice, domain.EndpointSpec{Name: new("priv"), Servers: servers("ftp://h:2811")})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := s.CreateEndpoint(ctx, alice, domain.EndpointSpec{Name: new("pub"), Servers: servers("ftp://h:2812"), Public: new(true)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateEndpoint(ctx, alice, domain.EndpointSpec{Name: new("inner"), Servers: servers("ftp://10.0.0.1:2811"), Via: new("priv")})
	wantErr(t, err, "", "")
	tests := []struct {
		name      string
		do        func() error
		code, msg string
	}{
		{"bob finds private", func() error { _, err := s.FindEndpoint(ctx, bob, priv.ID); return err }, domain.ENotFound, `no endpoint "` + priv.ID},
		{"bob finds by name", func() error { _, err := s.FindEndpoint(ctx, bob, "alice#priv"); return err }, domain.ENotFound, `no endpoint "alice#priv"`},
		{"bob finds public", func() error { _, err := s.FindEndpoint(ctx, bob, "alice#pub"); return err }, "", ""},
		{"bob changes public", func() error {
			_, err := s.UpdateEndpoint(ctx, bob, pub.ID, domain.EndpointSpec{Description: new("x")})
			return err
		},
			domain.EForbidden, "belongs to alice"},
		{"alice deletes head node", func() error { _, err := s.DeleteEndpoint(ctx, alice, "priv"); return err },
			domain.EConflict, "is the head node of alice#inner"},
		{"bob activates private", func() error {
			_, err := s.Activate(ctx, bob, priv.ID, domain.ActivateRequest{Username: "u", Password: "p"})
			return err
		}, domain.ENotFound, "no endpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, tc.do(), tc.code, tc.msg) })
	}
}

// Activation logs in to a real server: a wrong password is refused and
// stores nothing; the right one makes the file operations work until it
// is deactivated.
func TestActivateAndFileOps(t *testing.T) {
	s, alice, _ := newService(t)
	ctx := t.Context()
	_, fs := servertest.Root(t)
	addr := servertest.Serve(t, &server.Server{FS: fs, Auth: servertest.Users{"u": "pw"}})
	ep, err := s.CreateEndpoint(ctx, alice, domain.EndpointSpec{Name: new("site"), AuthMethod: new(domain.AuthPassword), Servers: servers("ftp://" + addr)})
	if err != nil {
		t.Fatal(err)
	}
	if ep.Activated || ep.ExpiresIn != 0 {
		t.Errorf("new endpoint activated %v for %d s", ep.Activated, ep.ExpiresIn)
	}
	_, err = s.Mkdir(ctx, alice, ep.ID, "/d")
	wantErr(t, err, domain.ENotActivated, "")
	_, err = s.Activate(ctx, alice, ep.ID, domain.ActivateRequest{Username: "u", Password: "wrong"})
	wantErr(t, err, domain.EInvalid, `endpoint alice#site refused the login of "u"`)
	if st, err := s.ActivationStatus(ctx, alice, ep.ID); err != nil || st.Activated {
		t.Fatalf("after a refused login: activated %v, %v", st.Activated, err)
	}
	res, err := s.Activate(ctx, alice, ep.ID, domain.ActivateRequest{Username: "u", Password: "pw", Lifetime: 3600})
	if err != nil || res.Code != "Activated" || res.ExpiresIn != 3600 {
		t.Fatalf("Activate: %+v, %v", res, err)
	}
	if p, err := s.Mkdir(ctx, alice, ep.ID, "//d"); err != nil || p != "/d" {
		t.Fatalf("Mkdir: %q, %v", p, err)
	}
	lst, err := s.List(ctx, alice, ep.ID, domain.ListRequest{Path: "/"})
	if err != nil || lst.Total != 1 || lst.Files[0].Name != "d" || lst.Files[0].Type != "dir" {
		t.Fatalf("List: %+v, %v", lst, err)
	}
	if from, to, err := s.Rename(ctx, alice, ep.ID, "/d", "/e", false); err != nil || from != "/d" || to != "/e" {
		t.Fatalf("Rename: %q %q, %v", from, to, err)
	}
	if _, n, err := s.Deactivate(ctx, alice, ep.ID); err != nil || n != 0 {
		t.Fatalf("Deactivate: %d, %v", n, err)
	}
	_, err = s.Mkdir(ctx, alice, ep.ID, "/f")
	wantErr(t, err, domain.ENotActivated, "")
}

// The rules of a submission, checked before a task is stored, and a
// submission ID used twice.
func TestSubmitRules(t *testing.T) {
	s, alice, bob := newService(t)
	ctx := t.Context()
	if _, err := s.CreateEndpoint(ctx, bob, domain.EndpointSpec{Name: new("private"), Servers: servers("ftp://h:2811")}); err != nil {
		t.Fatal(err)
	}
	_, fs := servertest.Root(t)
	addr := servertest.Serve(t, &server.Server{FS: fs, Anonymous: true})
	ep, err := s.CreateEndpoint(ctx, alice, domain.EndpointSpec{Name: new("a"), Servers: servers("ftp://" + addr)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Mkdir(ctx, alice, ep.ID, "/src"); err != nil {
		t.Fatal(err)
	}
	item := []domain.Item{{Src: "/src", Dst: "/dst", Recursive: true}}
	transfer := func(f func(*domain.TransferRequest)) domain.TransferRequest {
		r := domain.TransferRequest{Source: "a", Destination: ep.ID, Items: item}
		f(&r)
		return r
	}
	tests := []struct {
		name      string
		req       domain.TransferRequest
		code, msg string
	}{
		{"fine", transfer(func(*domain.TransferRequest) {}), "", ""},
		{"no items", transfer(func(r *domain.TransferRequest) { r.Items = nil }), domain.EInvalid, "no items"},
		{"bad tar", transfer(func(r *domain.TransferRequest) { r.Tar = "maybe" }), domain.EInvalid, `tar "maybe": want one of`},
		{"bad checksum", transfer(func(r *domain.TransferRequest) { r.ChecksumAlgorithm = "CRC99" }), domain.EInvalid, `checksum algorithm "CRC99"`},
		{"bad sync level", transfer(func(r *domain.TransferRequest) { r.SyncLevel = new(9) }), domain.EInvalid, "sync"},
		{"bad filter", transfer(func(r *domain.TransferRequest) { r.FilterRules = []domain.FilterRule{{Method: "keep", Name: "*"}} }),
			domain.EInvalid, `filter rule 1: method "keep"`},
		{"past deadline", transfer(func(r *domain.TransferRequest) { r.Deadline = time.Now().Add(-time.Hour) }), domain.EInvalid, "is in the past"},
		{"no source path", transfer(func(r *domain.TransferRequest) { r.Items = []domain.Item{{Dst: "/x"}} }), domain.EInvalid, "item 1 has no source path"},
		{"into itself", transfer(func(r *domain.TransferRequest) {
			r.Items = []domain.Item{{Src: "/src", Dst: "/src/in", Recursive: true}}
		}),
			domain.EInvalid, ""},
		{"missing source", transfer(func(r *domain.TransferRequest) { r.Items = []domain.Item{{Src: "/nothing", Dst: "/x"}} }),
			domain.ENotFound, ""},
		{"one place twice", transfer(func(r *domain.TransferRequest) {
			r.Destination = ""
			r.Destinations = []domain.DestinationSpec{{Endpoint: "a"}, {Endpoint: ep.ID, Paths: []string{"/dst/sub"}}}
		}), domain.EInvalid, "destinations 1 and 2 are one place"},
		{"no such endpoint", transfer(func(r *domain.TransferRequest) { r.Destination = "nope" }), domain.ENotFound, `no destination endpoint "nope"`},
		{"NUL in a path", transfer(func(r *domain.TransferRequest) { r.Items = []domain.Item{{Src: "/a\x00b", Dst: "/b"}} }), domain.EInvalid, "control character"},
		{"newline in a path", transfer(func(r *domain.TransferRequest) { r.Items = []domain.Item{{Src: "/a", Dst: "/b\nc"}} }), domain.EInvalid, "control character"},
		{"sync level 4", transfer(func(r *domain.TransferRequest) { r.SyncLevel = new(4) }), domain.EInvalid, "sync level 4"},
		{"sync level -1", transfer(func(r *domain.TransferRequest) { r.SyncLevel = new(-1) }), domain.EInvalid, "sync level -1"},
		{"filter glob", transfer(func(r *domain.TransferRequest) { r.FilterRules = []domain.FilterRule{{Method: "exclude", Name: "[a"}} }), domain.EInvalid, "glob"},
		{"filter type", transfer(func(r *domain.TransferRequest) {
			r.FilterRules = []domain.FilterRule{{Method: "exclude", Name: "x", Type: "socket"}}
		}), domain.EInvalid, `type "socket"`},
		{"label with newline", transfer(func(r *domain.TransferRequest) { r.Label = "a\nb" }), domain.EInvalid, "label: contains a control character"},
		{"long label", transfer(func(r *domain.TransferRequest) { r.Label = strings.Repeat("x", 129) }), domain.EInvalid, "label: longer than 128"},
		{"no source endpoint", transfer(func(r *domain.TransferRequest) { r.Source = "" }), domain.EInvalid, "no source endpoint given"},
		{"unknown UUID", transfer(func(r *domain.TransferRequest) { r.Destination = "6a1c2b9e-0000-4000-8000-000000000000" }),
			domain.ENotFound, "no destination endpoint"},
		{"another user's private endpoint", transfer(func(r *domain.TransferRequest) { r.Source = "bob#private" }),
			domain.ENotFound, `no source endpoint "bob#private"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.SubmitTransfer(ctx, alice, tc.req)
			wantErr(t, err, tc.code, tc.msg)
		})
	}
	req := transfer(func(r *domain.TransferRequest) { r.SubmissionID = "once" })
	first, created, err := s.SubmitTransfer(ctx, alice, req)
	if err != nil || !created {
		t.Fatalf("first submission: %v, %v", created, err)
	}
	again, created, err := s.SubmitTransfer(ctx, alice, req)
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("second submission: task %s created %v, %v; want task %s not created", again.ID, created, err, first.ID)
	}
	_, _, err = s.SubmitDelete(ctx, alice, domain.DeleteRequest{Endpoint: ep.ID, Paths: []string{"/"}})
	wantErr(t, err, domain.EInvalid, "the root of an endpoint cannot be deleted")
}

// A task as its user sees it: its endpoints' names, where its items are;
// cancelling it, and what a task that is over can no longer do.
func TestTaskViews(t *testing.T) {
	s, alice, bob := newService(t)
	ctx := t.Context()
	s.CheckWithin = -1 // no endpoint is asked
	if _, err := s.CreateEndpoint(ctx, alice, domain.EndpointSpec{Name: new("a"), Servers: servers("ftp://h:2811")}); err != nil {
		t.Fatal(err)
	}
	task, created, err := s.SubmitTransfer(ctx, alice, domain.TransferRequest{Source: "a", Destination: "a", Submission: domain.Submission{Label: "two"},
		Items: []domain.Item{{Src: "/d/x/1", Dst: "/e/1"}, {Src: "/d/y/2", Dst: "/e/f/2"}}})
	if err != nil || !created {
		t.Fatalf("SubmitTransfer: %v, %v", created, err)
	}
	v, err := s.Task(ctx, alice, task.ID)
	if err != nil || v.SrcName != "alice#a" || v.DstName != "alice#a" || v.SrcPath != "/d/" || v.DstPath != "/e/" || v.Label != "two" {
		t.Fatalf("Task: %+v, %v", v, err)
	}
	_, err = s.Task(ctx, bob, task.ID)
	wantErr(t, err, domain.ENotFound, "")
	vs, total, err := s.Tasks(ctx, alice, domain.TaskFilter{}, domain.Page{})
	if err != nil || total != 1 || vs[0].ID != task.ID || vs[0].SrcName != "alice#a" {
		t.Fatalf("Tasks: %d %+v, %v", total, vs, err)
	}
	wantErr(t, s.UpdateTask(ctx, alice, task.ID, new("a\nb"), nil), domain.EInvalid, "label: contains a control character")
	wantErr(t, s.UpdateTask(ctx, alice, task.ID, nil, new(time.Now().Add(-time.Minute))), domain.EInvalid, "is in the past")
	res, err := s.CancelTask(ctx, alice, task.ID, "")
	if err != nil || res.Code != "Canceled" {
		t.Fatalf("CancelTask: %+v, %v", res, err)
	}
	if v, err = s.Task(ctx, alice, task.ID); err != nil || !domain.Done(v.Status) {
		t.Fatalf("a canceled task that never ran: %s, %v", v.Status, err)
	}
	if res, err = s.CancelTask(ctx, alice, task.ID, ""); err != nil || res.Code != "TaskComplete" {
		t.Fatalf("CancelTask again: %+v, %v", res, err)
	}
	wantErr(t, s.UpdateTask(ctx, alice, task.ID, new("x"), nil), domain.EConflict, "it can no longer change")
	wantErr(t, s.ResumeTask(ctx, alice, task.ID), domain.EConflict, "")
}
