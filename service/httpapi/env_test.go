package httpapi_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	"ferry/gsi"
	"ferry/service/api"
	"ferry/service/apiclient"
	"ferry/service/core"
	"ferry/service/domain"
	"ferry/service/gridops"
	"ferry/service/httpapi"
	"ferry/service/secret"
	"ferry/service/sqlstore"
)

// env is a running API over a real SQLite store and fake endpoint servers.
type env struct {
	t     *testing.T
	db    *sqlstore.DB
	dbDir string // holds the SQLite database and its WAL
	ops   *fakeOps
	clock *clock
	srv   *httptest.Server
	reg   *prometheus.Registry
	logs  *syncBuffer
}

const (
	maxBody       = 64 << 10
	maxSubmitBody = 256 << 10
)

// setup is what a test may configure: the API and the service core
// behind it.
type setup struct {
	*httpapi.Server
	*core.Service
}

func newEnv(t *testing.T, configure ...func(*setup)) *env {
	t.Helper()
	dbDir := t.TempDir()
	db, err := sqlstore.Open(t.Context(), filepath.Join(dbDir, "ferry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	box, err := secret.New(bytes.Repeat([]byte{7}, secret.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, db: db, dbDir: dbDir, ops: newFakeOps(), clock: &clock{now: time.Now()}, reg: prometheus.NewRegistry(), logs: &syncBuffer{}}
	logger := slog.New(slog.NewJSONHandler(e.logs, nil))
	svc := &core.Service{Store: db, Ops: e.ops, Box: box, Now: e.clock.Now, Logger: logger}
	s := &httpapi.Server{
		Auth: svc, Users: svc, Bookmarks: svc, Endpoints: svc, Activations: svc, Files: svc, Tasks: svc,
		Logger:  logger,
		MaxBody: maxBody, MaxSubmitBody: maxSubmitBody, Registry: e.reg,
	}
	for _, c := range configure {
		c(&setup{s, svc})
	}
	e.srv = httptest.NewServer(s.Handler())
	t.Cleanup(e.srv.Close)
	return e
}

// clock is the server's settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// addUser stores a user with password pw.
func (e *env) addUser(name, pw string) domain.User {
	e.t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		e.t.Fatal(err)
	}
	u := domain.User{Name: name, PasswordHash: string(h)}
	if err := e.db.CreateUser(e.t.Context(), &u); err != nil {
		e.t.Fatal(err)
	}
	return u
}

// client is an apiclient with token.
func (e *env) client(token string) *apiclient.Client {
	return apiclient.New(e.srv.URL, token, e.srv.Client())
}

// user adds a user and logs it in; it returns the client and the token.
func (e *env) user(name string) (*apiclient.Client, string) {
	e.t.Helper()
	e.addUser(name, name+"-pw")
	tok, err := e.client("").Login(e.t.Context(), api.Login{Username: name, Password: name + "-pw", Name: "test"})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.client(tok.Value), tok.Value
}

// answer is a raw HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// apiError decodes the answer's error document.
func (a answer) apiError(t *testing.T) api.Error {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("answer %d %q is not an error document: %v", a.status, a.body, err)
	}
	return e
}

// raw sends a request with a bearer token (if any) and returns the
// answer; a body is sent as JSON unless header says otherwise.
func (e *env) raw(method, path, token string, body io.Reader, header ...string) answer {
	e.t.Helper()
	if !strings.HasPrefix(path, "/") {
		path = api.Prefix + "/" + path
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, b}
}

// wantAPIError checks that err is an *api.Error with status and code.
func wantAPIError(t *testing.T, err error, status int, code string) *api.Error {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T): want *api.Error %d %s", err, err, status, code)
	}
	if ae.Status != status || ae.Code != code || ae.RequestID == "" || ae.Message == "" {
		t.Fatalf("error %+v: want status %d, code %s, a message and a request ID", ae, status, code)
	}
	return ae
}

// equalJSON reports whether a and b have the same JSON form.
func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}

// addEndpoint creates an endpoint through c.
func addEndpoint(t *testing.T, c *apiclient.Client, name, auth string, public bool) api.Endpoint {
	t.Helper()
	ep, err := c.CreateEndpoint(t.Context(), api.EndpointSpec{
		Name: new(name), Servers: []api.Server{{URI: "ftp://127.0.0.1:2811"}},
		AuthMethod: new(auth), Public: new(public),
	})
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// fakeOps stands for the endpoints' GridFTP servers: a password endpoint
// accepts the logins in logins, a gsi endpoint the grid proxies of the
// DNs in gridmap; listings come from dirs.
type fakeOps struct {
	mu      sync.Mutex
	logins  map[string]string            // user → password
	gridmap map[string]bool              // the DNs a gsi endpoint maps
	dirs    map[string][]domain.FileInfo // path → entries
	fail    error                        // returned by every operation when set
	calls   []string                     // operations done, with the login user
	refuse  error                        // what CheckTransfer says of a submission's items
	delay   time.Duration                // every operation takes this long, unless its context ends
	hold    chan struct{}                // when set, a listing stops after holdAt entries until it is closed
	holdAt  int
	holding chan struct{} // closed when a listing stops there
	broken  error         // when set, a listing fails with it after its entries
}

func newFakeOps() *fakeOps {
	return &fakeOps{logins: map[string]string{"carol": "secret"}, gridmap: map[string]bool{}, dirs: map[string][]domain.FileInfo{}}
}

func (f *fakeOps) do(ctx context.Context, ep domain.Endpoint, l domain.Login, call string) error {
	f.mu.Lock()
	delay := f.delay
	f.mu.Unlock()
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	if ep.Auth == domain.AuthGSI {
		// A GSI server: the proxy's identity must be in its grid-mapfile.
		cred, err := gsi.ParseCredential([]byte(l.Proxy))
		if err != nil || !f.gridmap[cred.Identity()] {
			return domain.Errorf(domain.EUnauthorized, "530 Login incorrect: no grid-mapfile entry")
		}
		f.calls = append(f.calls, call+" as "+cred.Identity())
		return nil
	}
	if ep.NeedsActivation() && (l.Password == "" || f.logins[l.User] != l.Password) {
		return domain.Errorf(domain.EUnauthorized, "530 Login incorrect.")
	}
	f.calls = append(f.calls, call+" as "+cmp.Or(l.User, "anonymous"))
	return nil
}

// set changes f under its lock.
func (f *fakeOps) set(change func(*fakeOps)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

// callCount is how many operations were done.
func (f *fakeOps) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeOps) lastCall() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return ""
	}
	return f.calls[len(f.calls)-1]
}

func (f *fakeOps) Check(ctx context.Context, ep domain.Endpoint, l domain.Login) error {
	return f.do(ctx, ep, l, "check")
}

func (f *fakeOps) List(ctx context.Context, ep domain.Endpoint, l domain.Login, p string, fn func(domain.FileInfo) error) error {
	if err := f.do(ctx, ep, l, "list "+p); err != nil {
		return err
	}
	f.mu.Lock()
	d, ok := f.dirs[p]
	hold, holdAt, holding, broken := f.hold, f.holdAt, f.holding, f.broken
	f.mu.Unlock()
	if !ok {
		return domain.Errorf(domain.ENotFound, "550 %s: no such directory", p)
	}
	for i, fi := range d {
		if hold != nil && i == holdAt {
			close(holding)
			select {
			case <-hold:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := fn(fi); err != nil {
			return err
		}
	}
	return broken
}

// listed counts the operations done that listed p.
func (f *fakeOps) listed(p string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, "list "+p+" as ") {
			n++
		}
	}
	return n
}

func (f *fakeOps) Mkdir(ctx context.Context, ep domain.Endpoint, l domain.Login, p string) error {
	return f.do(ctx, ep, l, "mkdir "+p)
}

func (f *fakeOps) Rename(ctx context.Context, ep domain.Endpoint, l domain.Login, from, to string, overwrite bool) error {
	call := "rename " + from + " " + to
	if overwrite {
		call += " overwriting"
	}
	return f.do(ctx, ep, l, call)
}

func (f *fakeOps) Delete(ctx context.Context, ep domain.Endpoint, l domain.Login, p string, recursive bool, _ func(bool)) error {
	return f.do(ctx, ep, l, "delete "+p)
}

func (f *fakeOps) CheckTransfer(ctx context.Context, src, dst domain.Endpoint, sl, dl domain.Login, items []domain.Item, o domain.Options) error {
	if err := f.do(ctx, src, sl, "check transfer"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refuse
}

// Overlap is the real rule: it asks no server.
func (f *fakeOps) CheckDelete(context.Context, domain.Endpoint, domain.Login, []domain.Item, bool) error {
	return nil
}

func (f *fakeOps) Overlap(dst domain.Endpoint, it domain.Item, o domain.Options) error {
	return new(gridops.Ops).Overlap(dst, it, o)
}

func (f *fakeOps) ServerStates(ctx context.Context, ep domain.Endpoint, l domain.Login) ([]domain.ServerState, error) {
	if err := f.do(ctx, ep, l, "server states"); err != nil {
		return nil, err
	}
	var out []domain.ServerState
	for _, u := range ep.Servers {
		out = append(out, domain.ServerState{URI: u, Up: true, Stripes: 1})
	}
	return out, nil
}

var _ domain.FileOps = (*fakeOps)(nil)
