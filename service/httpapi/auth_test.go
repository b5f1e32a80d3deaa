package httpapi_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"ferry/service/api"
	"ferry/service/httpapi"
)

func TestLogin(t *testing.T) {
	e := newEnv(t)
	e.addUser("alice", "alice-pw")
	anon := e.client("")
	for _, tc := range []struct {
		name   string
		login  api.Login
		status int
		code   string
	}{
		{"wrong password", api.Login{Username: "alice", Password: "nope"}, 401, "Unauthorized"},
		{"unknown user", api.Login{Username: "mallory", Password: "alice-pw"}, 401, "Unauthorized"},
		{"empty password", api.Login{Username: "alice"}, 401, "Unauthorized"},
		{"password past 72 bytes", api.Login{Username: "alice", Password: "alice-pw" + strings.Repeat("x", 70)}, 401, "Unauthorized"},
		{"bad kind", api.Login{Username: "alice", Password: "alice-pw", Kind: "root"}, 400, "BadRequest"},
		{"negative lifetime", api.Login{Username: "alice", Password: "alice-pw", Lifetime: -1}, 400, "BadRequest"},
		{"wrong DATA_TYPE", api.Login{DataType: "transfer", Username: "alice", Password: "alice-pw"}, 400, "BadRequest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := anon.Login(t.Context(), tc.login)
			ae := wantAPIError(t, err, tc.status, tc.code)
			if tc.status == 401 && ae.Message != "wrong user name or password" {
				t.Errorf("message %q tells more than that the login failed", ae.Message)
			}
		})
	}

	tok, err := anon.Login(t.Context(), api.Login{Username: "alice", Password: "alice-pw", Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	if tok.DataType != "token" || !strings.HasPrefix(tok.Value, "ferry_") || tok.Kind != "api" || tok.Name != "laptop" || tok.Expires.IsZero() {
		t.Fatalf("token %+v", tok)
	}
	alice := e.client(tok.Value)
	if who, err := alice.Session(t.Context()); err != nil || who.Username != "alice" || who.Kind != "api" || who.CSRFToken != "" {
		t.Fatalf("session of an API token: %+v, %v", who, err)
	}
	list, err := alice.Tokens(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Data) != 1 || list.Data[0].ID != tok.ID || list.Data[0].Value != "" || list.DataType != "token_list" {
		t.Fatalf("tokens %+v: want the one token, without its value", list)
	}
}

func TestTokensRejected(t *testing.T) {
	e := newEnv(t)
	alice, aliceTok := e.user("alice")
	bob, _ := e.user("bob")

	short, err := e.client("").Login(t.Context(), api.Login{Username: "alice", Password: "alice-pw", Lifetime: 60})
	if err != nil {
		t.Fatal(err)
	}
	revoked, err := e.client("").Login(t.Context(), api.Login{Username: "alice", Password: "alice-pw"})
	if err != nil {
		t.Fatal(err)
	}
	// Bob cannot revoke Alice's token: it is not found.
	_, err = bob.RevokeToken(t.Context(), revoked.ID)
	wantAPIError(t, err, 404, "NotFound")
	if r, err := alice.RevokeToken(t.Context(), revoked.ID); err != nil || r.Code != "Revoked" {
		t.Fatalf("revoke: %+v, %v", r, err)
	}
	if _, err := e.client(short.Value).SubmissionID(t.Context()); err != nil {
		t.Fatalf("fresh short token: %v", err)
	}
	e.clock.Add(61 * time.Second)

	for _, tc := range []struct {
		name   string
		header []string
	}{
		{"no token", nil},
		{"unknown token", []string{"Authorization", "Bearer ferry_nosuchtoken"}},
		{"expired token", []string{"Authorization", "Bearer " + short.Value}},
		{"revoked token", []string{"Authorization", "Bearer " + revoked.Value}},
		{"basic auth", []string{"Authorization", "Basic YWxpY2U6YWxpY2UtcHc="}},
		{"empty bearer", []string{"Authorization", "Bearer "}},
		{"API token as session cookie", []string{"Cookie", httpapi.SessionCookie + "=" + aliceTok}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := e.raw("GET", "task_list", "", nil, tc.header...)
			ae := a.apiError(t)
			if a.status != 401 || ae.Code != "Unauthorized" || ae.RequestID != a.header.Get("X-Request-Id") || ae.Resource != api.Prefix+"/task_list" {
				t.Fatalf("answer %d %+v", a.status, ae)
			}
			if a.header.Get("WWW-Authenticate") == "" {
				t.Error("no WWW-Authenticate header")
			}
		})
	}

	// Logout revokes the token used.
	if _, err := alice.Logout(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err = alice.TaskList(t.Context(), api.TaskQuery{})
	wantAPIError(t, err, 401, "Unauthorized")
}

func TestSessionCookie(t *testing.T) {
	e := newEnv(t)
	e.addUser("alice", "alice-pw")
	a := e.raw("POST", "auth/login", "", strings.NewReader(`{"username":"alice","password":"alice-pw","kind":"session"}`))
	if a.status != http.StatusCreated {
		t.Fatalf("login: %d %s", a.status, a.body)
	}
	resp := http.Response{Header: a.header}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == httpapi.SessionCookie {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/" {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/", session)
	}
	if strings.Contains(string(a.body), session.Value) || !strings.Contains(string(a.body), httpapi.CSRFToken(session.Value)) {
		t.Fatalf("login answer %s: want the CSRF token and not the session secret", a.body)
	}
	cookie := session.Name + "=" + session.Value
	// After a reload the page learns who it is and its CSRF token again.
	a = e.raw("GET", "auth/session", "", nil, "Cookie", cookie)
	var who api.Session
	if err := json.Unmarshal(a.body, &who); err != nil || a.status != 200 || who.DataType != "session" || who.Username != "alice" ||
		who.Kind != "session" || who.CSRFToken != httpapi.CSRFToken(session.Value) || who.Expires.IsZero() {
		t.Fatalf("session: %d %s", a.status, a.body)
	}
	spec := `{"name":"data","DATA":[{"uri":"ftp://127.0.0.1:2811"}]}`
	for _, tc := range []struct {
		name, method, path, body string
		header                   []string
		status                   int
	}{
		{"safe method needs no CSRF token", "GET", "task_list", "", nil, 200},
		{"unsafe method without CSRF token", "POST", "endpoint", spec, nil, 403},
		{"unsafe method with a wrong CSRF token", "POST", "endpoint", spec, []string{"X-CSRF-Token", "0123"}, 403},
		{"unsafe method with the CSRF token", "POST", "endpoint", spec, []string{"X-CSRF-Token", httpapi.CSRFToken(session.Value)}, 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := e.raw(tc.method, tc.path, "", strings.NewReader(tc.body), append([]string{"Cookie", cookie}, tc.header...)...)
			if a.status != tc.status {
				t.Fatalf("%s %s: %d %s, want %d", tc.method, tc.path, a.status, a.body, tc.status)
			}
		})
	}
	// A session is not a bearer token.
	if a := e.raw("GET", "task_list", session.Value, nil); a.status != 401 {
		t.Errorf("session secret as bearer token: %d", a.status)
	}
	a = e.raw("POST", "auth/logout", "", nil, "Cookie", cookie, "X-CSRF-Token", httpapi.CSRFToken(session.Value))
	if a.status != 200 || !strings.Contains(a.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("logout: %d %s, Set-Cookie %q", a.status, a.body, a.header.Get("Set-Cookie"))
	}
	if a := e.raw("GET", "task_list", "", nil, "Cookie", cookie); a.status != 401 {
		t.Errorf("after logout: %d", a.status)
	}
}

// TestSSHKeys: each user adds, lists and removes their own public keys
// for the SSH command gateway; others' are as missing.
func TestSSHKeys(t *testing.T) {
	e := newEnv(t)
	alice, _ := e.user("alice")
	bob, _ := e.user("bob")
	const pub = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGb0RS8IHuw7t1iT8yHgeK4oEn9WEf5d6X3Lx3bNU3k6 alice@laptop"
	k, err := alice.AddSSHKey(t.Context(), pub+"\n")
	if err != nil || k.Key != pub || !strings.HasPrefix(k.Fingerprint, "SHA256:") || k.ID == 0 {
		t.Fatalf("AddSSHKey: %+v, %v", k, err)
	}
	for _, c := range []struct {
		name   string
		try    func() error
		status int
	}{
		{"the same key again", func() error { _, err := alice.AddSSHKey(t.Context(), pub); return err }, http.StatusConflict},
		{"not a key", func() error { _, err := alice.AddSSHKey(t.Context(), "hello"); return err }, http.StatusBadRequest},
		{"a key with options", func() error { _, err := alice.AddSSHKey(t.Context(), `command="sh" `+pub); return err }, http.StatusBadRequest},
		{"another user's key", func() error { _, err := bob.DeleteSSHKey(t.Context(), k.ID); return err }, http.StatusNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ae *api.Error
			if err := c.try(); !errors.As(err, &ae) || ae.Status != c.status {
				t.Fatalf("got %v, want status %d", err, c.status)
			}
		})
	}
	if l, err := bob.SSHKeys(t.Context()); err != nil || len(l.Data) != 0 {
		t.Fatalf("bob's keys: %+v, %v", l, err)
	}
	if l, err := alice.SSHKeys(t.Context()); err != nil || len(l.Data) != 1 || l.Data[0] != k {
		t.Fatalf("alice's keys: %+v, %v; want %+v", l, err, k)
	}
	if r, err := alice.DeleteSSHKey(t.Context(), k.ID); err != nil || r.Code != "Deleted" {
		t.Fatalf("DeleteSSHKey: %+v, %v", r, err)
	}
	if l, err := alice.SSHKeys(t.Context()); err != nil || len(l.Data) != 0 {
		t.Fatalf("alice's keys after delete: %+v, %v", l, err)
	}
}
