package domain

import (
	"context"
	"time"
)

// The service's use cases, which the application core implements and the
// adapters that face users (the REST API, the CLI's administration) call:
// each method takes the context first, then the user it acts for. Their
// errors are *Error, worded for that user.

// EndpointService finds, makes, changes and deletes endpoints. An
// endpoint is named by ref: a UUID, owner#name, or a name of the
// caller's own; one the caller may not see is answered ENotFound,
// exactly like a missing one, and only its owner may change it.
type EndpointService interface {
	FindEndpoint(ctx context.Context, u User, ref string) (EndpointView, error)
	SearchEndpoints(ctx context.Context, u User, text string, mine bool, p Page) ([]EndpointView, int, error)
	// CreateEndpoint makes an endpoint (a connect endpoint with its
	// first setup key).
	CreateEndpoint(ctx context.Context, u User, spec EndpointSpec) (EndpointView, error)
	UpdateEndpoint(ctx context.Context, u User, ref string, spec EndpointSpec) (EndpointView, error)
	DeleteEndpoint(ctx context.Context, u User, ref string) (Endpoint, error)
	// NewSetupKey gives a connect endpoint a new one-time setup key,
	// which revokes its earlier agents' certificates.
	NewSetupKey(ctx context.Context, u User, ref string) (SetupKey, error)
	// Relays lists where agents reach the service's relays: self (this
	// process's) first, then the other live processes'.
	Relays(ctx context.Context, self string) ([]string, error)
}

// ActivationService keeps the logins users' tasks and file operations
// use on endpoints that need one.
type ActivationService interface {
	ActivationStatus(ctx context.Context, u User, ref string) (ActivationStatus, error)
	// Activate checks a login by logging in to the endpoint, keeps it
	// sealed until it expires, and resumes the user's tasks that waited
	// for it.
	Activate(ctx context.Context, u User, ref string, req ActivateRequest) (ActivateResult, error)
	// Deactivate forgets the user's activation and pauses their waiting
	// tasks on the endpoint; it returns the endpoint and how many.
	Deactivate(ctx context.Context, u User, ref string) (Endpoint, int, error)
}

// FileService runs file operations on an endpoint's servers with the
// user's activation.
type FileService interface {
	ServerStates(ctx context.Context, u User, ref string) ([]ServerState, error)
	// List answers a page of a directory's listing: the first page lists
	// the directory on its endpoint, later ones read that listing.
	List(ctx context.Context, u User, ref string, req ListRequest) (Listing, error)
	// Mkdir and Rename return the clean paths they acted on.
	Mkdir(ctx context.Context, u User, ref, path string) (string, error)
	Rename(ctx context.Context, u User, ref, from, to string, overwrite bool) (string, string, error)
}

// EndpointSpec is a request to make or change an endpoint: nil fields
// are left as they are (on creation: the defaults).
type EndpointSpec struct {
	Name, Description, DefaultDir, AuthMethod *string
	Servers                                   []ServerSpec // nil: unchanged
	Public                                    *bool
	MaxConcurrent                             *int
	// Via names the endpoint through which alone this one is reached;
	// "": reached directly.
	Via                            *string
	MyProxyServer, MyProxyServerDN *string
}

// ServerSpec is a server as a request names it: its URI, or its parts.
type ServerSpec struct {
	URI, Scheme, Host string
	Port              int
}

// EndpointView is an endpoint as a user sees it.
type EndpointView struct {
	Endpoint
	Addrs     []ServerSpec // Servers, each with its parts
	Activated bool         // the user may use it now
	ExpiresIn int64        // seconds the activation has left; -1: it needs none
	Connected bool         // a connect endpoint's agent is connected
	SetupKey  *SetupKey    // a new connect endpoint's first setup key
}

// SetupKey is a one-time key with which an agent (ferry connect) pairs
// with its connect endpoint.
type SetupKey struct {
	EndpointID, Key string
	Expires         time.Time
}

// ActivationStatus is whether a user's activation of an endpoint is
// usable, for how many seconds (-1: it needs none), and its grid identity.
type ActivationStatus struct {
	Endpoint     Endpoint
	Activated    bool
	ExpiresIn    int64
	Subject      string
	Requirements []ActivationRequirement // what an activation takes; none: it needs none
}

// ActivationRequirement is one thing an activation of an endpoint takes:
// of a kind (Type: "password", "proxy", "myproxy"), the field Name of an
// activation request, with its label and what it is; Private ones are
// secrets.
type ActivationRequirement struct {
	Type, Name, UIName, Description string
	Required, Private               bool
}

// ActivateRequest is a login for an endpoint: a user name and password, a
// grid proxy (PEM), or a MyProxy username and pass phrase; Lifetime in
// seconds, 0: the default (a proxy: its own lifetime).
type ActivateRequest struct {
	Username, Password, Proxy          string
	MyProxyUsername, MyProxyPassphrase string
	Lifetime                           int64
}

// ActivateResult is what an activation did: Code Activated or
// AlreadyActivated, how many seconds it lasts (-1: never needed), how
// many INACTIVE tasks it resumed, and, through a MyProxy server, every
// endpoint it activated.
type ActivateResult struct {
	Code, Message string
	ExpiresIn     int64
	Subject       string
	Resumed       int
	Endpoints     []ActivatedEndpoint
}

// ActivatedEndpoint is one endpoint an activation activated.
type ActivatedEndpoint struct {
	ID, DisplayName string
	ExpiresIn       int64
	Resumed         int
}

// TaskService takes users' tasks.
type TaskService interface {
	// SubmitTransfer checks a transfer — its paths, its options, that
	// the user may use its endpoints and, as far as they answer in time,
	// that its paths can be copied — and stores its task. A submission
	// ID used before returns that submission's task, created false.
	SubmitTransfer(ctx context.Context, u User, req TransferRequest) (t Task, created bool, err error)
	// SubmitDelete is SubmitTransfer for a delete.
	SubmitDelete(ctx context.Context, u User, req DeleteRequest) (t Task, created bool, err error)
	// PauseInfo says why a task of u's is paused (INACTIVE) and what
	// resumes it.
	PauseInfo(ctx context.Context, u User, id string) (PauseInfo, error)
	// ResumeTask runs an INACTIVE task of u's again.
	ResumeTask(ctx context.Context, u User, id string) error
	Tasks(ctx context.Context, u User, f TaskFilter, p Page) ([]TaskView, int, error)
	// Task is one of u's tasks with where its items are.
	Task(ctx context.Context, u User, id string) (TaskView, error)
	// UpdateTask changes the label and the deadline (nil: kept) of a task
	// that is not over.
	UpdateTask(ctx context.Context, u User, id string, label *string, deadline *time.Time) error
	// CancelTask cancels a task, or with path one file of it.
	CancelTask(ctx context.Context, u User, id, path string) (Result, error)
	Events(ctx context.Context, u User, id string, p Page) ([]Event, int, error)
	// TaskFiles, FailedTransfers, DeletedPaths and PartialPaths page
	// through a task's records after marker; they return the next marker
	// (0: no more).
	TaskFiles(ctx context.Context, u User, id, state string, marker int64, limit int) ([]File, int64, error)
	FailedTransfers(ctx context.Context, u User, id string, marker int64, limit int) ([]FailedFile, int64, error)
	DeletedPaths(ctx context.Context, u User, id string, marker int64, limit int) ([]DeletedPath, int64, error)
	PartialPaths(ctx context.Context, u User, id string, marker int64, limit int) ([]Partial, int64, error)
	// TaskCounts counts all the store's tasks by status.
	TaskCounts(ctx context.Context) (map[string]int, error)
}

// TaskView is a task as its user sees it: its endpoints' names ("" for
// one deleted since), where its items are (one item's paths, or the
// deepest directories holding them all; for Task only), and its mean rate.
type TaskView struct {
	Task
	SrcName, DstName string
	DestNames        []string // of Destinations, in order
	SrcPath, DstPath string
	BytesPerSecond   int64
}

// Result is what an operation did, as a code and in words.
type Result struct{ Code, Message string }

// FailedFile is a file that failed, at the destination endpoint
// DestEndpoint when the task has several ("" else).
type FailedFile struct {
	Src, Dst     string
	Size         int64
	Error        string
	Time         time.Time
	DestEndpoint string
}

// DeletedPath is a Deletion at the destination endpoint DestEndpoint
// ("" for a task with one destination).
type DeletedPath struct {
	Deletion
	DestEndpoint string
}

// PauseInfo is why a task is paused: the event that paused it (a paused
// task's), and the endpoints that hold it, each with what resumes it.
type PauseInfo struct {
	Task        Task
	Description string
	Endpoints   []PausedEndpoint
}

// PausedEndpoint is an endpoint that holds a paused task, and what
// resumes the task (Resume...).
type PausedEndpoint struct {
	ID, DisplayName, Resume string
}

// What resumes a paused task, for one of its endpoints.
const (
	ResumeActivate  = "activate"   // activate the endpoint (again): the task resumes by itself
	ResumeAgent     = "agent"      // the connect endpoint's agent connects: the task resumes by itself
	ResumeFreeSpace = "free_space" // free space there, then resume the task (POST task/{id}/resume)
)

// Submission is what transfers and deletes share: the submission ID
// ("": a new one), the label, the deadline (zero: the service's
// default), and whether to notify (nil: yes).
type Submission struct {
	SubmissionID, Label                                 string
	Deadline                                            time.Time
	NotifyOnSucceeded, NotifyOnFailed, NotifyOnInactive *bool
}

// TransferRequest is a transfer as a user submits it: endpoints by ref,
// paths as given.
type TransferRequest struct {
	Submission
	Source, Destination string
	// Destinations, when given instead of Destination, are several.
	Destinations []DestinationSpec
	// SyncLevel is the level as the API numbers it; nil: copy all.
	SyncLevel                                                   *int
	ChecksumAlgorithm, Tar                                      string
	VerifyChecksum, PreserveTimestamp, EncryptData, Compress    bool
	DeleteDestinationExtra, SkipSourceErrors, FailOnQuotaErrors bool
	FilterRules                                                 []FilterRule
	Items                                                       []Item
}

// DestinationSpec is one destination of a transfer: its endpoint by ref
// and, if not the items' own, a destination path per item.
type DestinationSpec struct {
	Endpoint string
	Paths    []string
}

// DeleteRequest is a delete as a user submits it.
type DeleteRequest struct {
	Submission
	Endpoint                 string
	Recursive, IgnoreMissing bool
	Paths                    []string
}

// ListRequest asks for a page of a directory's listing.
type ListRequest struct {
	Path string // "": the endpoint's default directory
	// Keep says which entries to list; nil: all. Filter names it:
	// requests with one Filter list the same entries.
	Keep   func(name, typ string) bool
	Filter string
	// Unsorted lists in the order the endpoint lists, not by name.
	Unsorted bool
	Page     Page
}

// Listing is a page of a directory's listing and how many entries the
// directory has, filtered.
type Listing struct {
	Endpoint Endpoint
	Path     string
	Page     Page // as normalised
	Files    []FileInfo
	Total    int
}

// AuthService authenticates users by password and by token, and keeps
// their tokens.
type AuthService interface {
	// Authenticate finds the user of a token of kind (TokenAPI,
	// TokenSession) by its secret; check, if not nil, may refuse the
	// token once it is known valid.
	Authenticate(ctx context.Context, kind, secret string, check func(Token) error) (User, Token, error)
	// Login checks a user's password and makes a token; guesses are
	// throttled per user name and per remote address (EThrottled, with
	// RetryAfter).
	Login(ctx context.Context, req LoginRequest) (LoginResult, error)
	// MintToken makes an API token of u for a component of the service
	// that acts as u (the SSH gateway): its secret, and revoke, which
	// ends it.
	MintToken(ctx context.Context, u User, name string, lifetime time.Duration) (secret string, revoke func(), err error)
	Tokens(ctx context.Context, u User) ([]Token, error)
	RevokeToken(ctx context.Context, u User, id int64) error
	// Health checks the store with a cheap lookup.
	Health(ctx context.Context) error
}

// LoginRequest is a login: a user name and password from Remote (an
// address, host:port), for a token of Kind ("": TokenAPI) named Name,
// valid for Lifetime seconds (0: the kind's default).
type LoginRequest struct {
	Username, Password, Remote, Kind, Name string
	Lifetime                               int64
}

// LoginResult is a login's token and its secret; a throttled login's
// seconds to wait.
type LoginResult struct {
	User       User
	Token      Token
	Secret     string
	RetryAfter int64
}

// UserService administers accounts and users' SSH keys.
type UserService interface {
	// AddUser makes an account with a password (hashed here).
	AddUser(ctx context.Context, name, email, password string) (User, error)
	UserByName(ctx context.Context, name string) (User, error)
	UserByID(ctx context.Context, id int64) (User, error)
	// KeyUser is the user named name if one of their SSH keys has
	// fingerprint (SHA256:...); EUnauthorized else.
	KeyUser(ctx context.Context, name, fingerprint string) (User, error)
	Users(ctx context.Context) ([]User, error)
	SetPassword(ctx context.Context, u User, password string) error
	// RemoveUser removes u and all that is theirs (see Store.RemoveUser).
	RemoveUser(ctx context.Context, u User) error
	SSHKeys(ctx context.Context, u User) ([]SSHKey, error)
	// AddSSHKey adds a public key (an authorized_keys line) of u's.
	AddSSHKey(ctx context.Context, u User, line string) (SSHKey, error)
	DeleteSSHKey(ctx context.Context, u User, id int64) error
}

// BookmarkService keeps users' names for paths on endpoints. A bookmark
// that is not u's is answered ENotFound naming id.
type BookmarkService interface {
	Bookmarks(ctx context.Context, u User) ([]Bookmark, error)
	CreateBookmark(ctx context.Context, u User, name, path, endpoint string) (Bookmark, error)
	Bookmark(ctx context.Context, u User, id string) (Bookmark, error)
	// UpdateBookmark changes a bookmark's name and path (nil: kept).
	UpdateBookmark(ctx context.Context, u User, id string, name, path *string) (Bookmark, error)
	DeleteBookmark(ctx context.Context, u User, id string) error
}
