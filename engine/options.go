package engine

import (
	"context"
	"fmt"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/internal/synclevel"
)

// Endpoint is one GridFTP server and the login it takes.
type Endpoint struct {
	Addr     string // host:port
	User     string // "" means anonymous
	Password string
	// Dial opens its control connections; nil: TCP to Addr.
	Dial client.DialFunc
	// Outbound marks a server that accepts no connections (ferry
	// connect): when it receives, it connects to a source that can listen
	// as a sender (FEAT PASVSEND); from other sources its passive address
	// must lead to a relay.
	Outbound bool
	// Local marks a server on loopback for this process's own use (ferry
	// copy's local paths): no other server can reach it.
	Local bool
	// Servers are more servers of the same storage (host:port), which
	// take the same login: the chunks of a large file are spread over
	// sessions to Addr and to them (ways.go).
	Servers []string
	// Auth, when set, logs sessions in instead of User and Password: a
	// grid credential (client.GSILogin, gsiftp://).
	Auth client.Authenticator
	// DataIdentity is the grid identity the server's data channels prove
	// after DCAU A without a DCSC (server.Server.DataCred): ferry copy's
	// own server, holding the user's proxy. With a gsiftp:// end of that
	// identity the data channel between them is authenticated.
	DataIdentity string
}

func (e Endpoint) String() string { return e.Addr }

// dial opens and logs in one control session.
func (e Endpoint) dial(ctx context.Context) (*client.Conn, error) {
	c, err := client.DialWith(ctx, e.Dial, e.Addr)
	if err != nil {
		return nil, err
	}
	auth := e.Auth
	if auth == nil {
		user, pass := e.User, e.Password
		if user == "" {
			user, pass = "anonymous", "ferry@"
		}
		auth = client.Password{User: user, Password: pass}
	}
	if err := auth.Authenticate(ctx, c); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", e.Addr, err)
	}
	return c, nil
}

// Options shape a copy. Zero values mean "choose for me".
type Options struct {
	Concurrency int   // session pairs; 0: chosen from the file mix and RTT
	Parallelism int   // data streams per transfer; 0: chosen
	Pipelining  int   // transfers in flight per session pair; 0: chosen
	ChunkSize   int64 // files larger than twice this are chunked; 0: chosen, <0: never
	// StripeSize is the size from which a file is striped or spread over
	// an endpoint's servers (ways.go); 0: 64 MiB, <0: never.
	StripeSize int64

	Recursive     bool
	SyncLevel     synclevel.Level
	Verify        bool   // compare checksums of every file (or chunk) at both ends
	Encrypt       bool   // encrypt the data channels (PROT P): both ends must offer FEAT DATATLS
	Algorithm     string // checksum algorithm; "": the fastest both ends offer
	PreserveMtime bool
	Tar           TarMode // when small files move as tar streams
	// InPlace writes each file under its final name as it arrives, for
	// destinations that cannot rename. By default a file is written under
	// a temporary name in its directory (partname.For) and renamed over
	// its final name once all its data landed and, with Verify, matched:
	// no file short of its data bears its final name.
	InPlace  bool
	Compress bool // compress data in flight, where both ends offer it (ferry servers)

	Deadline    time.Time     // give up retrying then; zero: MaxAttempts decides
	MaxAttempts int           // tries per file or chunk; 0: 5
	Backoff     time.Duration // first retry delay, doubled each time (fault.Backoff); 0: 1 s
	MaxBackoff  time.Duration // the longest retry delay; 0: 1 min
	// StallTimeout bounds how long a transfer may move no data, by its
	// markers, before it is stalled: ended, reported as a fault and sent
	// again from the ranges that arrived. 0: the longer of 15 s and 100
	// round trips of the control channels; <0: never.
	StallTimeout time.Duration

	// Recursive walks (select.go). Skip, when set, is asked about each
	// entry a walk finds, file or directory; true leaves it out entirely:
	// not sent, not compared, not reported, not counted (a resumed task
	// leaves out what it already did). Filters include or exclude entries
	// by name. DeleteExtra deletes, in each directory walked, what the
	// destination has and the source does not, and reports each path it
	// deletes (Deleter); a destination that holds its source is refused.
	Skip        func(src, dst string) bool
	Filters     []Filter
	DeleteExtra bool

	// SkipSourceErrors skips, instead of failing, a source path that the
	// source cannot give when the copy reaches it: missing or not allowed
	// (SourceError). It is reported with the Outcome SkippedError.
	SkipSourceErrors bool

	// Cancels, when set, are files the caller cancels before or while the
	// copy runs (cancel.go).
	Cancels *Cancels

	// Resume says that the destination may hold files of an interrupted
	// run of this copy. A file there of the source's size is compared by
	// checksum and, when equal, reported Transferred without being sent
	// again; Restart, when set, gives what an earlier run reported of a
	// file (a Partials reporter), and a transfer of a source unchanged
	// since then sends only what is missing.
	Resume  bool
	Restart func(src string) (Partial, bool)

	// Fanout is the fan-out of CopyMany's tree; 0: chosen.
	Fanout int

	fan *fanout // the tree pass of CopyMany: the destination forwards
}

// blind reports a copy to a relay that writes nothing itself and
// forwards to a host the engine cannot reach (Target.Via): the
// destination is not listed, compared or made; the relay's child makes
// directories and the relay checks its copy.
func (o Options) blind() bool { return o.fan != nil && o.fan.relay }

// Partial is what an interrupted transfer of one file left at the
// destination: the ranges that arrived, of the source as it was then.
type Partial struct {
	Size   int64
	Modify time.Time
	Have   gridftp.Ranges
	// Member says that the file moves in a tar stream, whose members'
	// bytes are reported (Reporter.Progress) only as each ends, with it:
	// until then nothing of it is counted that a later run must not count
	// again, and a reporter may keep its record back a while.
	Member bool
}

// Partials is an optional interface of a Reporter: Partial is called as
// a file's transfer starts (with what is known to be at the destination
// already) and as the ranges known to be there grow (restart markers,
// finished chunks), so that a later run can resume it (Options.Restart)
// and knows that this copy started it.
type Partials interface {
	Partial(src string, p Partial)
}

func (o Options) maxAttempts() int {
	if o.MaxAttempts > 0 {
		return o.MaxAttempts
	}
	if !o.Deadline.IsZero() {
		return 1 << 30
	}
	return 5
}

// Stall bounds of a transfer (Options.StallTimeout): a healthy transfer
// shows progress in every marker (5 s apart at ferry's and GCT's servers)
// and TCP mends a lost packet within a few round trips, so a transfer
// whose markers show nothing new for three marker intervals, or for a
// hundred round trips on a long link, is stalled.
const (
	minStall       = 15 * time.Second
	stallRoundTrip = 100
)

// stall is how long a transfer over a link of round trip rtt may move
// no data before it is stalled; 0: never.
func (o Options) stall(rtt time.Duration) time.Duration {
	switch {
	case o.StallTimeout < 0:
		return 0
	case o.StallTimeout > 0:
		return o.StallTimeout
	}
	return max(minStall, stallRoundTrip*rtt)
}

// Item is one path to copy: a file, or a directory when Recursive (its
// own or the Options').
type Item struct {
	Src, Dst  string
	Recursive bool
}

// Outcome is what happened to one file.
type Outcome int

// Outcomes of a file.
const (
	Transferred Outcome = iota
	Skipped
	Failed
	Canceled     // by the caller (Options.Cancels)
	SkippedError // the source could not give it (Options.SkipSourceErrors)
)

func (o Outcome) String() string {
	return [...]string{"transferred", "skipped", "failed", "canceled", "skipped for a source error"}[o]
}

// FileResult is the final word on one file.
type FileResult struct {
	Src, Dst string
	Size     int64
	Outcome  Outcome
	Checksum string // "ALG:hex" when verified
	Attempts int
	Err      error
	// Moved is what this copy reported moved of the file (Progress):
	// none for a file found whole at the destination.
	Moved int64
	// Unreported is what of Moved this result reports rather than
	// Progress: a tar member's bytes, to a FileProgress reporter, come
	// with its result, so that it can store them with its record.
	Unreported int64
}

// Reporter receives progress; its methods are called from many goroutines.
type Reporter interface {
	// Planned is called as listing finds work: files and bytes to move,
	// to add to those of the calls before.
	Planned(files int, bytes int64)
	// Progress reports bytes moved since the last call.
	Progress(delta int64)
	// Fault reports a failure that will be retried after the delay.
	Fault(path string, err error, retryIn time.Duration)
	// Done reports a file's final outcome.
	Done(FileResult)
}

// FileProgress is an optional interface of a Reporter: FileProgress is
// called instead of Progress, with the source path of the file whose
// bytes moved (or, negative, were taken back), so that the reporter can
// store a file's bytes with its outcome.
type FileProgress interface {
	FileProgress(src string, delta int64)
}

// Result sums up a copy.
type Result struct {
	Files, Transferred, Skipped, Failed, Canceled int
	SkippedErrors                                 int   // Options.SkipSourceErrors
	Deleted                                       int   // paths DeleteExtra deleted
	Bytes                                         int64 // moved, including re-sends
	Faults                                        int
	FailedFiles                                   []FileResult
	// Partial are the temporary files (destination paths) a canceled or
	// interrupted copy left holding part of a file's data: the same copy
	// again resumes from them. A file that failed for good leaves none.
	// CopyMany's name their destinations ("host:port/path"), and include
	// the whole copies a tree pass left unrenamed.
	Partial     []string
	Directories int // walked, the source items' own included
	Settings    Settings
	Elapsed     time.Duration
}

// Settings are the tuning the engine chose (or was given).
type Settings struct {
	Concurrency, Parallelism, Pipelining int // Concurrency: the most session pairs used
	ChunkSize                            int64
	Algorithm                            string
	Live                                 bool          // both ends hash data as it moves
	Authenticated, Encrypted             bool          // the data channels prove a one-time credential (DATATLS), and are encrypted
	RTT                                  time.Duration // the longer of the two control channels' round trips, each the least of its samples (judgeLink)
	// RTTSamples is how many round trips RTT is the least of, at its end.
	RTTSamples int
	// Near says why the ends are provably near each other ("both ends on
	// the same host", "both ends on one subnet, 192.168.1.0/24"): the
	// link is local whatever the round trip; "" when their addresses
	// prove nothing, and the round trip decides.
	Near string
	// MaxParallel, above Parallelism, is how many streams a pair's source
	// may grow to while a transfer runs, as long as they raise its rate
	// (both ends ferry servers, over a WAN; 0: no growth).
	MaxParallel int
	// Batches is how many tar streams small files were packed into (0:
	// none), and TarReason why or why not, when there is one to give.
	Batches   int
	TarReason string
	// Compressed says that data moves compressed (zstd) between the ends;
	// CompressNote why not, when it was asked for.
	Compressed   bool
	CompressNote string
	// Way is how large files moved (the choice, when trials made one),
	// and Stripes how many stripes the destination offered (SPAS): 1
	// when it does not stripe, or no file was large enough to ask.
	Way     Way
	Stripes int
	// Why says why tune chose these settings, in words, for ferry copy
	// -v and the task's STARTED event.
	Why string
}
