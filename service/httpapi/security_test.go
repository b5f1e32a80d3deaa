package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"ferry/internal/netpolicy"
	"ferry/service/api"
	"ferry/service/core"
)

// TestEndpointNetworks: with the service listening elsewhere than on
// loopback, an endpoint's server may not be a loopback, link-local or
// metadata address, given as an address or as a name that resolves to
// one; the refusal names the server and the rule. Other addresses, and
// connect endpoints (which have no address), are fine.
func TestEndpointNetworks(t *testing.T) {
	nets, err := netpolicy.New("", false)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(s *setup) { s.Networks = nets })
	alice, tok := e.user("alice")
	for _, tc := range []struct {
		name, body, why string
	}{
		{"cloud metadata", `{"name":"x","DATA":[{"uri":"ftp://169.254.169.254:80"}]}`, "link-local"},
		{"cloud metadata by host and port", `{"name":"x","DATA":[{"hostname":"169.254.169.254","port":80}]}`, "link-local"},
		{"loopback", `{"name":"x","DATA":[{"uri":"ftp://192.0.2.1:2811"},{"uri":"ftp://127.0.0.1:22"}]}`, "server ftp://127.0.0.1:22: address 127.0.0.1 is not allowed: loopback"},
		{"IPv6 loopback", `{"name":"x","DATA":[{"hostname":"::1","port":22}]}`, "loopback"},
		{"a name for loopback", `{"name":"x","DATA":[{"uri":"ftp://localhost:22"}]}`, "loopback"},
		{"this host", `{"name":"x","DATA":[{"uri":"ftp://0.0.0.0:22"}]}`, "unspecified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := e.raw("POST", "endpoint", tok, strings.NewReader(tc.body))
			if ae := a.apiError(t); a.status != 400 || !strings.Contains(ae.Message, tc.why) {
				t.Fatalf("%d %q, want 400 saying %q", a.status, ae.Message, tc.why)
			}
		})
	}
	if _, err := alice.CreateEndpoint(t.Context(), api.EndpointSpec{Name: new("dtn"), Servers: []api.Server{{URI: "ftp://192.0.2.1:2811"}}}); err != nil {
		t.Fatalf("an allowed address: %v", err)
	}
	a := e.raw("PUT", "endpoint/dtn", tok, strings.NewReader(`{"DATA":[{"uri":"ftp://169.254.169.254:2811"}]}`))
	if ae := a.apiError(t); a.status != 400 || !strings.Contains(ae.Message, "link-local") {
		t.Fatalf("update to a metadata address: %d %q, want 400", a.status, ae.Message)
	}
	if got, err := alice.Endpoint(t.Context(), "dtn"); err != nil || got.Servers[0].URI != "ftp://192.0.2.1:2811" {
		t.Fatalf("after a refused update: %+v, %v", got, err)
	}
	if _, err := alice.UpdateEndpoint(t.Context(), "dtn", api.EndpointSpec{Description: new("the servers are not looked at")}); err != nil {
		t.Fatal(err)
	}
}

// from is an HTTP client of e's server whose connections come from ip, a
// loopback address.
func (e *env) from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// login posts a login from client and returns the status and the
// Retry-After header.
func (e *env) login(client *http.Client, user, password string) (int, string) {
	e.t.Helper()
	body := fmt.Sprintf(`{"username":%q,"password":%q}`, user, password)
	req, _ := http.NewRequestWithContext(e.t.Context(), "POST", e.srv.URL+api.Prefix+"/auth/login", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// TestLoginThrottle: wrong passwords for one account, from any address,
// soon get 429 with Retry-After, the right one too, until the wait is
// over; another account's right password still works meanwhile. Wrong
// logins from one address, whichever accounts they try, get 429 too,
// while another address is served.
func TestLoginThrottle(t *testing.T) {
	limits := core.LoginLimits{Free: 3, FreeAddress: 8, First: 2 * time.Second, Max: time.Minute, Forget: time.Hour}
	e := newEnv(t, func(s *setup) { s.LoginLimits = limits })
	for _, u := range []string{"alice", "bob", "carol"} {
		e.addUser(u, u+"-pw")
	}
	a, b := e.from("127.0.0.1"), e.from("127.0.0.2")

	// The account: three failures are free, from anywhere.
	for i, c := range []*http.Client{a, b, a} {
		if st, _ := e.login(c, "alice", "guess"+strconv.Itoa(i)); st != 401 {
			t.Fatalf("wrong password %d: %d, want 401", i, st)
		}
	}
	for _, c := range []*http.Client{a, b} {
		if st, after := e.login(c, "alice", "alice-pw"); st != 429 || after != "2" {
			t.Fatalf("alice after 3 failures: %d, Retry-After %q; want 429 and 2", st, after)
		}
	}
	if st, _ := e.login(a, "bob", "bob-pw"); st != 201 {
		t.Fatalf("bob's right password from the same address: %d, want 201", st)
	}
	e.clock.Add(2 * time.Second)
	if st, _ := e.login(b, "alice", "guess3"); st != 401 {
		t.Fatalf("alice once the wait is over: %d, want 401", st)
	}
	if st, after := e.login(b, "alice", "guess4"); st != 429 || after != "4" {
		t.Fatalf("alice after 4 failures: %d, Retry-After %q; want 429 and 4 (doubled)", st, after)
	}
	e.clock.Add(4 * time.Second)
	if st, _ := e.login(a, "alice", "alice-pw"); st != 201 {
		t.Fatalf("alice's right password once the wait is over: %d, want 201", st)
	}
	if st, _ := e.login(a, "alice", "guess5"); st != 401 {
		t.Fatalf("a success clears the account's failures: %d, want 401", st)
	}

	// The address: spread over accounts (a user name that does not exist
	// counts too), its failures add up to FreeAddress.
	for i := range 3 {
		for _, u := range []string{"bob", "nosuchuser"} {
			if st, _ := e.login(a, u, "spray"+strconv.Itoa(i)); st != 401 && st != 429 {
				t.Fatalf("spraying: %d", st)
			}
		}
	}
	st, after := e.login(a, "carol", "carol-pw")
	if st != 429 || after == "" {
		t.Fatalf("carol's right password from the spraying address: %d, Retry-After %q; want 429", st, after)
	}
	if st, _ := e.login(b, "carol", "carol-pw"); st != 201 {
		t.Fatalf("carol's right password from another address: %d, want 201", st)
	}
	var ae api.Error
	resp := e.raw("POST", "auth/login", "", strings.NewReader(`{"username":"carol","password":"x"}`))
	ae = resp.apiError(t)
	if resp.status != 429 || ae.Code != "TooManyRequests" || !strings.Contains(ae.Message, "try again in") {
		t.Fatalf("429 document %+v", ae)
	}
}

// TestLoginCSRF: a login must be a JSON document (which a cross-site form
// cannot send) and, from a browser, come from the service's own origin.
func TestLoginCSRF(t *testing.T) {
	e := newEnv(t, func(s *setup) { s.PublicURL = "https://ferry.example.org" })
	e.addUser("alice", "alice-pw")
	body := `{"username":"alice","password":"alice-pw","kind":"session"}`
	host := strings.TrimPrefix(e.srv.URL, "http://")
	for _, tc := range []struct {
		name   string
		header []string
		status int
	}{
		{"text/plain", []string{"Content-Type", "text/plain"}, 400},
		{"a form", []string{"Content-Type", "application/x-www-form-urlencoded"}, 400},
		{"multipart", []string{"Content-Type", "multipart/form-data; boundary=x"}, 400},
		{"no Content-Type", []string{"Content-Type", ""}, 400},
		{"a foreign origin", []string{"Origin", "https://evil.example"}, 403},
		{"an origin on another port", []string{"Origin", "http://" + strings.Split(host, ":")[0] + ":1"}, 403},
		{"a null origin", []string{"Origin", "null"}, 403},
		{"the service's own origin", []string{"Origin", "http://" + host}, 201},
		{"the public URL's origin", []string{"Origin", "https://ferry.example.org"}, 201},
		{"JSON with a charset, no origin (the CLI)", []string{"Content-Type", "application/json; charset=utf-8"}, 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := e.raw("POST", "auth/login", "", strings.NewReader(body), tc.header...)
			if a.status != tc.status {
				t.Fatalf("%d %s, want %d", a.status, a.body, tc.status)
			}
			if cookie := a.header.Get("Set-Cookie"); tc.status != 201 && cookie != "" {
				t.Fatalf("refused, yet a session cookie: %s", cookie)
			}
		})
	}
}

// TestSlowBody: a request whose body trickles in is cut off after
// BodyTimeout, and its connection closed; the server goes on serving.
func TestSlowBody(t *testing.T) {
	e := newEnv(t, func(s *setup) { s.BodyTimeout = 300 * time.Millisecond })
	_, tok := e.user("alice")
	c, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST %s/endpoint HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", api.Prefix, tok)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // a byte every 100 ms: never idle for long, never done
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "not received within") {
		t.Fatalf("%s %s; want 400 saying the body did not arrive in time", resp.Status, b)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection stays open")
	}
	if _, err := e.client(tok).EndpointSearch(context.Background(), api.EndpointQuery{}); err != nil {
		t.Fatalf("the server after the slow body: %v", err)
	}
}

// TestSlowHandlerAfterItsBody: the body's deadline is over once the body
// is read: an activation whose endpoint takes longer to answer than
// BodyTimeout still succeeds.
func TestSlowHandlerAfterItsBody(t *testing.T) {
	e := newEnv(t, func(s *setup) { s.BodyTimeout = 100 * time.Millisecond })
	alice, _ := e.user("alice")
	addEndpoint(t, alice, "data", "password", false)
	e.ops.set(func(f *fakeOps) { f.delay = 500 * time.Millisecond })
	if _, err := alice.Activate(t.Context(), "data", api.Activate{Username: "carol", Password: "secret"}); err != nil {
		t.Fatalf("an activation that takes five times BodyTimeout: %v", err)
	}
}

// TestListHugeOffset: an offset past any listing is refused, not a panic.
func TestListHugeOffset(t *testing.T) {
	e := newEnv(t)
	_, tok := e.user("alice")
	ep := addEndpoint(t, e.client(tok), "data", "anonymous", false)
	e.ops.set(func(f *fakeOps) { f.dirs["/"] = nil })
	for _, tc := range []struct {
		offset string
		status int
	}{
		{"9223372036854775807", 400},
		{"9223372036854775800", 400},
		{"1000000001", 400},
		{"1000000000", 200},
	} {
		a := e.raw("GET", "operation/endpoint/"+ep.ID+"/ls?offset="+tc.offset+"&limit=1000", tok, nil)
		if a.status != tc.status {
			t.Errorf("offset %s: %d %s, want %d", tc.offset, a.status, a.body, tc.status)
		}
	}
	if strings.Contains(e.logs.String(), "panic") {
		t.Errorf("the server panicked:\n%s", e.logs)
	}
}
