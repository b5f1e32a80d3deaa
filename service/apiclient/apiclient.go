// Package apiclient is the Go client of ferry's REST API (service/httpapi).
// The CLI reaches the service through it and nothing else. Requests and
// answers are the documents of package api; a failed request returns an
// *api.Error carrying the HTTP status, the error code, the message and the
// request ID.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"ferry/service/api"
)

// Client calls one ferry service as one user. It is safe for concurrent
// use.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// New returns a client of the service at baseURL (scheme, host and port,
// e.g. http://127.0.0.1:8080) that authenticates with the API token token
// ("" for none: only Login and Health work then). A nil hc means
// http.DefaultClient.
func New(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: hc}
}

// maxErrorBody bounds how much of a failed answer is read.
const maxErrorBody = 64 << 10

// do sends in (if not nil) as JSON to path (relative to api.Prefix unless
// it starts with "/") and decodes the answer into out (if not nil).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	u := c.base + api.Prefix + "/" + path
	if strings.HasPrefix(path, "/") {
		u = c.base + path
	}
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return &UnreachableError{URL: c.base, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return answerError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// UnreachableError is a call that reached no service at URL: nothing
// listens there, the host is unknown, the connection broke. Its message
// says what to start, not the transport's error (Err).
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the ferry service at %s: is \"ferry server\" running?", e.URL)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// answerError makes the *api.Error of a failed answer, also when its body
// is not an error document (say, from a proxy).
func answerError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var e api.Error
	if json.Unmarshal(b, &e) != nil || e.Code == "" {
		e = api.Error{Message: strings.TrimSpace(resp.Status + ": " + string(b))}
	}
	e.Status = resp.StatusCode
	if e.RequestID == "" {
		e.RequestID = resp.Header.Get("X-Request-Id")
	}
	return &e
}

// esc escapes one path segment: an endpoint's owner#name or a task ID.
func esc(s string) string { return url.PathEscape(s) }

// Health asks GET /healthz whether the service and its database answer.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	err := c.do(ctx, "GET", "/healthz", nil, nil, &h)
	return h, err
}

// Login checks a user's password and returns a new token: an API token
// whose Value is the secret to pass to New, or (Kind "session") a web
// session whose cookie goes to hc's cookie jar.
func (c *Client) Login(ctx context.Context, l api.Login) (api.Token, error) {
	var t api.Token
	err := c.do(ctx, "POST", "auth/login", nil, l, &t)
	return t, err
}

// Logout revokes the client's own token.
func (c *Client) Logout(ctx context.Context) (api.Result, error) {
	var r api.Result
	err := c.do(ctx, "POST", "auth/logout", nil, nil, &r)
	return r, err
}

// Session says who the client's credential belongs to.
func (c *Client) Session(ctx context.Context) (api.Session, error) {
	var s api.Session
	err := c.do(ctx, "GET", "auth/session", nil, nil, &s)
	return s, err
}

// Tokens lists the user's tokens and sessions, revoked and expired ones
// too.
func (c *Client) Tokens(ctx context.Context) (api.TokenList, error) {
	var l api.TokenList
	err := c.do(ctx, "GET", "tokens", nil, nil, &l)
	return l, err
}

// RevokeToken revokes one of the user's tokens.
func (c *Client) RevokeToken(ctx context.Context, id int64) (api.Result, error) {
	var r api.Result
	err := c.do(ctx, "DELETE", "tokens/"+strconv.FormatInt(id, 10), nil, nil, &r)
	return r, err
}

// SSHKeys lists the user's public keys for the SSH command gateway.
func (c *Client) SSHKeys(ctx context.Context) (api.SSHKeyList, error) {
	var l api.SSHKeyList
	err := c.do(ctx, "GET", "ssh_keys", nil, nil, &l)
	return l, err
}

// AddSSHKey adds a public key, an authorized_keys line, with which the
// user logs in to the SSH command gateway.
func (c *Client) AddSSHKey(ctx context.Context, line string) (api.SSHKey, error) {
	var k api.SSHKey
	err := c.do(ctx, "POST", "ssh_keys", nil, api.SSHKey{DataType: "ssh_key", Key: line}, &k)
	return k, err
}

// DeleteSSHKey removes one of the user's SSH keys.
func (c *Client) DeleteSSHKey(ctx context.Context, id int64) (api.Result, error) {
	var r api.Result
	err := c.do(ctx, "DELETE", "ssh_keys/"+strconv.FormatInt(id, 10), nil, nil, &r)
	return r, err
}

// Bookmarks lists the user's bookmarks, by name.
func (c *Client) Bookmarks(ctx context.Context) (api.BookmarkList, error) {
	var l api.BookmarkList
	err := c.do(ctx, "GET", "bookmark_list", nil, nil, &l)
	return l, err
}

// CreateBookmark names path on endpoint ep (a UUID or owner#name) name.
func (c *Client) CreateBookmark(ctx context.Context, name, ep, path string) (api.Bookmark, error) {
	var b api.Bookmark
	err := c.do(ctx, "POST", "bookmark", nil, api.Bookmark{DataType: "bookmark", Name: name, EndpointID: ep, Path: path}, &b)
	return b, err
}

// Bookmark returns bookmark id.
func (c *Client) Bookmark(ctx context.Context, id string) (api.Bookmark, error) {
	var b api.Bookmark
	err := c.do(ctx, "GET", "bookmark/"+esc(id), nil, nil, &b)
	return b, err
}

// UpdateBookmark changes bookmark id as u says.
func (c *Client) UpdateBookmark(ctx context.Context, id string, u api.BookmarkUpdate) (api.Bookmark, error) {
	var b api.Bookmark
	u.DataType = "bookmark"
	err := c.do(ctx, "PUT", "bookmark/"+esc(id), nil, u, &b)
	return b, err
}

// DeleteBookmark deletes bookmark id.
func (c *Client) DeleteBookmark(ctx context.Context, id string) (api.Result, error) {
	var r api.Result
	err := c.do(ctx, "DELETE", "bookmark/"+esc(id), nil, nil, &r)
	return r, err
}

// SubmissionID returns a fresh submission ID, which makes a retried
// Transfer or Delete run once.
func (c *Client) SubmissionID(ctx context.Context) (string, error) {
	var s api.SubmissionID
	err := c.do(ctx, "GET", "submission_id", nil, nil, &s)
	return s.Value, err
}

// Transfer submits a transfer task. A submission ID seen before is no
// error: the result's Code is Duplicate and TaskID the earlier task.
func (c *Client) Transfer(ctx context.Context, t api.Transfer) (api.SubmitResult, error) {
	var r api.SubmitResult
	err := c.do(ctx, "POST", "transfer", nil, t, &r)
	return r, err
}

// Delete submits a delete task, with Transfer's duplicate rule.
func (c *Client) Delete(ctx context.Context, d api.Delete) (api.SubmitResult, error) {
	var r api.SubmitResult
	err := c.do(ctx, "POST", "delete", nil, d, &r)
	return r, err
}

// TaskList returns a page of the user's tasks.
func (c *Client) TaskList(ctx context.Context, q api.TaskQuery) (api.TaskList, error) {
	var l api.TaskList
	err := c.do(ctx, "GET", "task_list", q.Values(), nil, &l)
	return l, err
}

// Task returns one task.
func (c *Client) Task(ctx context.Context, id string) (api.Task, error) {
	var t api.Task
	err := c.do(ctx, "GET", "task/"+esc(id), nil, nil, &t)
	return t, err
}

// UpdateTask changes a running task's label or deadline.
func (c *Client) UpdateTask(ctx context.Context, id string, u api.TaskUpdate) (api.Result, error) {
	var r api.Result
	err := c.do(ctx, "PUT", "task/"+esc(id), nil, u, &r)
	return r, err
}

// CancelTask cancels a task: Code Canceled, or TaskComplete when it had
// already ended.
func (c *Client) CancelTask(ctx context.Context, id string) (api.Result, error) {
	var r api.Result
	err := c.do(ctx, "POST", "task/"+esc(id)+"/cancel", nil, nil, &r)
	return r, err
}

// ResumeTask queues an INACTIVE task again: Code Resumed.
func (c *Client) ResumeTask(ctx context.Context, id string) (api.Result, error) {
	var r api.Result
	err := c.do(ctx, "POST", "task/"+esc(id)+"/resume", nil, nil, &r)
	return r, err
}

// CancelFile cancels one file of a running task, named by its source
// path: Code FileCanceled.
func (c *Client) CancelFile(ctx context.Context, id, path string) (api.Result, error) {
	var r api.Result
	err := c.do(ctx, "POST", "task/"+esc(id)+"/cancel", nil, api.Cancel{Path: path}, &r)
	return r, err
}

// PauseInfo says whether task id is paused, why, and what resumes it.
func (c *Client) PauseInfo(ctx context.Context, id string) (api.PauseInfo, error) {
	var pi api.PauseInfo
	err := c.do(ctx, "GET", "task/"+esc(id)+"/pause_info", nil, nil, &pi)
	return pi, err
}

// Events returns a page of a task's events.
func (c *Client) Events(ctx context.Context, id string, p api.Page) (api.EventList, error) {
	var l api.EventList
	err := c.do(ctx, "GET", "task/"+esc(id)+"/event_list", p.Values(), nil, &l)
	return l, err
}

// SuccessfulTransfers returns a page of the files a task has transferred
// so far; pass the answer's NextMarker back until it is 0.
func (c *Client) SuccessfulTransfers(ctx context.Context, id string, q api.MarkerQuery) (api.SuccessfulTransfers, error) {
	var l api.SuccessfulTransfers
	err := c.do(ctx, "GET", "task/"+esc(id)+"/successful_transfers", q.Values(), nil, &l)
	return l, err
}

// FailedTransfers returns a page of the files a task gave up on, paged
// like SuccessfulTransfers.
func (c *Client) FailedTransfers(ctx context.Context, id string, q api.MarkerQuery) (api.FailedTransfers, error) {
	var l api.FailedTransfers
	err := c.do(ctx, "GET", "task/"+esc(id)+"/failed_transfers", q.Values(), nil, &l)
	return l, err
}

// SkippedErrors returns a page of the source paths a task skipped for
// errors (skip_source_errors), paged like SuccessfulTransfers.
func (c *Client) SkippedErrors(ctx context.Context, id string, q api.MarkerQuery) (api.SkippedErrors, error) {
	var l api.SkippedErrors
	err := c.do(ctx, "GET", "task/"+esc(id)+"/skipped_errors", q.Values(), nil, &l)
	return l, err
}

// DeletedPaths returns a page of the paths a task deleted at its
// destinations (delete_destination_extra), paged like SuccessfulTransfers.
func (c *Client) DeletedPaths(ctx context.Context, id string, q api.MarkerQuery) (api.DeletedPaths, error) {
	var l api.DeletedPaths
	err := c.do(ctx, "GET", "task/"+esc(id)+"/deleted_paths", q.Values(), nil, &l)
	return l, err
}

// PartialPaths returns a page of the files a task started and did not
// finish, paged like SuccessfulTransfers.
func (c *Client) PartialPaths(ctx context.Context, id string, q api.MarkerQuery) (api.PartialPaths, error) {
	var l api.PartialPaths
	err := c.do(ctx, "GET", "task/"+esc(id)+"/partial_paths", q.Values(), nil, &l)
	return l, err
}

// Endpoint returns an endpoint by UUID, owner#name, or a name of the
// user's own.
func (c *Client) Endpoint(ctx context.Context, id string) (api.Endpoint, error) {
	var e api.Endpoint
	err := c.do(ctx, "GET", "endpoint/"+esc(id), nil, nil, &e)
	return e, err
}

// ServerStates probes each of an endpoint's servers (with the caller's
// activation): up or not, stripes, a ferry front end's movers.
func (c *Client) ServerStates(ctx context.Context, id string) (api.ServerStateList, error) {
	var l api.ServerStateList
	err := c.do(ctx, "GET", "endpoint/"+esc(id)+"/server_state", nil, nil, &l)
	return l, err
}

// EndpointSearch returns a page of the endpoints the user may see.
func (c *Client) EndpointSearch(ctx context.Context, q api.EndpointQuery) (api.EndpointList, error) {
	var l api.EndpointList
	err := c.do(ctx, "GET", "endpoint_search", q.Values(), nil, &l)
	return l, err
}

// CreateEndpoint creates an endpoint of the user's.
func (c *Client) CreateEndpoint(ctx context.Context, s api.EndpointSpec) (api.Endpoint, error) {
	var e api.Endpoint
	err := c.do(ctx, "POST", "endpoint", nil, s, &e)
	return e, err
}

// UpdateEndpoint changes the fields s sets of one of the user's
// endpoints.
func (c *Client) UpdateEndpoint(ctx context.Context, id string, s api.EndpointSpec) (api.Endpoint, error) {
	var e api.Endpoint
	err := c.do(ctx, "PUT", "endpoint/"+esc(id), nil, s, &e)
	return e, err
}

// DeleteEndpoint deletes one of the user's endpoints.
func (c *Client) DeleteEndpoint(ctx context.Context, id string) (api.Result, error) {
	var r api.Result
	err := c.do(ctx, "DELETE", "endpoint/"+esc(id), nil, nil, &r)
	return r, err
}

// SetupKey gives one of the user's connect endpoints a new one-time setup
// key for ferry connect, revoking the certificates of its earlier agents.
func (c *Client) SetupKey(ctx context.Context, id string) (api.SetupKey, error) {
	var k api.SetupKey
	err := c.do(ctx, "POST", "endpoint/"+esc(id)+"/setup_key", nil, nil, &k)
	return k, err
}

// Relay says where ferry connect agents reach the service's relay; it
// needs no token.
func (c *Client) Relay(ctx context.Context) (api.Relay, error) {
	var r api.Relay
	err := c.do(ctx, "GET", "relay", nil, nil, &r)
	return r, err
}

// ActivationRequirements says whether an endpoint needs activating, and
// with what.
func (c *Client) ActivationRequirements(ctx context.Context, id string) (api.ActivationRequirements, error) {
	var a api.ActivationRequirements
	err := c.do(ctx, "GET", "endpoint/"+esc(id)+"/activation_requirements", nil, nil, &a)
	return a, err
}

// Activate gives the service the user's login for an endpoint; the
// service checks it by logging in first.
func (c *Client) Activate(ctx context.Context, id string, a api.Activate) (api.ActivationResult, error) {
	var r api.ActivationResult
	err := c.do(ctx, "POST", "endpoint/"+esc(id)+"/activate", nil, a, &r)
	return r, err
}

// Deactivate makes the service forget the user's login for an endpoint.
func (c *Client) Deactivate(ctx context.Context, id string) (api.Result, error) {
	var r api.Result
	err := c.do(ctx, "POST", "endpoint/"+esc(id)+"/deactivate", nil, nil, &r)
	return r, err
}

// Ls lists a directory of an endpoint.
func (c *Client) Ls(ctx context.Context, id string, q api.ListQuery) (api.FileList, error) {
	var l api.FileList
	err := c.do(ctx, "GET", "operation/endpoint/"+esc(id)+"/ls", q.Values(), nil, &l)
	return l, err
}

// Mkdir makes a directory on an endpoint.
func (c *Client) Mkdir(ctx context.Context, id, path string) (api.Result, error) {
	var r api.Result
	err := c.do(ctx, "POST", "operation/endpoint/"+esc(id)+"/mkdir", nil, api.Mkdir{Path: path}, &r)
	return r, err
}

// Rename renames a file or directory on an endpoint; a newPath that
// exists is refused unless overwrite.
func (c *Client) Rename(ctx context.Context, id, oldPath, newPath string, overwrite bool) (api.Result, error) {
	var r api.Result
	err := c.do(ctx, "POST", "operation/endpoint/"+esc(id)+"/rename", nil, api.Rename{OldPath: oldPath, NewPath: newPath, Overwrite: overwrite}, &r)
	return r, err
}
