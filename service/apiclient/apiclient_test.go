package apiclient_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"ferry/service/api"
	"ferry/service/apiclient"
)

// The client's side of the wire: paths, headers and error answers. The
// server's tests (service/httpapi) drive every method against the real API.
func TestWire(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Header().Set("X-Request-Id", "req-1")
		switch r.URL.Path {
		case api.Prefix + "/endpoint/alice#data/deactivate":
			w.Write([]byte(`{"DATA_TYPE":"result","code":"Deactivated"}`))
		case api.Prefix + "/task_list":
			w.Write([]byte(`{"DATA_TYPE":"task_list","total":0,"DATA":[]}`))
		case api.Prefix + "/task/t1":
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"DATA_TYPE":"error","code":"NotFound","message":"no task t1","request_id":"req-1","resource":"/api/v0.10/task/t1"}`))
		default:
			http.Error(w, "Bad Gateway from a proxy", http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	c := apiclient.New(srv.URL+"/", "tok", srv.Client())

	if r, err := c.Deactivate(t.Context(), "alice#data"); err != nil || r.Code != "Deactivated" {
		t.Fatalf("deactivate: %+v, %v", r, err)
	}
	if got.Method != "POST" || got.URL.EscapedPath() != api.Prefix+"/endpoint/alice%23data/deactivate" || got.Header.Get("Authorization") != "Bearer tok" {
		t.Errorf("request %s %s, Authorization %q", got.Method, got.URL.EscapedPath(), got.Header.Get("Authorization"))
	}
	if _, err := c.TaskList(t.Context(), api.TaskQuery{Status: []string{"ACTIVE"}, Page: api.Page{Limit: 5}}); err != nil {
		t.Fatal(err)
	}
	if q := got.URL.Query(); q.Get("filter") != "status:ACTIVE" || q.Get("limit") != "5" {
		t.Errorf("task_list query %s", got.URL.RawQuery)
	}

	var ae *api.Error
	_, err := c.Task(t.Context(), "t1")
	if !errors.As(err, &ae) || *ae != (api.Error{Status: 404, DataType: "error", Code: "NotFound", Message: "no task t1", RequestID: "req-1", Resource: "/api/v0.10/task/t1"}) {
		t.Errorf("error document: %#v", err)
	}
	_, err = c.Mkdir(t.Context(), "x", "/a")
	if !errors.As(err, &ae) || ae.Status != 502 || ae.Code != "" || ae.RequestID != "req-1" || ae.Message != "502 Bad Gateway: Bad Gateway from a proxy" {
		t.Errorf("plain-text error: %#v", err)
	}
}
