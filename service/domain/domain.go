// Package domain holds the managed service's types — users, tokens,
// endpoints, activations, tasks, their files and events — the one error
// type users see, and the Store interface every database adapter
// implements. It imports none of ferry's adapters.
package domain

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"time"

	"ferry/internal/plural"
	"ferry/internal/synclevel"
)

// User is an account of the service.
type User struct {
	ID           int64
	Name         string
	Email        string // where notifications go; "" for none
	PasswordHash string // bcrypt; the password itself is never stored
	Created      time.Time
}

// Token kinds.
const (
	TokenAPI     = "api"     // bearer token for REST and the CLI
	TokenSession = "session" // web session cookie
)

// Token is a bearer credential for the API. Only a hash of its secret is
// stored.
type Token struct {
	ID       int64
	UserID   int64
	Kind     string // TokenAPI or TokenSession
	Name     string // what the user called it, e.g. the host of `ferry login`
	Hash     string // hex SHA-256 of the secret
	Created  time.Time
	Expires  time.Time // zero: never
	LastUsed time.Time
	Revoked  bool
}

// Valid reports whether the token can be used at now.
func (t Token) Valid(now time.Time) bool {
	return !t.Revoked && (t.Expires.IsZero() || now.Before(t.Expires))
}

// Endpoint authentication methods.
const (
	AuthAnonymous = "anonymous"
	AuthPassword  = "password"
	AuthConnect   = "connect" // a ferry connect agent (issue 6)
	// AuthGSI endpoints are GSI GridFTP servers (gsiftp://): users
	// activate them with a grid proxy, which the service logs in with
	// (AUTH GSSAPI) and delegates to the servers.
	AuthGSI = "gsi"
)

// AuthMethods are the auth methods an endpoint may have.
var AuthMethods = []string{AuthAnonymous, AuthPassword, AuthGSI, AuthConnect}

// Endpoint is a logical storage endpoint, named owner#name, served by one
// or more GridFTP servers (data movers).
type Endpoint struct {
	ID            string // UUID
	OwnerID       int64
	Owner         string // the owner's user name, filled in by the store
	Name          string
	Description   string
	Servers       []string // URLs: ftp://host:port, or gsiftp://host:port for AuthGSI
	Auth          string   // AuthAnonymous, AuthPassword, AuthGSI or AuthConnect
	DefaultDir    string   // "/~/" style default directory; "" means "/"
	Public        bool     // visible to every user (read-only for them)
	MaxConcurrent int      // tasks using this endpoint at once; 0: no limit
	// Via is the ID of the endpoint through which alone this one is
	// reached (a head node in front of a cluster's private network);
	// "": reached directly. Transfers to it go through the relay's
	// server, which forwards and writes nothing; the service itself
	// never connects to it (ViaError). One level: a relay has no Via.
	Via     string
	ViaName string // the relay's owner#name, filled in by the store
	// MyProxyServer is the MyProxy server (host:port, canonical: a lower
	// case host and its port) of a gsi endpoint, from which the service
	// fetches users' proxies to activate it; "": none. Every gsi endpoint
	// naming one server shares a MyProxy activation. MyProxyServerDN, if
	// set, is the server's identity, expected instead of a name of its
	// host.
	MyProxyServer, MyProxyServerDN string
	Created                        time.Time
}

// DisplayName is owner#name.
func (e Endpoint) DisplayName() string { return e.Owner + "#" + e.Name }

// ViaError is what an operation that needs the service to reach an
// endpoint behind a relay is told: the service cannot.
func (e Endpoint) ViaError(what string) error {
	return Errorf(EInvalid, "endpoint %s is reached only through the head node %s, which forwards transfers to it: "+
		"the service cannot reach it to %s", e.DisplayName(), e.ViaName, what)
}

// UsableBy reports whether user userID may use the endpoint — see it, list
// and change its files, move data to and from it: its owner may, and
// everyone while it is public. The API checks it for every request and the
// workers at every start of a task's work, so an endpoint made private is
// no longer used by the tasks of others, submitted before or not.
func (e Endpoint) UsableBy(userID int64) bool { return e.OwnerID == userID || e.Public }

// SplitName splits "owner#name"; a name without '#' belongs to defOwner.
func SplitName(s, defOwner string) (owner, name string) {
	if i := strings.IndexByte(s, '#'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return defOwner, s
}

// Activation is a user's credential for an endpoint, sealed (encrypted)
// by the service before it reaches the store.
type Activation struct {
	UserID     int64
	EndpointID string
	Sealed     []byte // encrypted login; opaque to the store
	Expires    time.Time
	Created    time.Time
	// Subject is who the credential logs in as, when it names it: a
	// grid proxy's identity (the DN of its end-entity certificate); ""
	// for a password. Not secret.
	Subject string
}

// Expired reports whether the activation is no longer usable at now.
func (a Activation) Expired(now time.Time) bool { return !now.Before(a.Expires) }

// DefaultActivationLifetime is how long an activation lasts unless the
// user asks for less.
const DefaultActivationLifetime = 12 * time.Hour

// Task types.
const (
	TypeTransfer = "TRANSFER"
	TypeDelete   = "DELETE"
)

// Task statuses, as in the transfer API.
const (
	StatusActive    = "ACTIVE"
	StatusInactive  = "INACTIVE"
	StatusSucceeded = "SUCCEEDED"
	StatusFailed    = "FAILED"
)

// Nice statuses: why a task is where it is. "" while done.
const (
	NiceOK                = "OK"
	NiceQueued            = "Queued"
	NiceCredentialExpired = "CREDENTIAL_EXPIRED"
	NiceNotActivated      = "NOT_ACTIVATED"
	NiceConnectFailed     = "CONNECT_FAILED"
	NicePermissionDenied  = "PERMISSION_DENIED"
	NiceFileNotFound      = "FILE_NOT_FOUND"
	NiceChecksumMismatch  = "CHECKSUM_MISMATCH"
	NiceEndpointOffline   = "ENDPOINT_OFFLINE" // a connect agent is away
	NiceNoSpace           = "NO_SPACE"         // the destination is full or over quota
)

// Done reports whether the status is final.
func Done(status string) bool { return status == StatusSucceeded || status == StatusFailed }

// FilterRule includes or excludes names during a recursive transfer.
type FilterRule struct {
	Method string `json:"method"` // "include" or "exclude"
	Name   string `json:"name"`   // a glob matched against the base name
	Type   string `json:"type"`   // "file", "dir" or "" for both
}

// Item is one path of a task: a file or, when Recursive, a directory.
type Item struct {
	Src       string `json:"source_path"`
	Dst       string `json:"destination_path"`
	Recursive bool   `json:"recursive"`
}

// TarModes are when a transfer may move trees of small files as tar
// streams: when the file mix favours it, always, or never.
var TarModes = []string{"auto", "always", "never"}

// Options are a transfer task's choices, echoed back in the task document.
type Options struct {
	SyncLevel              synclevel.Level `json:"sync_level"` // recorded as -1 (none) to 3
	VerifyChecksum         bool            `json:"verify_checksum"`
	ChecksumAlgorithm      string          `json:"checksum_algorithm,omitempty"`
	EncryptData            bool            `json:"encrypt_data,omitempty"`
	PreserveTimestamp      bool            `json:"preserve_timestamp"`
	Tar                    string          `json:"tar,omitempty"` // TarModes; "": auto
	Compress               bool            `json:"compress,omitempty"`
	DeleteDestinationExtra bool            `json:"delete_destination_extra"`
	FilterRules            []FilterRule    `json:"filter_rules,omitempty"`
	// SkipSourceErrors skips a source path that is missing or not
	// allowed when the task reaches it (recorded FileSkippedError)
	// instead of failing it; FailOnQuotaErrors fails the task at once
	// when a destination is full or over quota, instead of pausing it
	// (INACTIVE, NiceNoSpace) until someone frees space.
	SkipSourceErrors  bool `json:"skip_source_errors,omitempty"`
	FailOnQuotaErrors bool `json:"fail_on_quota_errors,omitempty"`
	NotifyOnSucceeded bool `json:"notify_on_succeeded"`
	NotifyOnFailed    bool `json:"notify_on_failed"`
	NotifyOnInactive  bool `json:"notify_on_inactive"`
	// Delete tasks only.
	IgnoreMissing bool `json:"ignore_missing,omitempty"`
}

// Counters are a task's running totals.
//
// A delete task counts the paths it was given in FilesTransferred
// (deleted), FilesSkipped (missing, with IgnoreMissing) and FilesFailed,
// and what it removed, the paths among them, in Files and Directories.
type Counters struct {
	Files            int64 // files found so far; a delete task's files removed
	Directories      int64 // a delete task's directories removed
	FilesTransferred int64
	FilesSkipped     int64
	FilesFailed      int64
	BytesTransferred int64
	BytesTotal       int64 // expected to move: moved before the current run + the sizes it plans to send
	BytesChecksummed int64
	Faults           int64
}

// Paths is how many of its paths a delete task with counters c has done.
func (c Counters) Paths() int64 { return c.FilesTransferred + c.FilesSkipped + c.FilesFailed }

// DeleteSummary is what a delete task with counters c did, in words: the
// paths done, what deleting them removed, how many were missing and how
// many failed, e.g. "1 path: 100 files and 1 directory deleted, 0 missing,
// 0 failed".
func (c Counters) DeleteSummary() string {
	removed := plural.Count(c.Files, "file")
	if c.Directories > 0 {
		removed += " and " + plural.Count(c.Directories, "directory")
	}
	return fmt.Sprintf("%s: %s deleted, %d missing, %d failed", plural.Count(c.Paths(), "path"), removed, c.FilesSkipped, c.FilesFailed)
}

// Add adds d to c.
func (c *Counters) Add(d Counters) {
	c.Files += d.Files
	c.Directories += d.Directories
	c.FilesTransferred += d.FilesTransferred
	c.FilesSkipped += d.FilesSkipped
	c.FilesFailed += d.FilesFailed
	c.BytesTransferred += d.BytesTransferred
	c.BytesTotal += d.BytesTotal
	c.BytesChecksummed += d.BytesChecksummed
	c.Faults += d.Faults
}

// Task is one submitted transfer or delete.
type Task struct {
	ID           string // UUID
	UserID       int64
	SubmissionID string
	Type         string // TypeTransfer or TypeDelete
	Label        string
	Status       string
	NiceStatus   string
	FatalError   *FatalError
	SrcEndpoint  string // endpoint ID; for a delete task, the endpoint
	DstEndpoint  string // endpoint ID; "" for a delete task; the first of several
	// Destinations, for a transfer to several endpoints, are all of
	// them in order (the first is DstEndpoint); nil for one destination.
	Destinations   []Destination
	Items          []Item
	Options        Options
	Deadline       time.Time // zero: none
	RequestTime    time.Time
	StartTime      time.Time // first claimed by a worker
	CompletionTime time.Time
	Counters
	CancelRequested bool

	// Lease: the worker that runs the task and until when, persisted so
	// that another process takes over after a crash.
	Worker       string
	LeaseExpires time.Time
}

// MaxDestinations bounds the destinations of one transfer task.
const MaxDestinations = 16

// Destination is one destination of a transfer task with several: an
// endpoint, where the task's items go there, and its own counters. The
// task's counters count a source file done once it is done at every
// destination.
type Destination struct {
	Endpoint string   // endpoint ID
	Paths    []string // each item's destination path there, in the items' order; nil: the items' own
	DestCounters
}

// DestCounters are one destination's totals: files that arrived there
// (sent by the tree or repaired), that were there already, that failed
// to arrive, and the bytes of those that arrived.
type DestCounters struct {
	FilesTransferred int64
	FilesSkipped     int64
	FilesFailed      int64
	BytesTransferred int64
}

// Endpoints are the IDs of every endpoint the task uses: the source,
// then each destination.
func (t Task) Endpoints() []string {
	ids := []string{t.SrcEndpoint}
	switch {
	case len(t.Destinations) > 0:
		for _, d := range t.Destinations {
			ids = append(ids, d.Endpoint)
		}
	case t.DstEndpoint != "":
		ids = append(ids, t.DstEndpoint)
	}
	return ids
}

// DestItems are items as they go to destination d: with d's paths, when
// it has its own.
func (d Destination) DestItems(items []Item) []Item {
	out := make([]Item, len(items))
	for i, it := range items {
		if i < len(d.Paths) {
			it.Dst = d.Paths[i]
		}
		out[i] = it
	}
	return out
}

// DestFile is the record of one source file at one destination of a
// task with several: the last outcome there, SUCCEEDED (arrived),
// SKIPPED (there already) or FAILED. A file recorded SUCCEEDED or
// SKIPPED at a destination is never sent there again, even after a
// crash.
type DestFile struct {
	Dest     int // index in Task.Destinations
	Src, Dst string
	Size     int64
	State    string
	Error    string
	Time     time.Time
}

// FatalError says why a task failed.
type FatalError struct {
	Code        string `json:"code"`
	Description string `json:"description"`
}

// File states of a task's file record.
const (
	FileSucceeded = "SUCCEEDED" // transferred and (if asked) verified
	FileSkipped   = "SKIPPED"   // the sync level found it already there
	FileFailed    = "FAILED"
	FileCanceled  = "CANCELED" // the user canceled this one file
	// FileSkippedError: the source refused it (missing, not allowed) and
	// the task skips source errors (Options.SkipSourceErrors).
	FileSkippedError = "SKIPPED_ERROR"
)

// File is the final record of one file of a task. A file recorded
// SUCCEEDED or SKIPPED is never sent again, even after a crash.
type File struct {
	TaskID    string
	Src, Dst  string
	Size      int64
	State     string
	Algorithm string // checksum algorithm when verified
	Checksum  string
	Error     string
	Time      time.Time
}

// SplitDir splits a file's path after its last slash: dir is the path
// up to and including it ("" for a path without one), name the rest, so
// that dir+name is the path. The store keeps a task's file records by
// directory (Store.RecordedIn) in these terms.
func SplitDir(path string) (dir, name string) {
	i := strings.LastIndexByte(path, '/') + 1
	return path[:i], path[i:]
}

// Deletion is one path a transfer deleted at a destination because its
// source does not have it (Options.DeleteDestinationExtra): an extra
// entry, or what an extra directory held (reported before the directory).
type Deletion struct {
	Dest int // the destination's index in Task.Destinations; 0 for a task with one
	Path string
	Dir  bool
	Size int64 // a file's size
	Time time.Time
}

// Event codes.
const (
	EventQueued           = "QUEUED"
	EventStarted          = "STARTED"
	EventProgress         = "PROGRESS"
	EventFault            = "FAULT"
	EventRetry            = "RETRY"
	EventChecksumMismatch = "CHECKSUM_MISMATCH"
	EventPermissionDenied = "PERMISSION_DENIED"
	EventConnectFailed    = "CONNECT_FAILED"
	EventFileFailed       = "FILE_FAILED"
	EventFileCanceled     = "FILE_CANCELED"
	EventSkippedError     = "SKIPPED_ERROR" // a source path skipped (Options.SkipSourceErrors)
	EventInactive         = "INACTIVE"
	EventResumed          = "RESUMED"
	EventLeaseTaken       = "LEASE_TAKEN" // another worker took over the task
	EventRestarted        = "RESTARTED"   // the worker's process restarted and took the task back
	EventCanceled         = "CANCELED"
	EventSucceeded        = "SUCCEEDED"
	EventFailed           = "FAILED"
	EventDeadline         = "DEADLINE"
	// A destination of several failed as a whole (unreachable, refused).
	EventDestinationFailed = "DESTINATION_FAILED"
	// How large files move: striped over an endpoint's data movers,
	// spread over its servers, and which one trials chose.
	EventWay = "WAY"
	// EventTuned: the engine's optimizer changed the number of session
	// pairs, and why (the rate it saw).
	EventTuned = "TUNED"
	// EventDeleted: paths deleted at a destination because the source
	// does not have them (Options.DeleteDestinationExtra); its details
	// list every one (Task Deletions keeps them too).
	EventDeleted = "DELETED"
	// EventLeftPartial: a task that is over left files it started and
	// did not finish at the destination (Store.Partials lists them).
	EventLeftPartial = "LEFT_PARTIAL"
	// EventStoreOut: the database was unreachable for a while, and the
	// task's worker recorded what it did meanwhile once it was back.
	EventStoreOut = "DATABASE_UNREACHABLE"
)

// Event is one entry of a task's history.
type Event struct {
	TaskID      string
	Seq         int64 // assigned by the store, increasing per task
	Code        string
	Description string
	Details     string
	IsError     bool
	Time        time.Time
}

// CleanPath makes an endpoint path absolute and clean and refuses NUL
// bytes; "" becomes def (or "/").
func CleanPath(p, def string) (string, error) {
	if p == "" {
		p = def
	}
	if p == "" {
		p = "/"
	}
	if strings.ContainsRune(p, 0) || strings.ContainsAny(p, "\r\n") {
		return "", Errorf(EInvalid, "path %q contains a control character", p)
	}
	dir := strings.HasSuffix(p, "/")
	p = path.Clean("/" + p)
	if dir && p != "/" {
		p += "/"
	}
	return p, nil
}

// ValidName reports whether s can be a user or endpoint name.
func ValidName(s string) error {
	if s == "" || len(s) > 64 {
		return Errorf(EInvalid, "name %q: want 1 to 64 characters", s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@", r)) {
			return Errorf(EInvalid, "name %q: only letters, digits and . _ - @ are allowed", s)
		}
	}
	return nil
}

func (t Task) String() string { return fmt.Sprintf("task %s (%s)", t.ID, t.Status) }

// Login is an endpoint credential in the clear. It lives only in memory:
// the store keeps it sealed in an Activation. A password endpoint's is a
// user and password; a gsi endpoint's is a grid proxy (PEM: certificate,
// key, chain), and the user to log in as ("": the server's grid-mapfile
// mapping). Its String and LogValue show no secret.
type Login struct {
	User     string `json:"username"`
	Password string `json:"password"`
	Proxy    string `json:"proxy,omitempty"`
}

func (l Login) String() string {
	switch {
	case l.Proxy != "":
		return fmt.Sprintf("grid proxy login (user %q)", l.User)
	case l.User != "":
		return fmt.Sprintf("login of %q", l.User)
	}
	return "no login"
}

// LogValue keeps secrets out of logs.
func (l Login) LogValue() slog.Value { return slog.StringValue(l.String()) }

// FileInfo is one entry of an endpoint directory.
type FileInfo struct {
	Name        string
	Type        string // "file", "dir" or "link"
	Size        int64
	Permissions string // octal, e.g. "0644"
	User, Group string
	Modified    time.Time
}

// FileOps reaches endpoint servers for activation checks and the API's
// file operations. Errors are *Error: ENotFound for a missing path,
// EForbidden for a refused one, EUnauthorized for a rejected login,
// EUnavailable when no server of the endpoint answers, ETimeout when a
// server did not answer in time.
type FileOps interface {
	Check(ctx context.Context, ep Endpoint, l Login) error
	// List calls fn with each entry of the directory path as the listing
	// arrives, in the server's order; an error from fn stops it.
	List(ctx context.Context, ep Endpoint, l Login, path string, fn func(FileInfo) error) error
	Mkdir(ctx context.Context, ep Endpoint, l Login, path string) error
	// Rename refuses (EConflict) a to that exists, unless overwrite.
	Rename(ctx context.Context, ep Endpoint, l Login, from, to string, overwrite bool) error
	// Delete deletes the file path or, when recursive, path and everything
	// below it, calling removed (if not nil) with each path it removed:
	// whether it was a directory.
	Delete(ctx context.Context, ep Endpoint, l Login, path string, recursive bool, removed func(dir bool)) error
	// CheckTransfer looks up a transfer's items at both ends before it is
	// accepted: EInvalid or ENotFound for an item that cannot be copied
	// (a missing source, a directory without recursion, a destination
	// that is the source or inside it, a file where a directory is
	// needed), with a message naming the endpoint.
	// With EncryptData in o, both endpoints must be able to encrypt.
	// With DeleteDestinationExtra, a destination that holds its source is
	// refused too (its other entries would be deleted).
	CheckTransfer(ctx context.Context, src, dst Endpoint, srcLogin, dstLogin Login, items []Item, o Options) error
	// CheckDelete looks up a delete's items before it is accepted:
	// ENotFound for a missing path (unless ignoreMissing), EInvalid for a
	// directory without Recursive, with a message naming the endpoint.
	CheckDelete(ctx context.Context, ep Endpoint, l Login, items []Item, ignoreMissing bool) error
	// Overlap refuses, by its paths alone and asking no server, an item
	// whose source and destination are on one storage when its
	// destination is its source, lies inside it or (deleting extras)
	// holds it: EInvalid naming dst. It is the rule CheckTransfer and the
	// workers apply, with symlinks followed, when they reach the servers.
	Overlap(dst Endpoint, it Item, o Options) error
	// ServerStates probes each of the endpoint's servers, in order.
	ServerStates(ctx context.Context, ep Endpoint, l Login) ([]ServerState, error)
}

// ServerState is what a probe of one of an endpoint's servers found: it
// took a login or not (Error says why), and, for a striped front end,
// how many stripes it offers (SPAS: one per data mover) and, for ferry's,
// its movers and theirs (SITE MOVERS).
type ServerState struct {
	URI     string
	Up      bool
	Error   string
	Stripes int
	Movers  []MoverState
}

// MoverState is one data mover of a striped ferry front end.
type MoverState struct {
	Index  int
	Addr   string
	Up     bool
	Reason string // why it is down
}
