package domain

import (
	"context"
	"time"
)

// Store keeps the service's state. SQLite and PostgreSQL implement it and
// pass one shared suite (service/storetest). Every method is safe
// for concurrent use, also by several processes sharing one database.
//
// Lookups of missing rows return an *Error with ENotFound. Methods scoped
// to a user (userID argument) treat other users' rows as missing, so
// nothing leaks.
type Store interface {
	// Users.
	CreateUser(ctx context.Context, u *User) error // sets ID, Created; EConflict on a taken name
	UserByName(ctx context.Context, name string) (User, error)
	UserByID(ctx context.Context, id int64) (User, error)
	SetPassword(ctx context.Context, userID int64, hash string) error
	Users(ctx context.Context) ([]User, error) // ordered by name
	// RemoveUser deletes a user and all that is theirs: tokens, SSH keys,
	// bookmarks, activations, finished tasks and endpoints (and the
	// others' bookmarks of those). EConflict while a task
	// of theirs has not ended, or one of their endpoints is in use: by
	// another user's unfinished task, or as another's endpoint's head node.
	RemoveUser(ctx context.Context, userID int64) error

	// Tokens.
	CreateToken(ctx context.Context, t *Token) error // sets ID, Created
	TokenByHash(ctx context.Context, hash string) (Token, error)
	Tokens(ctx context.Context, userID int64) ([]Token, error)
	RevokeToken(ctx context.Context, userID, tokenID int64) error
	TouchToken(ctx context.Context, tokenID int64, now time.Time) error

	// SSH keys of the SSH command gateway.
	AddSSHKey(ctx context.Context, k *SSHKey) error              // sets ID, Created; EConflict when the user has the key
	SSHKeys(ctx context.Context, userID int64) ([]SSHKey, error) // oldest first
	DeleteSSHKey(ctx context.Context, userID, keyID int64) error

	// Bookmarks, a user's own; reads fill in EndpointName.
	CreateBookmark(ctx context.Context, b *Bookmark) error           // sets ID, Created; EConflict on a name the user has
	Bookmarks(ctx context.Context, userID int64) ([]Bookmark, error) // ordered by name
	Bookmark(ctx context.Context, userID int64, id string) (Bookmark, error)
	UpdateBookmark(ctx context.Context, b Bookmark) error // name and path, by ID and UserID; EConflict on a name the user has
	DeleteBookmark(ctx context.Context, userID int64, id string) error

	// Endpoints. Endpoint reads fill in Owner.
	CreateEndpoint(ctx context.Context, e *Endpoint) error // sets ID, Created; EConflict on a taken owner#name
	Endpoint(ctx context.Context, id string) (Endpoint, error)
	EndpointByName(ctx context.Context, owner, name string) (Endpoint, error)
	// Endpoints lists the endpoints userID may see (its own, and public
	// ones unless mineOnly) whose owner#name or description contains
	// text (case-insensitive), ordered by owner#name.
	Endpoints(ctx context.Context, userID int64, text string, mineOnly bool, page Page) ([]Endpoint, int, error)
	UpdateEndpoint(ctx context.Context, e Endpoint) error // by ID; owner and ID are not changed
	DeleteEndpoint(ctx context.Context, id string) error  // also its activations; EConflict while an endpoint's Via names it
	// EndpointsVia lists the endpoints reached through endpoint id (whose
	// Via is id). CreateEndpoint and UpdateEndpoint refuse a Via naming
	// no endpoint (ENotFound); the API checks the rest.
	EndpointsVia(ctx context.Context, id string) ([]Endpoint, error)
	// EndpointsByMyProxy lists the gsi endpoints user userID may use
	// (its own and public ones) that name MyProxy server server
	// (Endpoint.MyProxyServer), ordered by owner#name.
	EndpointsByMyProxy(ctx context.Context, userID int64, server string) ([]Endpoint, error)

	// Connect endpoints' pairing (connect.go).
	//
	// CreateConnectEndpoint stores e, a connect endpoint, together with its
	// first one-time setup key (as NewSetupKey), in one transaction: when
	// either fails, neither is stored. It sets ID and (if zero) Created;
	// EConflict on a taken owner#name, EInvalid when e is not a connect
	// endpoint.
	CreateConnectEndpoint(ctx context.Context, e *Endpoint, hash string, expires time.Time) error
	// NewSetupKey gives connect endpoint id a new one-time setup key,
	// stored as the hash of its secret, usable until expires, and revokes
	// the certificates issued so far: it starts a new generation, which it
	// returns. ENotFound for a missing endpoint, EInvalid for one that is
	// not a connect endpoint.
	NewSetupKey(ctx context.Context, endpointID, hash string, expires time.Time) (int64, error)
	// UseSetupKey consumes the setup key whose secret has this hash: it
	// returns its endpoint and the generation of the certificate to issue.
	// ENotFound when no endpoint has the key (never issued, used already,
	// replaced) or it expired at now.
	UseSetupKey(ctx context.Context, hash string, now time.Time) (endpointID string, generation int64, err error)
	// CertGeneration is the generation of the valid certificates of
	// connect endpoint id; ENotFound once the endpoint is deleted.
	CertGeneration(ctx context.Context, endpointID string) (int64, error)

	// Service processes and the agents connected to them (connect.go).
	//
	// InitCA stores sealed as the service's connect CA unless one is
	// stored already, and returns the one stored: processes that start
	// at once all get the first one's.
	InitCA(ctx context.Context, sealed []byte) ([]byte, error)
	// PutProcess records p, or renews its record, and forgets the records
	// that lapsed a day or more before p.Expires.
	PutProcess(ctx context.Context, p Process) error
	// DeleteProcess forgets process id; ENotFound when it has no record.
	DeleteProcess(ctx context.Context, id string) error
	// Processes lists the processes whose records hold at now, by ID.
	Processes(ctx context.Context, now time.Time) ([]Process, error)
	// PutAgentRoute records that the agent of endpointID is connected to
	// process processID, wherever it was before; ENotFound for a missing
	// endpoint.
	PutAgentRoute(ctx context.Context, endpointID, processID string) error
	// DeleteAgentRoute forgets that the agent of endpointID is connected
	// to processID; a route to another process stays.
	DeleteAgentRoute(ctx context.Context, endpointID, processID string) error
	// AgentRoutes gives, for each of endpointIDs whose agent is connected
	// to a process whose record holds at now, that process.
	AgentRoutes(ctx context.Context, endpointIDs []string, now time.Time) (map[string]Process, error)

	// Activations: one per (user, endpoint).
	PutActivation(ctx context.Context, a Activation) error // insert or replace
	Activation(ctx context.Context, userID int64, endpointID string) (Activation, error)
	DeleteActivation(ctx context.Context, userID int64, endpointID string) error

	// Tasks.
	//
	// CreateTask stores a new ACTIVE task with NiceQueued and a QUEUED
	// event; it sets ID, and RequestTime if zero. A (user, submission ID)
	// seen before returns that task and an *Error with EDuplicate, and
	// stores nothing; an empty submission ID is never a duplicate.
	CreateTask(ctx context.Context, t *Task) error
	// CreateTask keeps a task's Destinations (when it has several) with
	// their paths; DstEndpoint is then the first's.
	//
	// Task, TaskByID, Tasks and the lease methods return tasks without
	// their Items, which may be many; TaskItems reads them. They return
	// the Destinations with their counters.
	Task(ctx context.Context, userID int64, id string) (Task, error)
	TaskItems(ctx context.Context, id string) ([]Item, error)
	TaskByID(ctx context.Context, id string) (Task, error) // for workers: not scoped to a user
	Tasks(ctx context.Context, userID int64, f TaskFilter, page Page) ([]Task, int, error)
	// UpdateTask changes the label and deadline of a task of userID.
	UpdateTask(ctx context.Context, userID int64, id, label string, deadline time.Time) error
	// RequestCancel marks a task of userID for cancellation; the worker
	// running it (or the next to claim it) stops it. A queued or inactive
	// task is failed at once with a CANCELED event. Done tasks are left.
	RequestCancel(ctx context.Context, userID int64, id string, now time.Time) (Task, error)
	// CancelFile marks one file of a running task so it is not sent; the
	// worker records it FileCanceled. EConflict if the task is done.
	CancelFile(ctx context.Context, userID int64, id, src string) error
	CanceledFiles(ctx context.Context, taskID string) ([]string, error)
	// TaskCounts counts every task by status (the Status* constants), in
	// one aggregate query: what the service's metrics read at each scrape.
	// Statuses no task has are absent.
	TaskCounts(ctx context.Context) (map[string]int, error)
	// Watch reports the IDs of tasks whose running work must look at them
	// again at once — a cancel, a canceled file, a changed deadline, a
	// changed endpoint — as any process sharing the store asks for it,
	// within about a second, until ctx ends (then the channel closes). An
	// empty ID means some may have been missed: look at every task.
	Watch(ctx context.Context) (<-chan string, error)

	// Claim gives worker a runnable task and a lease on it until
	// now+lease: an ACTIVE task with no live lease, whose user runs fewer
	// than perUser leased tasks (0: no limit) and whose endpoints are below
	// their MaxConcurrent. Of those it is the oldest of the user running
	// fewest leased tasks, so that users with backlogs take turns. Tasks whose lease expired (a dead worker) are
	// claimable again; taking one over from another worker appends a
	// LEASE_TAKEN event. The claimed task's nice status is NiceOK.
	// ENotFound when there is none. Safe across processes: two workers
	// never hold the same task, and the limits hold.
	Claim(ctx context.Context, worker string, now time.Time, lease time.Duration, perUser int) (Task, error)
	// Reclaim gives worker back, with a new lease until now+lease, the
	// ACTIVE tasks whose lease it holds, live or lapsed: a process that
	// restarts under the same worker name takes its work back at once
	// instead of waiting for the leases to lapse.
	Reclaim(ctx context.Context, worker string, now time.Time, lease time.Duration) ([]Task, error)
	// Heartbeat extends worker's lease; ENotFound if the lease was lost
	// (expired and taken by another worker, or the task is no longer
	// ACTIVE). It returns the task's current state so the worker sees a
	// requested cancel, label or deadline change.
	Heartbeat(ctx context.Context, taskID, worker string, now time.Time, lease time.Duration) (Task, error)
	// Progress persists a batch in one transaction. It fails with
	// ENotFound if worker no longer holds the lease, and then stores
	// nothing. A DestFile replaces the record of its (destination,
	// source) and the destination's counters follow: they count each
	// source file once, in its last state.
	Progress(ctx context.Context, taskID, worker string, b Batch) error
	// Partials lists what the task's workers knew of files they did not
	// finish (the files a task that is over left partial), in the order
	// they were first recorded, limit at most (Page's default and cap)
	// after marker (0: from the first), and the marker of the next page
	// (0: none), as Files does.
	Partials(ctx context.Context, taskID string, marker int64, limit int) ([]Partial, int64, error)
	// SetStatus ends or pauses the lease: it sets status, nice status and
	// fatal error (and completion time when done), releases the lease and
	// appends events, in one transaction; ENotFound if worker no longer
	// holds the lease.
	SetStatus(ctx context.Context, taskID, worker, status, nice string, fatal *FatalError, now time.Time, events []Event) error
	// ResumeTask turns userID's INACTIVE task id back to ACTIVE (queued)
	// with a RESUMED event, whatever it waited for: the user says it is
	// ready (space freed at a full destination). EConflict if the task is
	// not INACTIVE.
	ResumeTask(ctx context.Context, userID int64, id string, now time.Time) error
	// The methods below that select tasks by an endpoint they use count
	// every destination of a task with several, as Claim's limits do,
	// and the relay (Endpoint.Via) of each destination.
	//
	// Reactivate turns userID's INACTIVE tasks that use endpointID back to
	// ACTIVE (claimable) with a RESUMED event; it returns how many.
	Reactivate(ctx context.Context, userID int64, endpointID string, now time.Time) (int, error)
	// ResumeEndpoint turns every INACTIVE task that uses endpointID and
	// waits with the given nice status (an agent that was away) back to
	// ACTIVE with a RESUMED event; it returns how many.
	ResumeEndpoint(ctx context.Context, endpointID, nice string, now time.Time) (int, error)
	// Deactivate turns ACTIVE tasks of userID that use endpointID and that
	// no worker holds INACTIVE with the given nice status (used when a
	// credential is removed); leased ones are found by their worker.
	Deactivate(ctx context.Context, userID int64, endpointID, nice string, now time.Time) (int, error)

	// Files and events.
	//
	// RecordedIn calls fn with the name (after dir: SplitDir) and the
	// destination of every file of the task recorded in directory dir,
	// whatever its state, in no set order; fn must not call the store. It reads the records of
	// that directory only: a worker asks it directory by directory
	// rather than holding every record of a task.
	RecordedIn(ctx context.Context, taskID, dir string, fn func(name, dst string)) error
	// Files lists a task's file records in state (all states if ""),
	// ordered as they were recorded (one Progress call's by directory),
	// after the marker (0: from the start); it returns the marker of the
	// next page (0: no more). A page costs the same however many records
	// the task has.
	Files(ctx context.Context, taskID, state string, marker int64, limit int) ([]File, int64, error)
	// DestFiles lists the per-destination file records of a task with
	// several destinations, of destination dest (every one if dest < 0)
	// in state (all if ""), paged as Files.
	DestFiles(ctx context.Context, taskID string, dest int, state string, marker int64, limit int) ([]DestFile, int64, error)
	// Deletions lists what a task deleted at its destinations because
	// the source lacks it (Options.DeleteDestinationExtra), in the order
	// it went, paged as Files.
	Deletions(ctx context.Context, taskID string, marker int64, limit int) ([]Deletion, int64, error)
	Events(ctx context.Context, taskID string, page Page) ([]Event, int, error)
	AddEvents(ctx context.Context, events []Event) error

	Close() error
}

// Batch is what a worker persists of a task at once: counter deltas, file
// records, deletions, events, and partials to put (or, with an empty
// State, delete).
type Batch struct {
	Delta     Counters
	Files     []File
	DestFiles []DestFile
	Deletions []Deletion
	Events    []Event
	Partials  []Partial
}

// Partial is what a worker knows of a file of a task that it has not
// finished, in the worker's own encoding (State, opaque to the store), so
// that a later run sends only the rest; and, for users, the file's size
// and the bytes known to be at the destination. A Batch's Partial with
// no State deletes the file's record.
type Partial struct {
	Src, State string
	Size, Have int64
}

// Page is offset paging; Limit 0 means the store's default (100), and
// limits above 1000 are cut to 1000.
type Page struct{ Limit, Offset int }

// Normal returns p with its limit defaulted and capped.
func (p Page) Normal() Page {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	if p.Limit > 1000 {
		p.Limit = 1000
	}
	if p.Offset < 0 {
		p.Offset = 0
	}
	return p
}

// TaskFilter selects tasks in Tasks. Empty fields select all.
type TaskFilter struct {
	Status []string // any of these
	Type   []string
	Label  string // substring
	Newest bool   // order by request time descending (the default is ascending)
}
