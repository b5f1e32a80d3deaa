// Package gridops carries out the service's file operations on endpoints
// over GridFTP: it checks activations by logging in, lists directories
// (MLSD), creates, renames and deletes, and maps GridFTP replies to the
// domain's errors in one table. Each operation opens its own control
// session on the first of the endpoint's servers that answers.
//
// It is also where the service reaches endpoints at all (Servers): only
// at the addresses the operator's network policy allows, checked as each
// connection is made, and it words what users are told of a failure
// (Tell) without repeating what a peer that never accepted a login said.
package gridops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"strings"
	"sync"
	"time"

	"ferry/engine"
	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/gsi"
	"ferry/gsi/gsilogin"
	"ferry/internal/netpolicy"
	"ferry/service/domain"
)

// Ops implements domain.FileOps. The zero value is ready to use, for
// endpoints other than connect ones.
type Ops struct {
	// Timeout bounds connecting to a server and each reply; 0:
	// DefaultTimeout.
	Timeout time.Duration
	// Agents reaches connect endpoints; nil: the service has no relay.
	Agents domain.Agents
	// Networks says which addresses endpoints' servers may have; nil:
	// any.
	Networks *netpolicy.Policy
	// Trust holds the CAs that gsi endpoints' servers are checked
	// against; nil: gsi endpoints cannot be reached.
	Trust *gsi.Trust
}

var _ domain.FileOps = (*Ops)(nil)

// DefaultTimeout is the Ops' Timeout when none is given: well within
// the minute after which proxies give up on a request.
const DefaultTimeout = 30 * time.Second

// Server is how to reach one GridFTP server of an endpoint.
type Server struct {
	Addr     string          // host:port, or what names a connect endpoint's agent
	Host     string          // the URL's host, which a GSI server's certificate must name
	Dial     client.DialFunc // nil: TCP to Addr
	Outbound bool            // an agent: it accepts no connections (engine.Endpoint.Outbound)
}

// Servers returns how to reach each of ep's servers, in order: for a
// connect endpoint, its agent through agents; for others, TCP to the
// addresses that nets allows, checked as each connection is made (a name
// that resolves to a refused address fails with EForbidden): ftp:// URLs,
// and gsiftp:// ones of gsi endpoints.
// An endpoint behind a relay (Via) is never reached: EInvalid, naming
// the relay.
func Servers(ep domain.Endpoint, agents domain.Agents, nets *netpolicy.Policy) ([]Server, error) {
	if ep.Via != "" {
		return nil, ep.ViaError("reach it")
	}
	if ep.Auth == domain.AuthConnect {
		if agents == nil {
			return nil, domain.Errorf(domain.EUnavailable, "endpoint %s is a connect endpoint and this service runs no relay", ep.DisplayName())
		}
		dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := agents.Dial(ctx, ep.ID)
			if domain.ErrorCode(err) == domain.EUnavailable {
				return nil, domain.Errorf(domain.EUnavailable, "endpoint %s's agent is not connected: run ferry connect on its machine", ep.DisplayName())
			}
			return c, err
		}
		return []Server{{Addr: "agent of " + ep.DisplayName(), Dial: dial, Outbound: true}}, nil
	}
	addrs, err := addrs(ep)
	if err != nil {
		return nil, err
	}
	out := make([]Server, len(addrs))
	for i, a := range addrs {
		host, _, _ := net.SplitHostPort(a)
		out[i] = Server{Addr: a, Host: host, Dial: dialer(ep, nets)}
	}
	return out, nil
}

// addrs are the host:port addresses of ep's servers, in order.
func addrs(ep domain.Endpoint) ([]string, error) {
	scheme := gridftp.FTP // as ftp:// URLs say, and as ferry copy reads them
	if ep.Auth == domain.AuthGSI {
		scheme = gridftp.GSIFTP
	}
	var out []string
	for _, s := range ep.Servers {
		u, err := gridftp.Parse(s)
		if err != nil || u.Scheme != scheme || u.User != nil {
			return nil, domain.Errorf(domain.EInvalid, "endpoint %s: server %q: want %s://host:port", ep.DisplayName(), s, scheme)
		}
		out = append(out, u.Addr())
	}
	if len(out) == 0 {
		return nil, domain.Errorf(domain.EUnavailable, "endpoint %s has no servers", ep.DisplayName())
	}
	return out, nil
}

// Relayed is how the engine names ep, an endpoint behind a relay, to the
// relay (engine.Target.Endpoint, with Target.Via the relay's): the
// address of its try-th server (in turn) as the relay reaches it, with
// the login l. The service never connects to it: its Dial refuses.
func Relayed(ep domain.Endpoint, try int, l domain.Login) (engine.Endpoint, error) {
	if ep.Auth == domain.AuthGSI {
		return engine.Endpoint{}, domain.Errorf(domain.EInvalid, "endpoint %s: a %s endpoint cannot be reached through a head node", ep.DisplayName(), domain.AuthGSI)
	}
	addrs, err := addrs(ep)
	if err != nil {
		return engine.Endpoint{}, err
	}
	e := engine.Endpoint{Addr: addrs[try%len(addrs)], Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, ep.ViaError("reach it")
	}}
	if ep.NeedsActivation() {
		e.User, e.Password = l.User, l.Password
	}
	return e, nil
}

// dialer connects to ep's servers at the addresses nets allows.
func dialer(ep domain.Endpoint, nets *netpolicy.Policy) client.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := nets.Dial(ctx, network, addr)
		if de, ok := errors.AsType[*netpolicy.DeniedError](err); ok {
			return nil, domain.Errorf(domain.EForbidden, "endpoint %s: server %s: %v", ep.DisplayName(), addr, de)
		}
		return c, err
	}
}

// Engine is how the transfer engine reaches sv, a server of ep, with the
// login l (none for an endpoint that needs no activation); a gsi
// endpoint's servers are checked with trust (see Auth).
func Engine(ep domain.Endpoint, sv Server, l domain.Login, trust *gsi.Trust) (engine.Endpoint, error) {
	e := engine.Endpoint{Addr: sv.Addr, Dial: sv.Dial, Outbound: sv.Outbound}
	switch {
	case ep.Auth == domain.AuthGSI:
		auth, err := Auth(ep, sv, l, trust)
		if err != nil {
			return e, err
		}
		e.Auth = auth
	case ep.NeedsActivation():
		e.User, e.Password = l.User, l.Password
	}
	return e, nil
}

// Auth is how a session logs in to sv, a server of ep, with the login l:
// anonymously to an endpoint that needs no activation, with l's password
// to a password endpoint, and to a gsi endpoint with l's grid proxy
// (gsilogin.New: a full proxy delegated, sv's certificate checked
// against trust and to name sv's host). A proxy that cannot be read or
// has expired is EUnauthorized, as a refused login: the user activates
// the endpoint again.
func Auth(ep domain.Endpoint, sv Server, l domain.Login, trust *gsi.Trust) (client.Authenticator, error) {
	switch {
	case ep.Auth == domain.AuthGSI:
	case ep.NeedsActivation():
		return client.Password{User: l.User, Password: l.Password}, nil
	default:
		return client.Password{User: "anonymous", Password: "ferry@"}, nil
	}
	if trust == nil {
		return nil, domain.Errorf(domain.EUnavailable, "endpoint %s is a %s endpoint and this service trusts no grid CAs "+
			"(ferry server --gsi-ca-dir)", ep.DisplayName(), domain.AuthGSI)
	}
	cred, err := gsi.ParseCredential([]byte(l.Proxy))
	if err != nil {
		return nil, domain.Errorf(domain.EUnauthorized, "endpoint %s: the activation's grid proxy cannot be read: activate it again", ep.DisplayName())
	}
	if err := gsilogin.Check(cred, time.Now()); err != nil {
		return nil, domain.Errorf(domain.EUnauthorized, "endpoint %s: %v: activate it again with a new proxy", ep.DisplayName(), err)
	}
	return gsilogin.New(cred, trust, sv.Host, l.User), nil
}

// Others are the addresses of the servers but the try-th, in turn after
// it: an endpoint's servers serve the same storage, so the engine spreads
// the chunks of large files over them (engine.Endpoint.Servers) as well
// as failing over from one to the next. None for an agent, which has one.
func Others(servers []Server, try int) []string {
	var out []string
	for i := 1; i < len(servers); i++ {
		if sv := servers[(try+i)%len(servers)]; !sv.Outbound {
			out = append(out, sv.Addr)
		}
	}
	return out
}

// CheckTransfer looks up the items of a transfer from src to dst at both
// ends, on their first servers, as the engine does before it writes
// anything (engine.Check). An item that cannot be copied is EInvalid, or
// ENotFound for a missing source, with a message naming the endpoint (and
// EInvalid for encryption that the endpoints cannot do);
// EUnauthorized for a refused login, EUnavailable when an end does not
// answer.
//
// An endpoint behind a relay is refused as the source, and cannot be
// looked at as the destination (EInvalid, naming the relay).
func (o *Ops) CheckTransfer(ctx context.Context, src, dst domain.Endpoint, sl, dl domain.Login, items []domain.Item, opts domain.Options) error {
	if src.Via != "" {
		return src.ViaError("be a transfer's source")
	}
	if dst.Via != "" {
		return dst.ViaError("look at a transfer's destination")
	}
	var ends [2]engine.Endpoint
	for i, ep := range []domain.Endpoint{src, dst} {
		servers, err := Servers(ep, o.Agents, o.Networks)
		if err != nil {
			return err
		}
		if ends[i], err = Engine(ep, servers[0], []domain.Login{sl, dl}[i], o.Trust); err != nil {
			return err
		}
	}
	eitems := make([]engine.Item, len(items))
	for i, it := range items {
		eitems[i] = engine.Item{Src: it.Src, Dst: it.Dst, Recursive: it.Recursive}
	}
	err := engine.Check(ctx, ends[0], ends[1], eitems, engine.Options{Encrypt: opts.EncryptData, SkipSourceErrors: opts.SkipSourceErrors,
		DeleteExtra: opts.DeleteDestinationExtra})
	if ie, ok := errors.AsType[*engine.ItemError](err); ok {
		return ItemErr(ie, src, dst)
	}
	if errors.Is(err, engine.ErrNoEncryption) {
		return domain.Errorf(domain.EInvalid, "encrypted data: %s and %s cannot encrypt their data channels: %v",
			src.DisplayName(), dst.DisplayName(), err)
	}
	return Err("check", "the transfer's paths", err)
}

// CheckDelete looks each item up on one session of ep's.
func (o *Ops) CheckDelete(ctx context.Context, ep domain.Endpoint, l domain.Login, items []domain.Item, ignoreMissing bool) error {
	c, _, err := o.session(ctx, ep, l, "check a delete")
	if err != nil {
		return err
	}
	defer c.Quit(ctx)
	for _, it := range items {
		e, err := c.Stat(ctx, it.Src)
		err = Err("delete", it.Src+" on "+ep.DisplayName(), err)
		switch {
		case domain.ErrorCode(err) == domain.ENotFound && ignoreMissing:
		case err != nil:
			return err
		case e.IsDir() && !it.Recursive:
			return domain.Errorf(domain.EInvalid, "delete %s on %s: is a directory: delete it with -r", it.Src, ep.DisplayName())
		}
	}
	return nil
}

// Overlap applies the engine's rule (engine.Overlap) to an item on one
// storage, by its paths.
func (o *Ops) Overlap(dst domain.Endpoint, it domain.Item, opts domain.Options) error {
	err := engine.Overlap(engine.Item{Src: it.Src, Dst: it.Dst, Recursive: it.Recursive}, opts.DeleteDestinationExtra)
	if ie, ok := errors.AsType[*engine.ItemError](err); ok {
		return ItemErr(ie, dst, dst)
	}
	return err
}

// ItemErr words an item the engine refused, naming its endpoint: ENotFound
// for a missing source, else EInvalid.
func ItemErr(ie *engine.ItemError, src, dst domain.Endpoint) error {
	side, ep := "source", src
	if ie.Dest {
		side, ep = "destination", dst
	}
	code := domain.EInvalid
	if ie.NotFound {
		code = domain.ENotFound
	}
	return domain.Errorf(code, "%s %s on %s: %s", side, ie.Path, ep.DisplayName(), ie.Why)
}

func (o *Ops) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultTimeout
}

// session connects to the first of ep's servers that answers and logs in:
// as anonymous on an anonymous endpoint, else with l; it returns the
// session and its server. A refused login is EUnauthorized at once (the
// servers of one endpoint share their users); EUnavailable when no server
// answers, ETimeout when the last one tried did not answer in time. An
// endpoint behind a relay is refused: the service cannot reach it to do
// what.
func (o *Ops) session(ctx context.Context, ep domain.Endpoint, l domain.Login, what string) (*client.Conn, Server, error) {
	if ep.Via != "" {
		return nil, Server{}, ep.ViaError(what)
	}
	servers, err := Servers(ep, o.Agents, o.Networks)
	if err != nil {
		return nil, Server{}, err
	}
	var last error
	var lastSv Server
	for _, sv := range servers {
		auth, err := Auth(ep, sv, l, o.Trust)
		if err != nil {
			return nil, sv, err
		}
		c, err := o.dial(ctx, sv, auth)
		if err == nil {
			return c, sv, nil
		}
		if ctx.Err() != nil {
			return nil, sv, ctx.Err()
		}
		if de, ok := errors.AsType[*domain.Error](err); ok && sv.Outbound && de.Code == domain.EUnavailable {
			return nil, sv, de // the agent is away: its one sentence says so
		}
		if e := Err("log in to", ep.DisplayName(), err); domain.ErrorCode(e) != domain.EUnavailable {
			return nil, sv, e // refused, not unreachable: the other servers would refuse too
		}
		last, lastSv = err, sv
	}
	if timedOut(last) {
		return nil, lastSv, o.slow("log in to "+ep.DisplayName(), lastSv)
	}
	return nil, lastSv, domain.Errorf(domain.EUnavailable, "endpoint %s: no server answers (%s)", ep.DisplayName(), Tell(last))
}

// timedOut reports a wait for a server that ran out of time: the
// connection's deadline or the context's.
func timedOut(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout() || errors.Is(err, context.DeadlineExceeded)
}

// slow is the ETimeout of sv, which did not answer what the service
// asked within the Timeout: "list /proj on alice#ep: the endpoint server
// at host:2811 did not answer within 30s".
func (o *Ops) slow(what string, sv Server) error {
	who := "the endpoint server at " + sv.Addr
	if sv.Outbound {
		who = "the " + sv.Addr // the agent of alice#laptop
	}
	return domain.Errorf(domain.ETimeout, "%s: %s did not answer within %s", what, who, o.timeout())
}

func (o *Ops) dial(ctx context.Context, sv Server, auth client.Authenticator) (*client.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	c, err := client.DialWith(dctx, sv.Dial, sv.Addr)
	if err != nil {
		return nil, err
	}
	c.Timeout = o.timeout()
	if err := auth.Authenticate(dctx, c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// ServerStates logs in to each of ep's servers, at once, and asks each
// for its stripes (SPAS) and movers (SITE MOVERS, a ferry front end's).
func (o *Ops) ServerStates(ctx context.Context, ep domain.Endpoint, l domain.Login) ([]domain.ServerState, error) {
	servers, err := Servers(ep, o.Agents, o.Networks)
	if err != nil {
		return nil, err
	}
	out := make([]domain.ServerState, len(servers))
	var wg sync.WaitGroup
	for i, sv := range servers {
		uri := sv.Addr
		if i < len(ep.Servers) && ep.Auth != domain.AuthConnect {
			uri = ep.Servers[i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			auth, err := Auth(ep, sv, l, o.Trust)
			if err != nil {
				out[i] = domain.ServerState{Error: domain.ErrorMessage(err)}
			} else {
				out[i] = o.probe(ctx, sv, auth)
			}
			out[i].URI = uri
		}()
	}
	wg.Wait()
	return out, nil
}

// probe is one server's state.
func (o *Ops) probe(ctx context.Context, sv Server, auth client.Authenticator) domain.ServerState {
	var st domain.ServerState
	c, err := o.dial(ctx, sv, auth)
	if err == nil {
		defer c.Close()
		ctx, cancel := context.WithTimeout(ctx, o.timeout())
		defer cancel()
		var ms []client.Mover
		if st.Stripes, err = c.Stripes(ctx); err == nil {
			ms, err = c.Movers(ctx)
		}
		for _, m := range ms {
			st.Movers = append(st.Movers, domain.MoverState{Index: m.Index, Addr: m.Addr, Up: m.Up, Reason: m.Reason})
		}
	}
	st.Up = err == nil
	if err != nil {
		st.Error = Tell(err)
	}
	return st
}

// ops word each operation for ViaError.
var ops = map[string]string{"list": "list", "mkdir": "make a directory", "rename": "rename", "delete": "delete"}

// with runs fn on a fresh session and maps its error for op on p, naming
// p's endpoint: "list /proj on alice#ep: no such file or directory"; a
// server that did not answer in time is ETimeout.
func (o *Ops) with(ctx context.Context, ep domain.Endpoint, l domain.Login, op, p string, fn func(*client.Conn) error) error {
	c, sv, err := o.session(ctx, ep, l, ops[op])
	if err != nil {
		return err
	}
	defer c.Close()
	err = fn(c)
	if timedOut(err) {
		return o.slow(op+" "+p+" on "+ep.DisplayName(), sv)
	}
	return Err(op, p+" on "+ep.DisplayName(), err)
}

// Check logs in to the endpoint with l.
func (o *Ops) Check(ctx context.Context, ep domain.Endpoint, l domain.Login) error {
	c, _, err := o.session(ctx, ep, l, "check a login")
	if err != nil {
		return err
	}
	c.Quit(ctx) // the login is what counts, not how the goodbye goes
	return nil
}

// List calls fn with each entry of the directory p as the listing
// arrives, in the server's order; an error from fn stops it.
func (o *Ops) List(ctx context.Context, ep domain.Endpoint, l domain.Login, p string, fn func(domain.FileInfo) error) error {
	return o.with(ctx, ep, l, "list", p, func(c *client.Conn) error {
		return c.ListEach(ctx, p, func(e gridftp.Entry) error {
			if !client.ListedName(e.Name) {
				return nil
			}
			return fn(fileInfo(e))
		})
	})
}

func fileInfo(e gridftp.Entry) domain.FileInfo {
	fi := domain.FileInfo{Name: e.Name, Type: "file", Size: e.Size, Modified: e.Modify}
	switch {
	case e.IsDir():
		fi.Type, fi.Size = "dir", 0
	case e.Type != "file":
		fi.Type = "link" // a link leading out of the tree, or another kind
	}
	if e.Mode != 0 {
		fi.Permissions = fmt.Sprintf("%04o", e.Mode&0o7777)
	}
	return fi
}

// Mkdir creates the directory p.
func (o *Ops) Mkdir(ctx context.Context, ep domain.Endpoint, l domain.Login, p string) error {
	return o.with(ctx, ep, l, "mkdir", p, func(c *client.Conn) error {
		_, err := c.Do(ctx, "MKD %s", p)
		return err
	})
}

// Rename moves from to to. Unless overwrite, a to that exists is refused
// (EConflict), whatever the server would do: RNTO replaces a file on
// ferry's server, GCT's and most FTP servers. It is looked up (MLST) on
// the session that then renames, right before; a file made there by
// someone else in that round trip is replaced still.
func (o *Ops) Rename(ctx context.Context, ep domain.Endpoint, l domain.Login, from, to string, overwrite bool) error {
	return o.with(ctx, ep, l, "rename", from, func(c *client.Conn) error {
		if !overwrite {
			found, err := exists(ctx, c, to)
			if err != nil {
				return err
			}
			if found {
				return domain.Errorf(domain.EConflict, "rename %s on %s: %s already exists (to replace it, rename with overwrite)",
					from, ep.DisplayName(), to)
			}
		}
		if _, err := c.Do(ctx, "RNFR %s", from); err != nil {
			return err
		}
		_, err := c.Do(ctx, "RNTO %s", to)
		return err
	})
}

// exists looks p up (MLST): whether it exists, or the server's refusal
// when it cannot tell.
func exists(ctx context.Context, c *client.Conn, p string) (bool, error) {
	_, err := c.Stat(ctx, p)
	if gridftp.Classify(err) == gridftp.FaultNotFound {
		return false, nil
	}
	return err == nil, err
}

// Delete deletes the file p or, when recursive, p and everything below it
// (client.RemoveTree, which tells each path it removed), calling removed
// (if not nil) with each path removed. The root of an endpoint is never
// deleted recursively.
func (o *Ops) Delete(ctx context.Context, ep domain.Endpoint, l domain.Login, p string, recursive bool, removed func(dir bool)) error {
	if recursive && path.Clean("/"+p) == "/" {
		return domain.Errorf(domain.EForbidden, "delete %s: the root of an endpoint cannot be deleted", p)
	}
	if removed == nil {
		removed = func(bool) {}
	}
	return o.with(ctx, ep, l, "delete", p, func(c *client.Conn) error {
		if recursive {
			return c.RemoveTree(ctx, p, func(_ string, e gridftp.Entry) { removed(e.IsDir() && e.Target == "") })
		}
		_, err := c.Do(ctx, "DELE %s", p)
		if err == nil {
			removed(false)
		}
		return err
	})
}

// faults maps what a server's refusal means (gridftp.Classify) to the
// domain's error kinds, with the reason users read; whether another try
// may mend it the refusal says itself (gridftp.Fault.Retry).
var faults = map[gridftp.Fault]struct{ kind, reason string }{
	gridftp.FaultLogin:      {domain.EUnauthorized, "login refused"},
	gridftp.FaultPermission: {domain.EForbidden, "permission denied"},
	gridftp.FaultNotDir:     {domain.EInvalid, "not a directory"},
	gridftp.FaultIsDir:      {domain.EInvalid, "is a directory (delete it recursively)"},
	gridftp.FaultNotFound:   {domain.ENotFound, "no such file or directory"},
	gridftp.FaultExists:     {domain.EConflict, "already exists"},
	gridftp.FaultNotEmpty:   {domain.EConflict, "directory not empty"},
	gridftp.FaultNoSpace:    {domain.ELimit, "no space left on the endpoint"},
	gridftp.FaultInvalid:    {domain.EInvalid, "invalid path or command"},
	gridftp.FaultRefused:    {domain.EInvalid, "refused by the endpoint"},
	gridftp.FaultChecksum:   {domain.EUnavailable, "the data arrived damaged"},
	gridftp.FaultTransient:  {domain.EUnavailable, "temporary failure at the endpoint"},
}

// Err maps err, from doing op on p over a GridFTP session, to a
// *domain.Error whose message names op and p; nil stays nil, an *Error and
// a context's error are kept. Anything but a server's reply means the
// endpoint could not be reached: EUnavailable.
func Err(op, p string, err error) error {
	var de *domain.Error
	if err == nil || errors.As(err, &de) || errors.Is(err, context.Canceled) {
		return err
	}
	if errors.Is(err, gridftp.ErrBadCommand) {
		return domain.Errorf(domain.EInvalid, "%s %q: control characters are not allowed in paths", op, p)
	}
	var ge *gridftp.Error
	if !errors.As(err, &ge) {
		return caused(err, domain.Errorf(domain.EUnavailable, "%s %s: endpoint unreachable: %s", op, p, Tell(err)))
	}
	f := faults[gridftp.Classify(err)]
	if _, ok := errors.AsType[*client.HandshakeError](err); ok && f.kind != domain.EUnauthorized {
		f.reason = Tell(err) // not a path's fault: the server refused the session
	}
	return caused(err, domain.Errorf(f.kind, "%s %s: %s", op, p, f.reason))
}

// caused is e with the cause err, which says whether to retry
// (internal/fault).
func caused(err error, e *domain.Error) *domain.Error {
	e.Err = err
	return e
}

// Tell is what users are told of err, an error of a session with an
// endpoint or of the engine: its text, with a server's reply in one line
// (gridftp.Told), except what a server sent before it accepted a login. Until then nothing shows that the peer speaks GridFTP
// at all — an endpoint may name any address the network policy allows, and
// an SSH, SMTP or HTTP server there answers too — so its words give way to
// what kind of answer it was. What wrapped the failure ("source: ...")
// is kept when it came before it.
func Tell(err error) string {
	he, ok := errors.AsType[*client.HandshakeError](err)
	if !ok {
		return gridftp.Told(err)
	}
	told := fmt.Sprintf("%s: %s: %s", he.Addr, he.Stage, handshake(he))
	if he.Stage == client.StageConnect {
		told = fmt.Sprintf("connect %s: %s", he.Addr, handshake(he))
	}
	if full, inner := err.Error(), he.Error(); strings.HasSuffix(full, inner) {
		return strings.TrimSuffix(strings.TrimSuffix(full, inner), he.Addr+": ") + told
	}
	return told
}

// handshake words a handshake's failure without the peer's words.
func handshake(he *client.HandshakeError) string {
	var de *domain.Error
	var ge *gridftp.Error
	var ne net.Error
	switch err := he.Err; {
	case errors.As(err, &de):
		return de.Message
	case errors.As(err, &ge):
		return fmt.Sprintf("refused (reply %d)", ge.Reply.Code)
	case errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err.Error() // the connection's fate, which says nothing the peer sent
	}
	return "the server answered, but not as a GridFTP server"
}
