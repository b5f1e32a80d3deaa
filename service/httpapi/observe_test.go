package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"ferry/service/api"
)

func TestHealth(t *testing.T) {
	e := newEnv(t)
	if h, err := e.client("").Health(t.Context()); err != nil || h.Status != "ok" || h.DataType != "health" {
		t.Fatalf("health %+v, %v", h, err)
	}
	e.db.Close()
	_, err := e.client("").Health(t.Context())
	// The answer is a health document, not an error document: the
	// client still returns an *api.Error with the status.
	if ae, ok := err.(*api.Error); !ok || ae.Status != 503 || ae.RequestID == "" || !strings.Contains(ae.Message, "unavailable") {
		t.Fatalf("health with the store closed: %v (%T)", err, err)
	}
}

func TestRequestIDsAndLogs(t *testing.T) {
	e := newEnv(t)
	alice, tok := e.user("alice")
	seen := map[string]bool{}
	for range 3 {
		a := e.raw("GET", "task/nosuch", tok, nil)
		ae := a.apiError(t)
		id := a.header.Get("X-Request-Id")
		if a.status != 404 || ae.RequestID != id || len(id) < 16 || seen[id] || ae.DataType != "error" {
			t.Fatalf("answer %d %+v, X-Request-Id %q (seen %v)", a.status, ae, id, seen)
		}
		seen[id] = true
	}
	if _, err := alice.TaskList(t.Context(), api.TaskQuery{}); err != nil {
		t.Fatal(err)
	}
	a := e.raw("GET", "no/such/route", tok, nil)
	if ae := a.apiError(t); a.status != 404 || ae.Code != "NotFound" {
		t.Errorf("unknown route: %d %+v", a.status, ae)
	}

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(e.logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == "request" {
			lines = append(lines, m)
		}
	}
	// The logins of e.user, 3 task lookups, the list and the unknown route.
	if len(lines) != 6 {
		t.Fatalf("%d request lines, want 6:\n%s", len(lines), e.logs)
	}
	want := map[string]any{"method": "GET", "route": "GET /api/v0.10/task_list", "status": 200.0, "user": "alice", "path": api.Prefix + "/task_list"}
	got := lines[4]
	for k, v := range want {
		if got[k] != v {
			t.Errorf("log %s = %v, want %v (line %v)", k, got[k], v, got)
		}
	}
	if got["request_id"] == "" || got["duration"] == nil {
		t.Errorf("log line %v: no request_id or duration", got)
	}
	for _, l := range lines[1:4] {
		if id, _ := l["request_id"].(string); !seen[id] {
			t.Errorf("logged request_id %v is none of those answered", l["request_id"])
		}
	}
	if lines[5]["route"] != "unmatched" || lines[5]["status"] != 404.0 {
		t.Errorf("unknown route logged as %v", lines[5])
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	// The workers add their collectors to the same registry.
	worker := prometheus.NewCounter(prometheus.CounterOpts{Name: "ferry_worker_test_total", Help: "test"})
	e.reg.MustRegister(worker)
	worker.Add(3)
	alice, tok := e.user("alice")
	for range 2 {
		if _, err := alice.TaskList(t.Context(), api.TaskQuery{}); err != nil {
			t.Fatal(err)
		}
	}
	e.raw("GET", "task/x", tok, nil)
	addEndpoint(t, alice, "ep", "anonymous", false)
	for range 2 {
		if _, err := alice.Transfer(t.Context(), api.Transfer{SourceEndpoint: "ep", DestinationEndpoint: "ep",
			Data: []api.TransferItem{{SourcePath: "/in", DestinationPath: "/out"}}}); err != nil {
			t.Fatal(err)
		}
	}
	a := e.raw("GET", "/metrics", "", nil)
	if a.status != 200 {
		t.Fatalf("/metrics: %d", a.status)
	}
	body := string(a.body)
	for _, want := range []string{
		`ferry_http_requests_total{code="200",route="GET /api/v0.10/task_list"} 2`,
		`ferry_http_requests_total{code="201",route="POST /api/v0.10/auth/login"} 1`,
		`ferry_http_requests_total{code="404",route="GET /api/v0.10/task/{id}"} 1`,
		`ferry_http_request_duration_seconds_count{route="GET /api/v0.10/task_list"} 2`,
		`ferry_worker_test_total 3`,
		// Read from the store at the scrape, every status present.
		`ferry_tasks{status="ACTIVE"} 2`,
		`ferry_tasks{status="INACTIVE"} 0`,
		`ferry_tasks{status="SUCCEEDED"} 0`,
		`ferry_tasks{status="FAILED"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	e := newEnv(t)
	a := e.raw("GET", "openapi.json", "", nil)
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(a.body, &doc); a.status != 200 || err != nil || doc.Paths["/transfer"] == nil || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("openapi.json: %d %v %+v", a.status, err, doc)
	}
}
