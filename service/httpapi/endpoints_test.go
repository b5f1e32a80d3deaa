package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"ferry/service/api"
	"ferry/service/domain"
)

func TestEndpoints(t *testing.T) {
	e := newEnv(t)
	alice, _ := e.user("alice")
	bob, bobTok := e.user("bob")
	ep, err := alice.CreateEndpoint(t.Context(), api.EndpointSpec{
		Name: new("data"), Description: new("Alice's data"),
		Servers:    []api.Server{{URI: "ftp://mover1.example:2811"}, {Hostname: "mover2.example", Port: 2812}},
		AuthMethod: new("password"), MaxConcurrent: new(4), DefaultDirectory: new("/~/"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := api.Endpoint{
		DataType: "endpoint", ID: ep.ID, DisplayName: "alice#data", Owner: "alice", Name: "data", Description: "Alice's data",
		Servers: []api.Server{
			{DataType: "server", Hostname: "mover1.example", Port: 2811, Scheme: "ftp", URI: "ftp://mover1.example:2811"},
			{DataType: "server", Hostname: "mover2.example", Port: 2812, Scheme: "ftp", URI: "ftp://mover2.example:2812"},
		},
		DefaultDirectory: "/~/", AuthMethod: "password", MaxConcurrent: 4, Created: ep.Created,
	}
	if !equalJSON(t, ep, want) {
		t.Fatalf("created %+v\nwant %+v", ep, want)
	}
	// By UUID, owner#name and plain name of one's own.
	for _, ref := range []string{ep.ID, "alice#data", "data"} {
		got, err := alice.Endpoint(t.Context(), ref)
		if err != nil || got.ID != ep.ID {
			t.Errorf("endpoint %q: %+v, %v", ref, got, err)
		}
	}
	_, err = alice.CreateEndpoint(t.Context(), api.EndpointSpec{Name: new("data"), Servers: []api.Server{{URI: "ftp://h:1"}}})
	wantAPIError(t, err, 409, "Conflict")

	// Bob sees nothing of a private endpoint, under any name.
	for _, ref := range []string{ep.ID, "alice#data"} {
		_, err := bob.Endpoint(t.Context(), ref)
		wantAPIError(t, err, 404, "NotFound")
		_, err = bob.UpdateEndpoint(t.Context(), ref, api.EndpointSpec{Public: new(true)})
		wantAPIError(t, err, 404, "NotFound")
		_, err = bob.DeleteEndpoint(t.Context(), ref)
		wantAPIError(t, err, 404, "NotFound")
		_, err = bob.ActivationRequirements(t.Context(), ref)
		wantAPIError(t, err, 404, "NotFound")
		_, err = bob.Activate(t.Context(), ref, api.Activate{Username: "carol", Password: "secret"})
		wantAPIError(t, err, 404, "NotFound")
		_, err = bob.Ls(t.Context(), ref, api.ListQuery{})
		wantAPIError(t, err, 404, "NotFound")
	}
	if _, err := bob.Endpoint(t.Context(), "data"); err == nil {
		t.Error("bob's plain name data found alice's endpoint")
	}
	// Made public, Bob sees it and may not change it.
	if ep, err = alice.UpdateEndpoint(t.Context(), "data", api.EndpointSpec{Public: new(true), Description: new("shared")}); err != nil || !ep.Public || ep.Description != "shared" || len(ep.Servers) != 2 {
		t.Fatalf("update: %+v, %v", ep, err)
	}
	if got, err := bob.Endpoint(t.Context(), "alice#data"); err != nil || got.Activated {
		t.Fatalf("bob: public endpoint %+v, %v", got, err)
	}
	_, err = bob.UpdateEndpoint(t.Context(), "alice#data", api.EndpointSpec{Public: new(false)})
	wantAPIError(t, err, 403, "Forbidden")
	_, err = bob.DeleteEndpoint(t.Context(), "alice#data")
	wantAPIError(t, err, 403, "Forbidden")

	addEndpoint(t, bob, "scratch", "anonymous", false)
	for _, tc := range []struct {
		q    api.EndpointQuery
		want string
	}{
		{api.EndpointQuery{}, "alice#data bob#scratch"},
		{api.EndpointQuery{Scope: api.ScopeMine}, "bob#scratch"},
		{api.EndpointQuery{Text: "SHARED"}, "alice#data"},
		{api.EndpointQuery{Page: api.Page{Limit: 1, Offset: 1}}, "bob#scratch"},
	} {
		l, err := bob.EndpointSearch(t.Context(), tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ep := range l.Data {
			names = append(names, ep.DisplayName)
		}
		if strings.Join(names, " ") != tc.want || l.Length != len(names) {
			t.Errorf("search %+v: %v (%+v), want %s", tc.q, names, l.PageInfo, tc.want)
		}
	}
	if a := e.raw("GET", "endpoint_search?filter_scope=everything", bobTok, nil); a.status != 400 {
		t.Errorf("bad scope: %d", a.status)
	}
	if r, err := alice.DeleteEndpoint(t.Context(), ep.ID); err != nil || r.Code != "Deleted" {
		t.Fatalf("delete: %+v, %v", r, err)
	}
	_, err = alice.Endpoint(t.Context(), ep.ID)
	wantAPIError(t, err, 404, "NotFound")
}

// A refused endpoint spec is answered 400 (the rules are core's, see
// service/core's TestCreateEndpointRules), a document that does not
// decode 400 too, one too big 413.
func TestEndpointSpecRefused(t *testing.T) {
	e := newEnv(t)
	alice, tok := e.user("alice")
	addEndpoint(t, alice, "data", "anonymous", false)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"no servers", "POST", "endpoint", `{"name":"x"}`, 400},
		{"gsiftp to an anonymous endpoint", "PUT", "endpoint/data", `{"DATA":[{"uri":"gsiftp://h"}]}`, 400},
		{"unknown field", "PUT", "endpoint/data", `{"owner":"bob"}`, 400},
		{"read-only field", "PUT", "endpoint/data", `{"activated":true}`, 400},
		{"wrong DATA_TYPE", "PUT", "endpoint/data", `{"DATA_TYPE":"task"}`, 400},
		{"body over MaxBody", "PUT", "endpoint/data", `{"description":"` + strings.Repeat("x", maxBody) + `"}`, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := e.raw(tc.method, tc.path, tok, strings.NewReader(tc.body))
			if ae := a.apiError(t); a.status != tc.status || ae.Message == "" {
				t.Fatalf("%d %+v, want %d", a.status, ae, tc.status)
			}
		})
	}
}

func TestActivation(t *testing.T) {
	e := newEnv(t)
	alice, _ := e.user("alice")
	ep := addEndpoint(t, alice, "data", "password", false)
	pub := addEndpoint(t, alice, "pub", "anonymous", true)
	if ep.Activated || ep.ExpiresIn != 0 || !pub.Activated || pub.ExpiresIn != -1 {
		t.Fatalf("before activation: %+v %+v", ep, pub)
	}
	req, err := alice.ActivationRequirements(t.Context(), "data")
	if err != nil || req.Activated || len(req.Data) != 2 || req.Data[0].Name != "username" || !req.Data[1].Private {
		t.Fatalf("requirements %+v, %v", req, err)
	}
	if req, err := alice.ActivationRequirements(t.Context(), "pub"); err != nil || !req.Activated || len(req.Data) != 0 {
		t.Fatalf("anonymous requirements %+v, %v", req, err)
	}
	_, err = alice.Ls(t.Context(), "data", api.ListQuery{})
	wantAPIError(t, err, 409, "NotActivated")

	// A task waiting for the activation.
	task, err := alice.Transfer(t.Context(), api.Transfer{SourceEndpoint: "data", DestinationEndpoint: "pub",
		Data: []api.TransferItem{{SourcePath: "/a", DestinationPath: "/b"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Claim(t.Context(), "w1", e.clock.Now(), time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.db.SetStatus(t.Context(), task.TaskID, "w1", domain.StatusInactive, domain.NiceNotActivated, nil, e.clock.Now(), nil); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		a      api.Activate
		status int
		msg    string
	}{
		{"wrong password", api.Activate{Username: "carol", Password: "guess"}, 400, "refused the login"},
		{"no password", api.Activate{Username: "carol"}, 400, "required"},
		{"lifetime too long", api.Activate{Username: "carol", Password: "secret", Lifetime: 365 * 86400}, 400, "lifetime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := alice.Activate(t.Context(), "data", tc.a)
			if ae := wantAPIError(t, err, tc.status, "BadRequest"); !strings.Contains(ae.Message, tc.msg) {
				t.Errorf("message %q, want %q in it", ae.Message, tc.msg)
			}
		})
	}
	res, err := alice.Activate(t.Context(), "alice#data", api.Activate{Username: "carol", Password: "secret", Lifetime: 3600})
	if err != nil || res.Code != "Activated" || res.ExpiresIn != 3600 || res.Resumed != 1 {
		t.Fatalf("activate: %+v, %v", res, err)
	}
	if got, err := alice.Task(t.Context(), task.TaskID); err != nil || got.Status != domain.StatusActive {
		t.Fatalf("task after activation: %+v, %v", got, err)
	}
	e.clock.Add(1800 * time.Second)
	if got, err := alice.Endpoint(t.Context(), "data"); err != nil || !got.Activated || got.ExpiresIn != 1800 {
		t.Fatalf("half way: %+v, %v", got, err)
	}
	e.ops.set(func(f *fakeOps) { f.dirs["/"] = nil })
	if _, err := alice.Ls(t.Context(), "data", api.ListQuery{}); err != nil || e.ops.lastCall() != "list / as carol" {
		t.Fatalf("ls with the activation: %v, last call %q", err, e.ops.lastCall())
	}
	// The stored login stops working: the caller is told to activate again.
	e.ops.set(func(f *fakeOps) { f.logins["carol"] = "changed" })
	_, err = alice.Ls(t.Context(), "data", api.ListQuery{})
	wantAPIError(t, err, 409, "NotActivated")
	e.ops.set(func(f *fakeOps) { f.logins["carol"] = "secret" })

	e.clock.Add(1801 * time.Second)
	if got, err := alice.Endpoint(t.Context(), "data"); err != nil || got.Activated || got.ExpiresIn != 0 {
		t.Fatalf("expired: %+v, %v", got, err)
	}
	_, err = alice.Ls(t.Context(), "data", api.ListQuery{})
	wantAPIError(t, err, 409, "NotActivated")

	if _, err := alice.Activate(t.Context(), "data", api.Activate{Username: "carol", Password: "secret"}); err != nil {
		t.Fatal(err)
	}
	if got, err := alice.Endpoint(t.Context(), "data"); err != nil || got.ExpiresIn != 12*3600 {
		t.Fatalf("default lifetime: %+v, %v", got, err)
	}
	if r, err := alice.Deactivate(t.Context(), "data"); err != nil || r.Code != "Deactivated" {
		t.Fatalf("deactivate: %+v, %v", r, err)
	}
	if got, err := alice.Endpoint(t.Context(), "data"); err != nil || got.Activated {
		t.Fatalf("deactivated: %+v, %v", got, err)
	}
	if r, err := alice.Activate(t.Context(), "pub", api.Activate{}); err != nil || r.Code != "AlreadyActivated" || r.ExpiresIn != -1 {
		t.Fatalf("anonymous activate: %+v, %v", r, err)
	}
	_, err = alice.Deactivate(t.Context(), "pub")
	wantAPIError(t, err, 400, "BadRequest")
}

func TestFileOperations(t *testing.T) {
	e := newEnv(t)
	alice, tok := e.user("alice")
	addEndpoint(t, alice, "data", "anonymous", false)
	mod := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	home := []domain.FileInfo{
		{Name: "b.txt", Type: "file", Size: 3, Permissions: "0644", User: "u", Group: "g", Modified: mod},
		{Name: ".hidden", Type: "file"},
		{Name: "a", Type: "dir"},
		{Name: "c", Type: "link"},
	}
	e.ops.set(func(f *fakeOps) { f.dirs["/home"], f.dirs["/home/"], f.dirs["/"] = home, home, nil })
	names := func(l api.FileList) string {
		var n []string
		for _, f := range l.Data {
			n = append(n, f.Name)
		}
		return strings.Join(n, " ")
	}
	for _, tc := range []struct {
		q    api.ListQuery
		want string
		path string
	}{
		{api.ListQuery{Path: "/home", ShowHidden: true}, ".hidden a b.txt c", "/home"},
		{api.ListQuery{Path: "/home/"}, "a b.txt c", "/home/"},
		{api.ListQuery{Path: "/home", Page: api.Page{Limit: 2, Offset: 1}}, "b.txt c", "/home"},
		{api.ListQuery{Path: "/home", Page: api.Page{Offset: 9}}, "", "/home"},
		{api.ListQuery{Path: "../../home"}, "a b.txt c", "/home"},
	} {
		l, err := alice.Ls(t.Context(), "data", tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if names(l) != tc.want || l.Path != tc.path || l.Total != 4-btoi(!tc.q.ShowHidden) {
			t.Errorf("ls %+v: %q in %s (%+v), want %q in %s", tc.q, names(l), l.Path, l.PageInfo, tc.want, tc.path)
		}
	}
	l, err := alice.Ls(t.Context(), "data", api.ListQuery{Path: "/home"})
	if err != nil {
		t.Fatal(err)
	}
	want := api.File{DataType: "file", Name: "b.txt", Type: "file", Size: 3, Permissions: "0644", User: "u", Group: "g", LastModified: mod}
	if l.Data[1] != want {
		t.Errorf("entry %+v, want %+v", l.Data[1], want)
	}
	// Without a path, ls lists the default directory.
	if l, err := alice.Ls(t.Context(), "data", api.ListQuery{}); err != nil || l.Path != "/" {
		t.Errorf("default directory: %+v, %v", l, err)
	}
	_, err = alice.Ls(t.Context(), "data", api.ListQuery{Path: "/missing"})
	wantAPIError(t, err, 404, "NotFound")

	if r, err := alice.Mkdir(t.Context(), "data", "/home/new/../made"); err != nil || r.Code != "DirectoryCreated" || r.DataType != "mkdir_result" || e.ops.lastCall() != "mkdir /home/made as anonymous" {
		t.Errorf("mkdir: %+v, %v, last call %q", r, err, e.ops.lastCall())
	}
	if r, err := alice.Rename(t.Context(), "data", "/a", "/b", false); err != nil || r.Code != "FileRenamed" || e.ops.lastCall() != "rename /a /b as anonymous" {
		t.Errorf("rename: %+v, %v, last call %q", r, err, e.ops.lastCall())
	}
	if _, err := alice.Rename(t.Context(), "data", "/a", "/b", true); err != nil || e.ops.lastCall() != "rename /a /b overwriting as anonymous" {
		t.Errorf("rename with overwrite: %v, last call %q", err, e.ops.lastCall())
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"ls path with NUL", "GET", "operation/endpoint/data/ls?path=/a%00b", "", 400},
		{"ls path with newline", "GET", "operation/endpoint/data/ls?path=/a%0Ab", "", 400},
		{"ls bad show_hidden", "GET", "operation/endpoint/data/ls?show_hidden=maybe", "", 400},
		{"ls bad orderby", "GET", "operation/endpoint/data/ls?orderby=size", "", 400},
		{"ls bad limit", "GET", "operation/endpoint/data/ls?limit=x", "", 400},
		{"mkdir without a path", "POST", "operation/endpoint/data/mkdir", `{}`, 400},
		{"mkdir path with NUL", "POST", "operation/endpoint/data/mkdir", `{"path":"/a\u0000"}`, 400},
		{"mkdir unknown field", "POST", "operation/endpoint/data/mkdir", `{"path":"/a","mode":"777"}`, 400},
		{"rename without new_path", "POST", "operation/endpoint/data/rename", `{"old_path":"/a"}`, 400},
		{"unknown endpoint", "POST", "operation/endpoint/nosuch/mkdir", `{"path":"/a"}`, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := e.raw(tc.method, tc.path, tok, strings.NewReader(tc.body))
			if ae := a.apiError(t); a.status != tc.status {
				t.Fatalf("%d %+v, want %d", a.status, ae, tc.status)
			}
		})
	}
	e.ops.set(func(f *fakeOps) { f.fail = domain.Errorf(domain.EUnavailable, "no server of the endpoint answers") })
	_, err = alice.Mkdir(t.Context(), "data", "/x")
	wantAPIError(t, err, 502, "Unavailable")
	e.ops.set(func(f *fakeOps) { f.fail = domain.Errorf(domain.EForbidden, "550 permission denied") })
	_, err = alice.Rename(t.Context(), "data", "/x", "/y", false)
	wantAPIError(t, err, 403, "Forbidden")
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
