// Package api holds the REST API's JSON documents and query parameters,
// shared by the server (service/httpapi) and its Go client
// (service/apiclient) so the wire format is written down once.
//
// The shapes follow the Globus Transfer API v0.10: every document the
// server writes carries DATA_TYPE, fields are snake_case, lists keep their
// entries under DATA. In request documents DATA_TYPE may be left out; when
// present it must name the document the route expects.
package api

import (
	"fmt"
	"time"

	"ferry/service/domain"
)

// Prefix is the path every versioned route lives under.
const Prefix = "/api/v0.10"

// Error is the document of every failed request, and the error the client
// returns for it. Code is one of the domain's error codes (BadRequest,
// NotFound, Unauthorized, ...).
type Error struct {
	Status    int    `json:"-"` // the HTTP status
	DataType  string `json:"DATA_TYPE"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
	Resource  string `json:"resource"` // the request's path
}

// Error is the sentence users read: the message alone, and for a failure
// of the service itself (HTTP 5xx) the request ID too, which its log
// knows. A refusal of the request (4xx) is the caller's to mend, and its
// message says how; so is an endpoint's server or agent that did not
// answer (502 or 504 with the service's error document).
func (e *Error) Error() string {
	endpoint := (e.Status == 502 || e.Status == 504) && e.Code != ""
	if e.Status >= 500 && !endpoint && e.RequestID != "" {
		return fmt.Sprintf("%s (request %s)", e.Message, e.RequestID)
	}
	return e.Message
}

// Result answers a request that only succeeds or fails: Code says what was
// done (Canceled, Revoked, DirectoryCreated, ...).
type Result struct {
	DataType  string `json:"DATA_TYPE"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
	Resource  string `json:"resource"`
}

// Login is the body of POST /auth/login.
type Login struct {
	DataType string `json:"DATA_TYPE,omitempty"`
	Username string `json:"username"`
	Password string `json:"password"`
	// Kind is "api" (the default: a bearer token) or "session" (a web
	// session cookie, ferry_session, and a CSRF token to send back in the
	// X-CSRF-Token header of unsafe requests).
	Kind     string `json:"kind,omitempty"`
	Name     string `json:"name,omitempty"`     // what to call the token, e.g. a host name
	Lifetime int64  `json:"lifetime,omitempty"` // seconds; 0: the default for the kind
}

// Token describes an API token or web session (DATA_TYPE token).
type Token struct {
	DataType string `json:"DATA_TYPE"`
	ID       int64  `json:"id"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	// Value is the secret itself; only the answer to a login of kind api
	// carries it, and the server cannot show it again.
	Value     string    `json:"value,omitempty"`
	CSRFToken string    `json:"csrf_token,omitempty"` // answer to a session login only
	Created   time.Time `json:"created"`
	Expires   time.Time `json:"expires,omitzero"`
	LastUsed  time.Time `json:"last_used,omitzero"`
	Revoked   bool      `json:"revoked"`
}

// Session answers GET /auth/session (DATA_TYPE session): who the caller
// is and, for a web session, the CSRF token that its HttpOnly cookie hides
// from the page after a reload.
type Session struct {
	DataType  string    `json:"DATA_TYPE"`
	Username  string    `json:"username"`
	Kind      string    `json:"kind"` // api or session
	Expires   time.Time `json:"expires,omitzero"`
	CSRFToken string    `json:"csrf_token,omitempty"` // a web session's only
}

// TokenList is the answer to GET /tokens (DATA_TYPE token_list).
type TokenList struct {
	DataType string  `json:"DATA_TYPE"`
	Data     []Token `json:"DATA"`
}

// SSHKey is a public key with which the user logs in to the SSH command
// gateway (DATA_TYPE ssh_key). To add one, POST ssh_keys with Key alone.
type SSHKey struct {
	DataType    string    `json:"DATA_TYPE"`
	ID          int64     `json:"id,omitempty"`
	Key         string    `json:"key"` // an authorized_keys line: TYPE BASE64 [COMMENT]
	Fingerprint string    `json:"fingerprint,omitempty"`
	Created     time.Time `json:"created,omitzero"`
}

// SSHKeyList lists the user's SSH keys (DATA_TYPE ssh_key_list).
type SSHKeyList struct {
	DataType string   `json:"DATA_TYPE"`
	Data     []SSHKey `json:"DATA"`
}

// Bookmark is a user's name for a path on an endpoint (DATA_TYPE
// bookmark), as in the transfer API. POST bookmark makes one from name,
// endpoint_id (a UUID, owner#name, or a name of the caller's own; an
// endpoint the caller may see) and path; names are unique per user.
type Bookmark struct {
	DataType            string    `json:"DATA_TYPE"`
	ID                  string    `json:"id,omitempty"`
	Name                string    `json:"name"`
	EndpointID          string    `json:"endpoint_id"`
	EndpointDisplayName string    `json:"endpoint_display_name,omitempty"` // owner#name
	Path                string    `json:"path"`
	Created             time.Time `json:"created,omitzero"`
}

// BookmarkList is the answer to GET /bookmark_list (DATA_TYPE
// bookmark_list), ordered by name.
type BookmarkList struct {
	DataType string     `json:"DATA_TYPE"`
	Data     []Bookmark `json:"DATA"`
}

// BookmarkUpdate is the body of PUT /bookmark/{id} (DATA_TYPE bookmark):
// what is given changes.
type BookmarkUpdate struct {
	DataType string  `json:"DATA_TYPE,omitempty"`
	Name     *string `json:"name,omitempty"`
	Path     *string `json:"path,omitempty"`
}

// PauseInfo answers GET /task/{id}/pause_info (DATA_TYPE pause_info):
// whether the task is paused (INACTIVE), why, and which of its endpoints
// hold it and what resumes it. The transfer API's pause_info_limited
// answers the same question for its pause rules; ferry pauses a task for
// the reasons nice_status names.
type PauseInfo struct {
	DataType string `json:"DATA_TYPE"`
	TaskID   string `json:"task_id"`
	IsPaused bool   `json:"is_paused"`
	// NiceStatus is why, as a code: NOT_ACTIVATED, CREDENTIAL_EXPIRED,
	// ENDPOINT_OFFLINE (a connect endpoint's agent is away), NO_SPACE.
	NiceStatus  string `json:"nice_status,omitempty"`
	Description string `json:"description,omitempty"` // why, in words: the event that paused it
	// Endpoints are those of the task that hold it, each with what
	// resumes the task.
	Endpoints []PausedEndpoint `json:"endpoints,omitempty"`
}

// What resumes a paused task, for one of its endpoints
// (PausedEndpoint.Resume).
const (
	ResumeActivate  = domain.ResumeActivate  // activate the endpoint (again): the task resumes by itself
	ResumeAgent     = domain.ResumeAgent     // the connect endpoint's agent connects: the task resumes by itself
	ResumeFreeSpace = domain.ResumeFreeSpace // free space there, then resume the task (POST task/{id}/resume)
)

// PausedEndpoint is an endpoint that holds a paused task (DATA_TYPE
// paused_endpoint).
type PausedEndpoint struct {
	DataType    string `json:"DATA_TYPE"`
	EndpointID  string `json:"endpoint_id"`
	DisplayName string `json:"display_name"`
	Resume      string `json:"resume"` // ResumeActivate, ResumeAgent or ResumeFreeSpace
}

// SubmissionID is the answer to GET /submission_id (DATA_TYPE
// submission_id).
type SubmissionID struct {
	DataType string `json:"DATA_TYPE"`
	Value    string `json:"value"`
}

// FilterRule includes or excludes names during a recursive transfer.
type FilterRule struct {
	DataType string `json:"DATA_TYPE,omitempty"`
	Method   string `json:"method"`         // "include" or "exclude"
	Name     string `json:"name"`           // a glob matched against base names
	Type     string `json:"type,omitempty"` // "file", "dir" or "" for both
}

// Transfer is the body of POST /transfer (DATA_TYPE transfer).
type Transfer struct {
	DataType string `json:"DATA_TYPE,omitempty"`
	// SubmissionID makes the submission idempotent; "" lets the server
	// make one (and then a retried request may run twice).
	SubmissionID        string `json:"submission_id,omitempty"`
	Label               string `json:"label,omitempty"`
	SourceEndpoint      string `json:"source_endpoint"`                // UUID or owner#name
	DestinationEndpoint string `json:"destination_endpoint,omitempty"` // UUID or owner#name
	// Destinations, in place of DestinationEndpoint, send the items to
	// several endpoints in one task (up to 16): each destination gets
	// every item of DATA, at the item's destination_path or at its own
	// destination_paths.
	Destinations []TransferDestination `json:"destinations,omitempty"`
	// SyncLevel is a sync level's API number (internal/synclevel): 0
	// exists, 1 size, 2 mtime, 3 checksum; nil: always copy.
	SyncLevel              *int   `json:"sync_level,omitempty"`
	VerifyChecksum         bool   `json:"verify_checksum,omitempty"`
	ChecksumAlgorithm      string `json:"checksum_algorithm,omitempty"` // MD5, ADLER32, SHA1, ...; "" lets the endpoints choose
	PreserveTimestamp      bool   `json:"preserve_timestamp,omitempty"`
	EncryptData            bool   `json:"encrypt_data,omitempty"` // both endpoints must be ferry servers
	Tar                    string `json:"tar,omitempty"`          // auto (""), always or never: trees of small files as tar streams
	Compress               bool   `json:"compress,omitempty"`     // zstd in flight, where both endpoints are ferry servers
	DeleteDestinationExtra bool   `json:"delete_destination_extra,omitempty"`
	// SkipSourceErrors skips source paths that are missing or not allowed
	// when the task reaches them (GET /task/{id}/skipped_errors lists
	// them) instead of failing them; FailOnQuotaErrors fails the task at
	// once when a destination is full or over quota, instead of pausing
	// it until space is freed.
	SkipSourceErrors  bool         `json:"skip_source_errors,omitempty"`
	FailOnQuotaErrors bool         `json:"fail_on_quota_errors,omitempty"`
	Deadline          time.Time    `json:"deadline,omitzero"`
	FilterRules       []FilterRule `json:"filter_rules,omitempty"`
	Notify
	Data []TransferItem `json:"DATA"`
}

// TransferDestination is one destination of a transfer to several
// (DATA_TYPE transfer_destination).
type TransferDestination struct {
	DataType string `json:"DATA_TYPE,omitempty"`
	Endpoint string `json:"endpoint"` // UUID or owner#name
	// DestinationPaths are where the items go at this endpoint, one per
	// item of DATA in its order; absent: each item's destination_path.
	DestinationPaths []string `json:"destination_paths,omitempty"`
}

// Notify chooses when the user is notified of a submitted task; nil
// means true, as in the transfer API.
type Notify struct {
	NotifyOnSucceeded *bool `json:"notify_on_succeeded,omitempty"`
	NotifyOnFailed    *bool `json:"notify_on_failed,omitempty"`
	NotifyOnInactive  *bool `json:"notify_on_inactive,omitempty"`
}

// TransferItem is one path of a transfer (DATA_TYPE transfer_item).
type TransferItem struct {
	DataType        string `json:"DATA_TYPE,omitempty"`
	SourcePath      string `json:"source_path"`
	DestinationPath string `json:"destination_path"`
	Recursive       bool   `json:"recursive,omitempty"`
}

// Delete is the body of POST /delete (DATA_TYPE delete).
type Delete struct {
	DataType      string    `json:"DATA_TYPE,omitempty"`
	SubmissionID  string    `json:"submission_id,omitempty"`
	Label         string    `json:"label,omitempty"`
	Endpoint      string    `json:"endpoint"` // UUID or owner#name
	Recursive     bool      `json:"recursive,omitempty"`
	IgnoreMissing bool      `json:"ignore_missing,omitempty"`
	Deadline      time.Time `json:"deadline,omitzero"`
	Notify
	Data []DeleteItem `json:"DATA"`
}

// DeleteItem is one path of a delete (DATA_TYPE delete_item).
type DeleteItem struct {
	DataType string `json:"DATA_TYPE,omitempty"`
	Path     string `json:"path"`
}

// SubmitResult answers POST /transfer and /delete (DATA_TYPE
// transfer_result or delete_result). Code is Accepted for a new task and
// Duplicate for a submission_id seen before; TaskID is the task either way.
type SubmitResult struct {
	DataType     string `json:"DATA_TYPE"`
	Code         string `json:"code"`
	Message      string `json:"message"`
	RequestID    string `json:"request_id"`
	Resource     string `json:"resource"`
	SubmissionID string `json:"submission_id"`
	TaskID       string `json:"task_id"`
	TaskLink     Link   `json:"task_link"`
}

// Link points at a related document (DATA_TYPE link); Href is relative
// to Prefix.
type Link struct {
	DataType string `json:"DATA_TYPE"`
	Href     string `json:"href"`
	Rel      string `json:"rel"`
	Resource string `json:"resource"`
	Title    string `json:"title"`
}

// FatalError says why a task failed.
type FatalError struct {
	Code        string `json:"code"`
	Description string `json:"description"`
}

// Task is a transfer or delete task (DATA_TYPE task).
type Task struct {
	DataType   string      `json:"DATA_TYPE"`
	TaskID     string      `json:"task_id"`
	Type       string      `json:"type"` // TRANSFER or DELETE
	Label      string      `json:"label"`
	Status     string      `json:"status"`                // ACTIVE, INACTIVE, SUCCEEDED or FAILED
	NiceStatus string      `json:"nice_status,omitempty"` // OK, Queued, NOT_ACTIVATED, ...; absent when done
	FatalError *FatalError `json:"fatal_error,omitempty"`
	// CancelRequested is set from a cancel until the worker stops the task.
	CancelRequested bool      `json:"cancel_requested"`
	SubmissionID    string    `json:"submission_id"`
	RequestTime     time.Time `json:"request_time"`
	CompletionTime  time.Time `json:"completion_time,omitzero"`
	Deadline        time.Time `json:"deadline,omitzero"`

	SourceEndpointID               string `json:"source_endpoint_id"` // the endpoint of a delete
	SourceEndpointDisplayName      string `json:"source_endpoint_display_name"`
	DestinationEndpointID          string `json:"destination_endpoint_id,omitempty"` // the first of several
	DestinationEndpointDisplayName string `json:"destination_endpoint_display_name,omitempty"`
	// Destinations, for a transfer to several endpoints, are each one's
	// progress; the task's own files_transferred, files_skipped and
	// subtasks count a source file once it is at every destination.
	Destinations []TaskDestination `json:"destinations,omitempty"`
	// SourcePath and DestinationPath say where the task's items are: the
	// one item's paths, or the deepest directories that hold them all (a
	// delete task has no destination path). Only GET task/{id} has them:
	// task_list leaves them out, as the items are read per task.
	SourcePath      string `json:"source_path,omitempty"`
	DestinationPath string `json:"destination_path,omitempty"`

	Files                   int64 `json:"files"`
	Directories             int64 `json:"directories"`
	FilesTransferred        int64 `json:"files_transferred"`
	FilesSkipped            int64 `json:"files_skipped"`
	BytesTransferred        int64 `json:"bytes_transferred"`
	BytesTotal              int64 `json:"bytes_total"` // expected to move (moved before this run + its plan); 0 until listed
	BytesChecksummed        int64 `json:"bytes_checksummed"`
	EffectiveBytesPerSecond int64 `json:"effective_bytes_per_second"`
	Faults                  int64 `json:"faults"`
	SubtasksTotal           int64 `json:"subtasks_total"`
	SubtasksSucceeded       int64 `json:"subtasks_succeeded"` // transferred or skipped
	SubtasksPending         int64 `json:"subtasks_pending"`
	SubtasksFailed          int64 `json:"subtasks_failed"`

	// The submitted options, echoed. SyncLevel is absent for "always copy".
	SyncLevel              *int         `json:"sync_level,omitempty"`
	VerifyChecksum         bool         `json:"verify_checksum"`
	ChecksumAlgorithm      string       `json:"checksum_algorithm,omitempty"`
	EncryptData            bool         `json:"encrypt_data"`
	PreserveTimestamp      bool         `json:"preserve_timestamp"`
	Tar                    string       `json:"tar,omitempty"`
	Compress               bool         `json:"compress,omitempty"`
	DeleteDestinationExtra bool         `json:"delete_destination_extra"`
	SkipSourceErrors       bool         `json:"skip_source_errors"`
	FailOnQuotaErrors      bool         `json:"fail_on_quota_errors"`
	FilterRules            []FilterRule `json:"filter_rules,omitempty"`
	NotifyOnSucceeded      bool         `json:"notify_on_succeeded"`
	NotifyOnFailed         bool         `json:"notify_on_failed"`
	NotifyOnInactive       bool         `json:"notify_on_inactive"`
	IgnoreMissing          bool         `json:"ignore_missing,omitempty"` // delete tasks
}

// TaskDestination is one destination of a transfer to several
// (DATA_TYPE task_destination): files that arrived there, that were
// there already, that failed to arrive (failed_transfers names them), and
// the bytes that arrived.
type TaskDestination struct {
	DataType            string   `json:"DATA_TYPE"`
	EndpointID          string   `json:"endpoint_id"`
	EndpointDisplayName string   `json:"endpoint_display_name"`
	DestinationPaths    []string `json:"destination_paths,omitempty"` // absent: the items' own
	FilesTransferred    int64    `json:"files_transferred"`
	FilesSkipped        int64    `json:"files_skipped"`
	FilesFailed         int64    `json:"files_failed"`
	BytesTransferred    int64    `json:"bytes_transferred"`
}

// TaskList is a page of tasks (DATA_TYPE task_list).
type TaskList struct {
	DataType string `json:"DATA_TYPE"`
	PageInfo
	Data []Task `json:"DATA"`
}

// PageInfo says where an offset-paged list's page lies: Length entries
// from Offset, of Total.
type PageInfo struct {
	Length int `json:"length"`
	Limit  int `json:"limit"`
	Offset int `json:"offset"`
	Total  int `json:"total"`
}

// TaskUpdate is the body of PUT /task/{id}: absent fields are kept.
type TaskUpdate struct {
	DataType string     `json:"DATA_TYPE,omitempty"`
	Label    *string    `json:"label,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`
}

// Cancel is the optional body of POST /task/{id}/cancel: with a Path,
// only that source file is canceled.
type Cancel struct {
	DataType string `json:"DATA_TYPE,omitempty"`
	Path     string `json:"path,omitempty"`
}

// Event is one entry of a task's history (DATA_TYPE event).
type Event struct {
	DataType    string    `json:"DATA_TYPE"`
	Code        string    `json:"code"`
	Description string    `json:"description"`
	Details     string    `json:"details"`
	IsError     bool      `json:"is_error"`
	Time        time.Time `json:"time"`
}

// EventList is a page of a task's events (DATA_TYPE event_list).
type EventList struct {
	DataType string `json:"DATA_TYPE"`
	PageInfo
	Data []Event `json:"DATA"`
}

// SuccessfulTransfer is one file a task has transferred (DATA_TYPE
// successful_transfer).
type SuccessfulTransfer struct {
	DataType          string `json:"DATA_TYPE"`
	SourcePath        string `json:"source_path"`
	DestinationPath   string `json:"destination_path"`
	Size              int64  `json:"size"`
	ChecksumAlgorithm string `json:"checksum_algorithm,omitempty"`
	Checksum          string `json:"checksum,omitempty"`
}

// SuccessfulTransfers is a marker-paged list (DATA_TYPE
// successful_transfers): pass NextMarker back as marker for the next page;
// it is 0 on the last page.
type SuccessfulTransfers struct {
	DataType   string               `json:"DATA_TYPE"`
	Marker     int64                `json:"marker"`
	NextMarker int64                `json:"next_marker"`
	Data       []SuccessfulTransfer `json:"DATA"`
}

// DeletedPath is a path a transfer deleted at its destination because its
// source does not have it, with delete_destination_extra (DATA_TYPE
// deleted_path): an extra entry, or what an extra directory held, listed
// before the directory.
type DeletedPath struct {
	DataType        string    `json:"DATA_TYPE"`
	DestinationPath string    `json:"destination_path"`
	Type            string    `json:"type"` // "file" or "dir"
	Size            int64     `json:"size"`
	Time            time.Time `json:"time"`
	// DestinationEndpointID is where, in a transfer to several destinations.
	DestinationEndpointID string `json:"destination_endpoint_id,omitempty"`
}

// DeletedPaths is a marker-paged list (DATA_TYPE deleted_paths), in the
// order the paths were deleted, paged like SuccessfulTransfers.
type DeletedPaths struct {
	DataType   string        `json:"DATA_TYPE"`
	Marker     int64         `json:"marker"`
	NextMarker int64         `json:"next_marker"`
	Data       []DeletedPath `json:"DATA"`
}

// PartialPath is a file a task started and did not finish (DATA_TYPE
// partial_path): what it knows is at the destination, from which a later
// run resumes it.
type PartialPath struct {
	DataType           string `json:"DATA_TYPE"`
	SourcePath         string `json:"source_path"`
	Size               int64  `json:"size"`                 // the source file's
	BytesAtDestination int64  `json:"bytes_at_destination"` // known to be there (restart markers)
}

// PartialPaths is a marker-paged list (DATA_TYPE partial_paths) of the
// files a task left partial, paged like SuccessfulTransfers.
type PartialPaths struct {
	DataType   string        `json:"DATA_TYPE"`
	Marker     int64         `json:"marker"`
	NextMarker int64         `json:"next_marker"`
	Data       []PartialPath `json:"DATA"`
}

// FailedTransfer is one file a task gave up on (DATA_TYPE
// failed_transfer), and why.
type FailedTransfer struct {
	DataType        string    `json:"DATA_TYPE"`
	SourcePath      string    `json:"source_path"`
	DestinationPath string    `json:"destination_path,omitempty"` // absent for a delete task
	Size            int64     `json:"size"`
	Error           string    `json:"error"`
	Time            time.Time `json:"time"`
	// DestinationEndpointID is where the file failed, in a transfer to
	// several destinations, whose failures are listed per destination.
	DestinationEndpointID string `json:"destination_endpoint_id,omitempty"`
}

// SkippedError is a source path a task skipped because the source
// refused it (DATA_TYPE skipped_error): missing or not allowed, with
// skip_source_errors.
type SkippedError struct {
	DataType        string    `json:"DATA_TYPE"`
	SourcePath      string    `json:"source_path"`
	DestinationPath string    `json:"destination_path"`
	ErrorDetails    string    `json:"error_details"`
	ErrorTime       time.Time `json:"error_time"`
}

// SkippedErrors is a marker-paged list (DATA_TYPE skipped_errors), paged
// like SuccessfulTransfers.
type SkippedErrors struct {
	DataType   string         `json:"DATA_TYPE"`
	Marker     int64          `json:"marker"`
	NextMarker int64          `json:"next_marker"`
	Data       []SkippedError `json:"DATA"`
}

// FailedTransfers is a marker-paged list (DATA_TYPE failed_transfers),
// paged like SuccessfulTransfers.
type FailedTransfers struct {
	DataType   string           `json:"DATA_TYPE"`
	Marker     int64            `json:"marker"`
	NextMarker int64            `json:"next_marker"`
	Data       []FailedTransfer `json:"DATA"`
}

// Server is one GridFTP server (data mover) of an endpoint (DATA_TYPE
// server). In requests either URI or Hostname (with Port and Scheme) is
// given.
type Server struct {
	DataType string `json:"DATA_TYPE,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	Port     int    `json:"port,omitempty"`
	Scheme   string `json:"scheme,omitempty"` // ftp
	URI      string `json:"uri,omitempty"`    // ftp://host:port
}

// Endpoint is a logical endpoint (DATA_TYPE endpoint). Activated and
// ExpiresIn are the caller's: ExpiresIn is -1 for an endpoint that needs
// no activation, the seconds left for an activated one, 0 otherwise.
type Endpoint struct {
	DataType         string   `json:"DATA_TYPE"`
	ID               string   `json:"id"`
	DisplayName      string   `json:"display_name"` // owner#name
	Owner            string   `json:"owner"`
	Name             string   `json:"name"`
	Description      string   `json:"description"`
	Servers          []Server `json:"DATA"`
	DefaultDirectory string   `json:"default_directory"`
	Public           bool     `json:"public"`
	AuthMethod       string   `json:"auth_method"`    // anonymous, password or connect
	MaxConcurrent    int      `json:"max_concurrent"` // tasks at once; 0: no limit
	Activated        bool     `json:"activated"`
	ExpiresIn        int64    `json:"expires_in"`
	Connected        bool     `json:"connected"` // a connect endpoint's agent is connected to the relay
	// Via is the endpoint through which alone this one is reached (a head
	// node in front of a private network), by ID and owner#name; absent:
	// reached directly.
	Via            string `json:"via,omitempty"`
	ViaDisplayName string `json:"via_display_name,omitempty"`
	// MyProxyServer is a gsi endpoint's MyProxy server (host:port), from
	// which the service fetches a proxy to activate it (Activate's
	// MyProxyUsername and MyProxyPassphrase); MyProxyServerDN is the
	// server's identity when not a name of its host. Absent: none.
	MyProxyServer   string    `json:"myproxy_server,omitempty"`
	MyProxyServerDN string    `json:"myproxy_server_dn,omitempty"`
	Created         time.Time `json:"created"`
	// SetupKey is a new connect endpoint's first setup key: only in the
	// answer to the POST that created it.
	SetupKey *SetupKey `json:"setup_key,omitempty"`
}

// EndpointSpec is the body of POST /endpoint and PUT /endpoint/{id}. In a
// PUT absent fields are kept; in a POST Name and Servers are required and
// the rest defaults (auth_method anonymous, default_directory /). A
// connect endpoint (auth_method connect, only in a POST) has no servers:
// its agent serves it.
type EndpointSpec struct {
	DataType         string   `json:"DATA_TYPE,omitempty"`
	Name             *string  `json:"name,omitempty"`
	Description      *string  `json:"description,omitempty"`
	Servers          []Server `json:"DATA,omitempty"`
	DefaultDirectory *string  `json:"default_directory,omitempty"`
	Public           *bool    `json:"public,omitempty"`
	AuthMethod       *string  `json:"auth_method,omitempty"`
	MaxConcurrent    *int     `json:"max_concurrent,omitempty"`
	// Via names (UUID or owner#name) the endpoint through which alone
	// this one is reached; "" (in a PUT): reached directly.
	Via *string `json:"via,omitempty"`
	// MyProxyServer (host[:port], port 7512 by default) is a gsi
	// endpoint's MyProxy server; "" (in a PUT): none. MyProxyServerDN is
	// the server's identity (a one-line DN) if its certificate does not
	// name its host; "": a name of the host.
	MyProxyServer   *string `json:"myproxy_server,omitempty"`
	MyProxyServerDN *string `json:"myproxy_server_dn,omitempty"`
}

// EndpointList is a page of endpoints (DATA_TYPE endpoint_list).
type EndpointList struct {
	DataType string `json:"DATA_TYPE"`
	PageInfo
	Data []Endpoint `json:"DATA"`
}

// ServerStateList is the state of each of an endpoint's servers, in
// order (DATA_TYPE server_state_list).
type ServerStateList struct {
	DataType string        `json:"DATA_TYPE"`
	Data     []ServerState `json:"DATA"`
}

// ServerState is what a probe of one server found (DATA_TYPE
// server_state): whether it took a login (error says why not), how many
// stripes it offers (SPAS: more than 1 for a striped front end, one per
// data mover), and a ferry front end's movers.
type ServerState struct {
	DataType string       `json:"DATA_TYPE"`
	URI      string       `json:"uri"`
	Up       bool         `json:"up"`
	Error    string       `json:"error,omitempty"`
	Stripes  int          `json:"stripes"`
	Movers   []MoverState `json:"movers"`
}

// MoverState is one data mover of a striped ferry front end (DATA_TYPE
// mover_state).
type MoverState struct {
	DataType string `json:"DATA_TYPE"`
	Index    int    `json:"index"`
	Address  string `json:"address"`
	Up       bool   `json:"up"`
	Reason   string `json:"reason,omitempty"`
}

// ActivationRequirements says what activating an endpoint takes (DATA_TYPE
// activation_requirements); Data is empty when it needs nothing.
// Subject is who the caller's activation logs in as, when its credential
// names it (a grid proxy's identity).
type ActivationRequirements struct {
	DataType  string                  `json:"DATA_TYPE"`
	Activated bool                    `json:"activated"`
	ExpiresIn int64                   `json:"expires_in"`
	Subject   string                  `json:"subject,omitempty"`
	Data      []ActivationRequirement `json:"DATA"`
}

// ActivationRequirement is one value to send in Activate (DATA_TYPE
// activation_requirement).
type ActivationRequirement struct {
	DataType    string `json:"DATA_TYPE"`
	Type        string `json:"type"` // password, proxy (a gsi endpoint), or myproxy (one with a MyProxy server)
	Name        string `json:"name"` // the Activate field: username, password, proxy, myproxy_username or myproxy_passphrase
	UIName      string `json:"ui_name"`
	Description string `json:"description"`
	Required    bool   `json:"required"`
	Private     bool   `json:"private"` // a secret: do not echo it
}

// Activate is the body of POST /endpoint/{id}/activate: a password
// endpoint takes Username and Password; a gsi endpoint takes Proxy, a
// grid proxy in PEM (its certificate, its unencrypted key, then the rest
// of its chain, as grid-proxy-init writes it), and optionally Username
// (the user to log in as; "": the servers' grid-mapfile mapping). A gsi
// activation lasts as long as its proxy, or Lifetime if that is shorter.
//
// A gsi endpoint that names a MyProxy server may take MyProxyUsername and
// MyProxyPassphrase instead of Proxy: the service fetches a proxy from
// the server with them (asking for Lifetime, 12 hours by default) and
// activates with it as with an uploaded one, and with it every other gsi
// endpoint the caller may use that names the same server. The pass
// phrase is used once and never stored or logged.
type Activate struct {
	DataType          string `json:"DATA_TYPE,omitempty"`
	Username          string `json:"username"`
	Password          string `json:"password"`
	Proxy             string `json:"proxy,omitempty"`
	MyProxyUsername   string `json:"myproxy_username,omitempty"`
	MyProxyPassphrase string `json:"myproxy_passphrase,omitempty"`
	Lifetime          int64  `json:"lifetime,omitempty"` // seconds; 0: 12 hours (a proxy: its own lifetime)
}

// ActivationResult answers an activation (DATA_TYPE activation_result):
// Code Activated (or AlreadyActivated for an endpoint that needs none),
// when it expires, and how many INACTIVE tasks it resumed. An activation
// through a MyProxy server lists in Endpoints every endpoint it activated
// (the one named first, then the others naming the same server); Resumed
// counts the tasks of them all.
type ActivationResult struct {
	DataType  string              `json:"DATA_TYPE"`
	Code      string              `json:"code"`
	Message   string              `json:"message"`
	RequestID string              `json:"request_id"`
	Resource  string              `json:"resource"`
	ExpiresIn int64               `json:"expires_in"`
	Subject   string              `json:"subject,omitempty"` // a gsi activation's identity
	Resumed   int                 `json:"resumed"`
	Endpoints []ActivatedEndpoint `json:"activated_endpoints,omitempty"`
}

// ActivatedEndpoint is one endpoint a MyProxy activation activated
// (DATA_TYPE activated_endpoint).
type ActivatedEndpoint struct {
	DataType    string `json:"DATA_TYPE"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	ExpiresIn   int64  `json:"expires_in"`
	Resumed     int    `json:"resumed"`
}

// File is one entry of a directory listing (DATA_TYPE file).
type File struct {
	DataType     string    `json:"DATA_TYPE"`
	Name         string    `json:"name"`
	Type         string    `json:"type"` // file, dir or link
	Size         int64     `json:"size"`
	Permissions  string    `json:"permissions,omitempty"` // octal, e.g. 0644
	User         string    `json:"user,omitempty"`
	Group        string    `json:"group,omitempty"`
	LastModified time.Time `json:"last_modified,omitzero"`
}

// FileList is a page of a directory listing, sorted by name unless
// orderby=none (DATA_TYPE file_list). Total is the number of entries;
// while an unsorted listing is still running on the endpoint it is the
// number listed so far, more than offset+length when there is a next
// page, as HasNextPage says.
type FileList struct {
	DataType string `json:"DATA_TYPE"`
	Endpoint string `json:"endpoint"` // the endpoint's ID
	Path     string `json:"path"`
	PageInfo
	HasNextPage bool   `json:"has_next_page"`
	Data        []File `json:"DATA"`
}

// Mkdir is the body of POST /operation/endpoint/{id}/mkdir.
type Mkdir struct {
	DataType string `json:"DATA_TYPE,omitempty"`
	Path     string `json:"path"`
}

// Rename is the body of POST /operation/endpoint/{id}/rename. A
// new_path that exists is refused (409 Conflict) unless Overwrite.
type Rename struct {
	DataType  string `json:"DATA_TYPE,omitempty"`
	OldPath   string `json:"old_path"`
	NewPath   string `json:"new_path"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

// Health answers GET /healthz (DATA_TYPE health): Status ok, or
// unavailable with HTTP 503.
type Health struct {
	DataType string `json:"DATA_TYPE"`
	Status   string `json:"status"`
}
