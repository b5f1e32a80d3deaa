// Package httpapi serves the managed service's versioned REST API under
// /api/v0.10/ (the documents of package api, shaped like the Globus
// Transfer API v0.10), its OpenAPI description, /healthz and /metrics.
//
// Callers authenticate with a bearer API token (Authorization: Bearer ...)
// or a web session cookie (ferry_session); both come from POST
// /api/v0.10/auth/login. Unsafe requests that rely on the cookie must also
// carry the session's CSRF token (see CSRFToken) in X-CSRF-Token.
//
// GET /api/v0.10/relay with Upgrade: ferry-relay/1 (RelayProtocol) hands
// the connection to the process's relay for ferry connect (RelayConn), so
// that agents need no port but the API's.
//
// Every failure is one JSON document {code, message, request_id, resource}
// whose HTTP status comes from the domain error code through one table;
// other users' private endpoints and tasks are answered exactly like
// missing ones.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"ferry/service/api"
	"ferry/service/domain"
)

// Default body limits.
const (
	DefaultMaxBody       = 1 << 20  // 1 MiB
	DefaultMaxSubmitBody = 16 << 20 // 16 MiB: a transfer or delete of many items
)

// Server holds the API's dependencies and settings. Set the exported
// fields, then call Handler once.
type Server struct {
	// The service's use cases (package core implements them all).
	Auth        domain.AuthService
	Users       domain.UserService
	Bookmarks   domain.BookmarkService
	Endpoints   domain.EndpointService
	Activations domain.ActivationService
	Files       domain.FileService
	Tasks       domain.TaskService
	Logger      *slog.Logger
	// MaxBody limits request bodies, MaxSubmitBody those of POST /transfer
	// and /delete; larger ones get 413. Zero means the defaults.
	MaxBody, MaxSubmitBody int64
	// Registry receives the HTTP metrics, and /metrics serves it, so the
	// workers can register their own collectors on it too. When nil,
	// Handler makes one with the Go and process collectors.
	Registry *prometheus.Registry
	// RelayURL is where agents reach this process's relay (a relay URL,
	// see api.Relay); "": it runs none.
	RelayURL string
	// RelayConn, when set, takes each connection that asks GET /relay for
	// an upgrade to RelayProtocol (the tunnel's), with the bytes the
	// client sent after its request, answers the upgrade and serves the
	// connection until it ends: the relay on the API's listener.
	RelayProtocol string
	RelayConn     func(c net.Conn, head []byte)
	// PublicURL is where users reach the service, if not at the address
	// the requests name (a proxy in front): its origin may log in too.
	PublicURL string
	// BodyTimeout bounds how long a request's body may take to arrive;
	// 0: 1 minute.
	BodyTimeout time.Duration

	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	exporter http.Handler // serves Registry
}

// route is one row of the API: a method and a path pattern (relative to
// api.Prefix unless it starts with "/"), whether it needs a caller, and its
// handler.
type route struct {
	method, path string
	public       bool // no authentication
	submit       bool // body limited by MaxSubmitBody
	h            func(http.ResponseWriter, *http.Request, *call) error
}

// pattern is the ServeMux pattern of rt.
func (rt route) pattern() string {
	p := rt.path
	if !strings.HasPrefix(p, "/") {
		p = api.Prefix + "/" + p
	}
	return rt.method + " " + p
}

func (s *Server) routes() []route {
	return []route{
		{method: "GET", path: "/healthz", public: true, h: s.health},
		{method: "GET", path: "/metrics", public: true, h: s.metrics},
		{method: "GET", path: "openapi.json", public: true, h: serveOpenAPI},

		{method: "POST", path: "auth/login", public: true, h: s.login},
		{method: "POST", path: "auth/logout", h: s.logout},
		{method: "GET", path: "auth/session", h: s.session},
		{method: "GET", path: "tokens", h: s.tokens},
		{method: "DELETE", path: "tokens/{id}", h: s.revokeToken},
		{method: "GET", path: "ssh_keys", h: s.sshKeys},
		{method: "POST", path: "ssh_keys", h: s.addSSHKey},
		{method: "DELETE", path: "ssh_keys/{id}", h: s.deleteSSHKey},
		{method: "GET", path: "bookmark_list", h: s.bookmarkList},
		{method: "POST", path: "bookmark", h: s.createBookmark},
		{method: "GET", path: "bookmark/{id}", h: s.bookmark},
		{method: "PUT", path: "bookmark/{id}", h: s.updateBookmark},
		{method: "DELETE", path: "bookmark/{id}", h: s.deleteBookmark},

		{method: "GET", path: "submission_id", h: s.submissionID},
		{method: "POST", path: "transfer", submit: true, h: s.transfer},
		{method: "POST", path: "delete", submit: true, h: s.delete},
		{method: "GET", path: "task_list", h: s.taskList},
		{method: "GET", path: "task/{id}", h: s.task},
		{method: "PUT", path: "task/{id}", h: s.updateTask},
		{method: "POST", path: "task/{id}/cancel", h: s.cancelTask},
		{method: "POST", path: "task/{id}/resume", h: s.resumeTask},
		{method: "GET", path: "task/{id}/event_list", h: s.eventList},
		{method: "GET", path: "task/{id}/pause_info", h: s.pauseInfo},
		{method: "GET", path: "task/{id}/successful_transfers", h: s.successfulTransfers},
		{method: "GET", path: "task/{id}/failed_transfers", h: s.failedTransfers},
		{method: "GET", path: "task/{id}/skipped_errors", h: s.skippedErrors},
		{method: "GET", path: "task/{id}/deleted_paths", h: s.deletedPaths},
		{method: "GET", path: "task/{id}/partial_paths", h: s.partialPaths},

		{method: "GET", path: "endpoint_search", h: s.endpointSearch},
		{method: "POST", path: "endpoint", h: s.createEndpoint},
		{method: "GET", path: "endpoint/{id}", h: s.endpoint},
		{method: "PUT", path: "endpoint/{id}", h: s.updateEndpoint},
		{method: "DELETE", path: "endpoint/{id}", h: s.deleteEndpoint},
		{method: "GET", path: "endpoint/{id}/activation_requirements", h: s.activationRequirements},
		{method: "POST", path: "endpoint/{id}/activate", h: s.activate},
		{method: "POST", path: "endpoint/{id}/deactivate", h: s.deactivate},
		{method: "POST", path: "endpoint/{id}/setup_key", h: s.setupKey},
		{method: "GET", path: "endpoint/{id}/server_state", h: s.serverState},
		{method: "GET", path: "relay", public: true, h: s.relay},
		{method: "GET", path: "operation/endpoint/{id}/ls", h: s.ls},
		{method: "POST", path: "operation/endpoint/{id}/mkdir", h: s.mkdir},
		{method: "POST", path: "operation/endpoint/{id}/rename", h: s.rename},
	}
}

// Handler returns the API's handler. It registers the HTTP metrics on
// Registry, so it is called once per Server.
func (s *Server) Handler() http.Handler {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.MaxBody == 0 {
		s.MaxBody = DefaultMaxBody
	}
	if s.MaxSubmitBody == 0 {
		s.MaxSubmitBody = DefaultMaxSubmitBody
	}
	if s.BodyTimeout == 0 {
		s.BodyTimeout = time.Minute
	}
	if s.Registry == nil {
		s.Registry = prometheus.NewRegistry()
		s.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferry_http_requests_total",
		Help: "HTTP requests served, by route pattern and status code.",
	}, []string{"route", "code"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ferry_http_request_duration_seconds",
		Help:    "Time to serve an HTTP request, by route pattern.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route"})
	s.Registry.MustRegister(s.requests, s.latency, taskCollector{s.Tasks, s.Logger})
	s.exporter = promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{})

	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		mux.HandleFunc(rt.pattern(), s.serve(rt))
	}
	// Anything else under the API answers with a JSON error.
	mux.HandleFunc(api.Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, domain.Errorf(domain.ENotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	return s.observe(mux)
}

// call is what the handlers know of one request.
type call struct {
	id     string       // request ID
	user   domain.User  // the caller, once authenticated
	token  domain.Token // the credential used
	secret string       // its secret
}

type callKey struct{}

func callOf(r *http.Request) *call { return r.Context().Value(callKey{}).(*call) }

// observe gives each request an ID, then logs and measures it.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		c := &call{id: rand.Text()[:16]}
		w.Header().Set("X-Request-Id", c.id)
		r = r.WithContext(context.WithValue(r.Context(), callKey{}, c))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.Logger.Error("panic", "request_id", c.id, "panic", v)
				if !sw.wrote {
					s.fail(sw, r, fmt.Errorf("panic: %v", v))
				}
			}
			d := time.Since(start)
			route := r.Pattern
			if route == "" || route == api.Prefix+"/" {
				route = "unmatched"
			}
			s.requests.WithLabelValues(route, strconv.Itoa(sw.status)).Inc()
			s.latency.WithLabelValues(route).Observe(d.Seconds())
			s.Logger.Info("request", "method", r.Method, "route", route, "path", r.URL.Path,
				"status", sw.status, "duration", d, "request_id", c.id, "user", c.user.Name)
		}()
		next.ServeHTTP(sw, r)
	})
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// serve runs one route: authentication, the body limit, the handler, and
// the answer for its error.
func (s *Server) serve(rt route) http.HandlerFunc {
	limit := s.MaxBody
	if rt.submit {
		limit = s.MaxSubmitBody
	}
	return func(w http.ResponseWriter, r *http.Request) {
		c := callOf(r)
		if r.ContentLength != 0 { // a body that must arrive in time
			http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.BodyTimeout))
		}
		if !rt.public {
			if err := s.authenticate(r, c); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		if err := rt.h(w, r, c); err != nil {
			s.fail(w, r, err)
		}
	}
}

// statuses maps each domain error code to its HTTP status: the one table.
var statuses = map[string]int{
	domain.EInvalid:      http.StatusBadRequest,
	domain.ENotFound:     http.StatusNotFound,
	domain.EConflict:     http.StatusConflict,
	domain.EDuplicate:    http.StatusConflict,
	domain.EUnauthorized: http.StatusUnauthorized,
	domain.EForbidden:    http.StatusForbidden,
	domain.ENotActivated: http.StatusConflict,
	domain.ELimit:        http.StatusRequestEntityTooLarge,
	domain.EThrottled:    http.StatusTooManyRequests,
	domain.EUnavailable:  http.StatusBadGateway,
	domain.ETimeout:      http.StatusGatewayTimeout,
	domain.EInternal:     http.StatusInternalServerError,
}

// fail answers with err's error document; an internal error's details are
// logged, not shown.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	c := callOf(r)
	code := domain.ErrorCode(err)
	status, ok := statuses[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if code == domain.EInternal {
		s.Logger.Error("internal error", "request_id", c.id, "path", r.URL.Path, "err", err)
	}
	if code == domain.EUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ferry"`)
	}
	reply(w, status, api.Error{
		DataType:  "error",
		Code:      code,
		Message:   domain.ErrorMessage(err),
		RequestID: c.id,
		Resource:  r.URL.Path,
	})
}

// reply writes v as the JSON answer, which no cache may keep: some carry
// secrets.
func reply(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

// result answers with a Result document.
func result(w http.ResponseWriter, r *http.Request, dataType, code, message string) error {
	return reply(w, http.StatusOK, api.Result{
		DataType:  dataType,
		Code:      code,
		Message:   message,
		RequestID: callOf(r).id,
		Resource:  r.URL.Path,
	})
}

// decode reads the request's JSON document into v, refusing unknown
// fields and trailing data. An empty body is an error unless optional; a
// body must be sent as application/json, which a cross-site HTML form
// cannot send.
func decode(r *http.Request, v any, optional bool) error {
	if r.ContentLength != 0 {
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			return domain.Errorf(domain.EInvalid, "Content-Type %q: send the document as application/json", r.Header.Get("Content-Type"))
		}
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, err = dec.Token(); err == io.EOF {
			return nil
		}
		if err == nil {
			return domain.Errorf(domain.EInvalid, "malformed JSON: data after the document")
		}
	}
	var tooBig *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &tooBig):
		return domain.Errorf(domain.ELimit, "request body larger than %d bytes", tooBig.Limit)
	case errors.As(err, &ne) && ne.Timeout():
		return domain.Errorf(domain.EInvalid, "request body not received within the time allowed for it")
	case err == io.EOF && optional:
		return nil
	case err == io.EOF:
		return domain.Errorf(domain.EInvalid, "empty request body: want a JSON document")
	}
	return domain.Errorf(domain.EInvalid, "malformed JSON: %v", err)
}

// dataType checks a request document's optional DATA_TYPE.
func dataType(got, want string) error {
	if got != "" && got != want {
		return domain.Errorf(domain.EInvalid, "DATA_TYPE %q: want %q", got, want)
	}
	return nil
}

// health checks the store with a cheap lookup.
func (s *Server) health(w http.ResponseWriter, r *http.Request, _ *call) error {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := s.Auth.Health(ctx); err != nil {
		s.Logger.Error("health check", "request_id", callOf(r).id, "err", err)
		return reply(w, http.StatusServiceUnavailable, api.Health{DataType: "health", Status: "unavailable"})
	}
	return reply(w, http.StatusOK, api.Health{DataType: "health", Status: "ok"})
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request, _ *call) error {
	s.exporter.ServeHTTP(w, r)
	return nil
}
