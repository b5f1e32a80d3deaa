package httpapi_test

import (
	"io"
	"strings"
	"testing"

	"ferry/service/api"
)

// TestEndpointVia: an endpoint may name, by ID or owner#name, the endpoint
// through which alone it is reached; the document shows it; the refusals
// of a via that cannot be, and of every operation that would need the
// service to reach the endpoint, name the head node.
func TestEndpointVia(t *testing.T) {
	e := newEnv(t, func(s *setup) {
		s.Agents, s.RelayURL, s.CAPin = agents{}, "tcp://203.0.113.7:8443", "PIN"
	})
	alice, aliceTok := e.user("alice")
	bob, _ := e.user("bob")
	head := addEndpoint(t, alice, "head", "anonymous", false)
	addEndpoint(t, alice, "src", "anonymous", false)
	inner, err := alice.CreateEndpoint(t.Context(), api.EndpointSpec{Name: new("inner"),
		Servers: []api.Server{{URI: "ftp://10.1.0.7:2811"}}, AuthMethod: new("password"), Via: new("alice#head")})
	if err != nil {
		t.Fatal(err)
	}
	if inner.Via != head.ID || inner.ViaDisplayName != "alice#head" {
		t.Fatalf("created: via %q (%q), want %s (alice#head)", inner.Via, inner.ViaDisplayName, head.ID)
	}
	if got, err := alice.Endpoint(t.Context(), "inner"); err != nil || got.Via != head.ID || got.ViaDisplayName != "alice#head" {
		t.Fatalf("shown: %+v, %v", got, err)
	}
	if got, _ := alice.Endpoint(t.Context(), "head"); got.Via != "" {
		t.Fatalf("the head node shows via %q", got.Via)
	}
	bobsPublic := addEndpoint(t, bob, "gate", "anonymous", true)
	bobsPrivate := addEndpoint(t, bob, "secret", "anonymous", false)
	connect, err := alice.CreateEndpoint(t.Context(), api.EndpointSpec{Name: new("laptop"), AuthMethod: new("connect")})
	if err != nil {
		t.Fatal(err)
	}
	addEndpoint(t, alice, "plain", "anonymous", false)
	setup := e.ops.callCount() // adding an anonymous endpoint asks its server

	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, says               string
	}{
		{"via a missing endpoint", "POST", "endpoint", `{"name":"x","DATA":[{"uri":"ftp://h:1"}],"via":"alice#nope"}`, 404, "NotFound", "via"},
		{"via another's private endpoint", "POST", "endpoint", `{"name":"x","DATA":[{"uri":"ftp://h:1"}],"via":"` + bobsPrivate.ID + `"}`, 404, "NotFound", "via"},
		{"via an endpoint behind a relay", "POST", "endpoint", `{"name":"x","DATA":[{"uri":"ftp://h:1"}],"via":"alice#inner"}`, 400, "BadRequest", "alice#head"},
		{"via a connect endpoint", "POST", "endpoint", `{"name":"x","DATA":[{"uri":"ftp://h:1"}],"via":"alice#laptop"}`, 400, "BadRequest", "connect"},
		{"a connect endpoint behind a relay", "POST", "endpoint", `{"name":"y","auth_method":"connect","via":"alice#head"}`, 400, "BadRequest", "connect"},
		{"via itself", "PUT", "endpoint/" + inner.ID, `{"via":"alice#inner"}`, 400, "BadRequest", "itself"},
		{"a head node behind a relay", "PUT", "endpoint/alice%23head", `{"via":"alice#plain"}`, 409, "Conflict", "alice#inner"},
		{"update a connect endpoint behind a relay", "PUT", "endpoint/" + connect.ID, `{"via":"alice#head"}`, 400, "BadRequest", "connect"},
		{"ls", "GET", "operation/endpoint/alice%23inner/ls?path=/", "", 400, "BadRequest", "alice#head"},
		{"mkdir", "POST", "operation/endpoint/alice%23inner/mkdir", `{"DATA_TYPE":"mkdir","path":"/d"}`, 400, "BadRequest", "alice#head"},
		{"rename", "POST", "operation/endpoint/alice%23inner/rename", `{"DATA_TYPE":"rename","old_path":"/a","new_path":"/b"}`, 400, "BadRequest", "alice#head"},
		{"delete task", "POST", "delete", `{"DATA_TYPE":"delete","endpoint":"alice#inner","DATA":[{"DATA_TYPE":"delete_item","path":"/a"}]}`, 400, "BadRequest", "alice#head"},
		{"transfer from it", "POST", "transfer", `{"DATA_TYPE":"transfer","source_endpoint":"alice#inner","destination_endpoint":"alice#src",
			"DATA":[{"DATA_TYPE":"transfer_item","source_path":"/a","destination_path":"/b"}]}`, 400, "BadRequest", "alice#head"},
		{"delete the head node", "DELETE", "endpoint/alice%23head", "", 409, "Conflict", "alice#inner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			a := e.raw(tc.method, tc.path, aliceTok, body)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			if ae := a.apiError(t); ae.Code != tc.code || !strings.Contains(ae.Message, tc.says) {
				t.Fatalf("%s %q, want %s saying %q", ae.Code, ae.Message, tc.code, tc.says)
			}
		})
	}
	if e.ops.callCount() != setup {
		t.Fatalf("the service reached an endpoint: %s", e.ops.lastCall())
	}

	// Activating an endpoint behind a relay keeps the login unchecked:
	// the service cannot log in there.
	act, err := alice.Activate(t.Context(), "alice#inner", api.Activate{Username: "alice", Password: "pw"})
	if err != nil || act.Code != "Activated" || !strings.Contains(act.Message, "not checked") {
		t.Fatalf("activate: %+v, %v", act, err)
	}
	if e.ops.callCount() != setup {
		t.Fatalf("activation reached the endpoint: %s", e.ops.lastCall())
	}
	// A transfer to it is accepted without asking it anything.
	res, err := alice.Transfer(t.Context(), api.Transfer{DataType: "transfer", SourceEndpoint: "alice#src", DestinationEndpoint: "alice#inner",
		Data: []api.TransferItem{{DataType: "transfer_item", SourcePath: "/a/", DestinationPath: "/b/", Recursive: true}}})
	if err != nil || res.TaskID == "" {
		t.Fatalf("transfer to it: %+v, %v", res, err)
	}
	if got := e.ops.lastCall(); strings.Contains(got, "check transfer") {
		t.Fatalf("the submission checked the transfer: %s", got)
	}

	// By ID, another's public endpoint; then none.
	if got, err := alice.UpdateEndpoint(t.Context(), "inner", api.EndpointSpec{Via: new(bobsPublic.ID)}); err != nil || got.ViaDisplayName != "bob#gate" {
		t.Fatalf("via bob#gate by ID: %+v, %v", got, err)
	}
	if _, err := alice.DeleteEndpoint(t.Context(), "head"); err != nil {
		t.Fatalf("delete the former head node: %v", err)
	}
	if got, err := alice.UpdateEndpoint(t.Context(), "inner", api.EndpointSpec{Via: new("")}); err != nil || got.Via != "" || got.ViaDisplayName != "" {
		t.Fatalf("via cleared: %+v, %v", got, err)
	}
}
