package stack

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"ferry/storage"
)

// Transfer is what a layer learns of the transfer it serves.
type Transfer struct {
	// Name is the path the command named, cleaned (storage.Clean). A
	// program ignores it; a layer that moves a tree packs or unpacks below
	// it.
	Name string
	// Flag says how a write treats an existing file.
	Flag storage.OpenFlag
	// Members are the names, relative to Name, given for this transfer
	// (SITE MEMBERS), for layers that move many files at once.
	Members []string
	// Report, when set, is told how each member fared as soon as it is
	// known, once per member. It may be called from any goroutine but not
	// from two at once.
	Report func(Result)
}

// Result is how one member of a transfer fared.
type Result struct {
	Name string
	Size int64  // bytes moved
	Sum  string // hex, when the layer was asked for one
	Err  error
}

// Sink is where a transfer's bytes go: an io.WriterAt, which takes blocks
// at any offset, or an io.Writer, which takes them in order only. Close
// ends a transfer that went well; its error fails the transfer.
type Sink interface{ Close() error }

// Source is where a transfer's bytes come from: an io.ReaderAt that is
// also a Sizer, read anywhere, or an io.Reader, read from start to end.
type Source interface{ Close() error }

// Sizer is a Source of known size.
type Sizer interface{ Size() int64 }

// Aborter is a Sink or Source that must hear that its transfer failed or
// was aborted, in place of Close: a program is killed, a partial member
// dropped, a writer waiting for its turn woken. Abort may come from
// another goroutine while a write or read is under way, and more than once.
type Aborter interface{ Abort(cause error) }

// End ends s after a transfer that ended with err: Close when err is
// nil, else Abort (for an Aborter) and Close, whose error then does not
// matter.
func End(s interface{ Close() error }, err error) error {
	if err == nil {
		return s.Close()
	}
	if a, ok := s.(Aborter); ok {
		a.Abort(err)
	}
	s.Close()
	return err
}

// Terminal is the bottom layer of a stack: where bytes come from and go.
type Terminal interface {
	Create(ctx context.Context, t *Transfer) (Sink, error)
	Open(ctx context.Context, t *Transfer) (Source, error)
}

// Filter is a layer above the terminal: it sees a transfer on its way to
// or from the layer below and may wrap what that opened.
type Filter interface {
	WrapSink(ctx context.Context, t *Transfer, below Sink) (Sink, error)
	WrapSource(ctx context.Context, t *Transfer, below Source) (Source, error)
}

// Summer is a Sink that hashed the file its transfer made at the
// transfer's name, from its start, as the server hashes a plain file it
// writes (OPTS CKSM Live): the server keeps the sum for a later CKSM. Sum
// is asked after a successful Close; ok is false when the sink did not
// hash with alg (a name in checksum's spelling, any case) or cannot vouch
// for what the file holds.
type Summer interface {
	Sum(alg string) (sum string, size int64, ok bool)
}

// Deferrer is a Filter that opens the layers below a write itself, when
// and if it needs them: Stack.Create hands it their opening instead of
// their sink. A layer that may write nothing here (forward's relay-only
// hop) so never opens, and never truncates, a file of that name.
type Deferrer interface {
	DeferSink(ctx context.Context, t *Transfer, open func() (Sink, error)) (Sink, error)
}

// Env is what a session gives the layers it builds.
type Env struct {
	FS storage.Driver // the session's tree
	// Dir is the local directory FS serves, for programs to run in; ""
	// when the tree is not a local directory.
	Dir       string
	ReadOnly  bool  // the session may not change the tree
	Anonymous bool  // the session logged in anonymously
	MaxFile   int64 // the largest file a transfer may make; 0: no limit
	// User is the local account the session maps to (a GSI login's
	// gridmap user), for programs to run as; "" when it maps to none.
	User string
	Log  *slog.Logger
	// Dial opens the connections a layer makes to other hosts (forward's
	// children), under the server's rules for where it may connect; nil:
	// none may be made.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Reserve counts, for one transfer, the connections a layer is about
	// to open to other hosts (children control connections, and streams
	// data streams to them) against the server's limits, and says why
	// not when they would pass one (a ShownError); release gives them
	// back once they are closed. nil: no limits.
	Reserve func(children, streams int) (release func(), err error)
	// Grid is the credential a GSI session's client delegated, for the
	// layers that log in to other servers as that user (forward's
	// gsiftp:// children); nil when the session has none.
	Grid *GridCredential
}

// GridCredential is a delegated grid credential and the trust to check
// other servers' certificates with.
type GridCredential struct {
	Chain []*x509.Certificate // the proxy, leaf first
	Key   crypto.Signer
	// Verify checks a peer's chain against the server's trusted CAs and
	// returns the identity (DN) it proves.
	Verify func(chain []*x509.Certificate) (dn string, err error)
}

// Kind makes the layers of one name from their entries: a terminal kind
// sets Terminal, a filter kind Filter.
type Kind struct {
	Terminal func(e Entry, env Env) (Terminal, error)
	Filter   func(e Entry, env Env) (Filter, error)
}

// Registry holds the kinds of layer a server offers, by name.
type Registry map[string]Kind

// Refusal is why a stack was refused, in the lines of GCT's reply to
// SITE SETDISKSTACK after its "Setting filesystem driver stack failed.".
type Refusal struct{ Lines []string }

func (r *Refusal) Error() string { return strings.Join(r.Lines, " ") }

// Refuse makes a Refusal of lines.
func Refuse(lines ...string) error { return &Refusal{Lines: lines} }

// notWhitelisted is GCT's refusal of a layer it does not offer.
func notWhitelisted(name string) error {
	return Refuse(fmt.Sprintf("globus_xio: Bad parameter, %s driver not whitelisted", name))
}

// Stack is a session's layers: one terminal and the filters above it,
// bottom first.
type Stack struct {
	spec    string
	term    Terminal
	filters []Filter
}

// FileLayer is the name of the terminal layer of the storage driver.
const FileLayer = "file"

// Build makes the stack entries name, from the kinds reg offers. A stack
// whose bottom entry is a filter stands on the file layer. A name reg does
// not have is refused as GCT refuses it; so is a terminal above the bottom.
func Build(spec string, entries []Entry, reg Registry, env Env) (*Stack, error) {
	s := &Stack{spec: spec}
	for i, e := range entries {
		k, ok := reg[e.Name]
		if !ok {
			return nil, notWhitelisted(e.Name)
		}
		switch {
		case k.Filter != nil:
			if i == 0 {
				if err := s.bottom(Entry{Name: FileLayer}, reg, env); err != nil {
					return nil, err
				}
			}
			f, err := k.Filter(e, env)
			if err != nil {
				return nil, err
			}
			s.filters = append(s.filters, f)
		case i > 0:
			return nil, Refuse(fmt.Sprintf("%s must be the bottom of the stack.", e.Name))
		default:
			if err := s.bottom(e, reg, env); err != nil {
				return nil, err
			}
		}
	}
	if s.term == nil {
		return nil, Refuse("The stack is empty.")
	}
	return s, nil
}

func (s *Stack) bottom(e Entry, reg Registry, env Env) error {
	k, ok := reg[e.Name]
	if !ok || k.Terminal == nil {
		return notWhitelisted(e.Name)
	}
	t, err := k.Terminal(e, env)
	if err != nil {
		return err
	}
	s.term = t
	return nil
}

// String is the stack as the client gave it.
func (s *Stack) String() string { return s.spec }

// Create opens the stack for a transfer to write: the terminal, then each
// filter over what is below it; a Deferrer opens what is below it itself,
// or not at all.
func (s *Stack) Create(ctx context.Context, t *Transfer) (Sink, error) {
	open := func() (Sink, error) { return s.term.Create(ctx, t) }
	for _, f := range s.filters {
		open = wrapOpen(ctx, t, f, open)
	}
	sink, err := open()
	if err != nil {
		return nil, err
	}
	return sink, nil
}

// wrapOpen is the opening of f over what open opens.
func wrapOpen(ctx context.Context, t *Transfer, f Filter, open func() (Sink, error)) func() (Sink, error) {
	if d, ok := f.(Deferrer); ok {
		return func() (Sink, error) { return d.DeferSink(ctx, t, open) }
	}
	return func() (Sink, error) {
		below, err := open()
		if err != nil {
			return nil, err
		}
		up, err := f.WrapSink(ctx, t, below)
		if err != nil {
			End(below, err)
			return nil, err
		}
		return up, nil
	}
}

// Open opens the stack for a transfer to read.
func (s *Stack) Open(ctx context.Context, t *Transfer) (Source, error) {
	src, err := s.term.Open(ctx, t)
	for _, f := range s.filters {
		if err != nil {
			break
		}
		var up Source
		if up, err = f.WrapSource(ctx, t, src); err != nil {
			End(src, err)
		}
		src = up
	}
	if err != nil {
		return nil, err
	}
	return src, nil
}

// ErrNotSeekable refuses a restart, an offset or an append to a layer that
// can only be read or written from start to end (a program's pipe).
var ErrNotSeekable = errors.New("the stack cannot seek: no restart, offset or append")

// Kinds lists the kinds every server offers: the file layer and ordering.
func Kinds() Registry {
	return Registry{
		FileLayer:  {Terminal: newFile},
		"ordering": {Filter: newOrdering},
	}
}

// ShownError is a layer's failure whose text the client is shown, as GCT
// shows a program's exit status and the start of its standard error.
type ShownError struct {
	Text string // one or more lines
	Err  error  // what it wraps, for errors.Is
}

func (e *ShownError) Error() string { return e.Text }
func (e *ShownError) Unwrap() error { return e.Err }
