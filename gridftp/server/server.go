// Package server is ferry's GridFTP endpoint server: it serves one storage
// tree to GridFTP and FTP clients (globus-url-copy, gfal2, FTS3, lftp, curl
// and ferry's own engine) and takes part in third-party transfers.
//
// A Server is configured through its exported fields and handed listeners:
//
//	srv := &server.Server{FS: fs, Anonymous: true}
//	err := srv.Serve(ln)
//
// Each control connection is a session. Commands are read by one goroutine
// and queued, so pipelined commands run strictly in order while ABOR and
// a vanished client can still interrupt a running transfer.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"ferry/gridftp"
	"ferry/internal/connlimit"
	"ferry/internal/throttle"
	"ferry/stack"
	"ferry/storage"
)

// Version is reported in the banner and by SITE VERSION.
const Version = "0.1.0"

// Authenticator checks a user name and password. Anonymous logins are
// handled by the server itself (see Server.Anonymous).
type Authenticator interface {
	Check(user, password string) bool
}

// Server serves FS over GridFTP. The zero value of each optional field is a
// sensible default.
type Server struct {
	FS        storage.Driver // the tree every session sees as "/"
	Auth      Authenticator  // password logins; nil allows none
	Anonymous bool           // accept USER anonymous / ftp with any password
	GSI       *GSI           // grid certificate logins (AUTH GSSAPI); nil allows none
	// DataCred, when set, is what every session's data channels present
	// after DCAU A, until DCSC hands them another: ferry copy's own
	// server holds the user's grid proxy in it, so that its data
	// connections to a gsiftp:// server prove the user's identity, as the
	// credential delegated to that server does.
	DataCred *gridftp.DataCredential
	// AnonymousWrite lets anonymous sessions change the tree; without it
	// they only read: every verb that writes (the rows marked write in the
	// command and SITE tables) gets GCT's 550 PERMISSION_DENIED.
	AnonymousWrite bool

	// Logins slows down password guessing: an account that failed
	// LoginFailures times in a row (default 10), or a client address that
	// failed three times as often (many users may share one), waits 1 s,
	// then twice as long after each further failure, up to 5 min; a PASS
	// while it waits gets 421 and the session ends. nil: a Throttle of
	// the defaults. Anonymous logins are never throttled.
	Logins        *throttle.Throttle
	LoginFailures int
	// LoginTimeout is how long a connection may take to log in; default
	// 30 s.
	LoginTimeout time.Duration
	// MaxSessionsPerAddress bounds the sessions of one client address (an
	// IPv6 /64); 0 means 64, negative means no limit.
	MaxSessionsPerAddress int

	// DataInterface is the address data listeners bind to and PASV
	// announces; invalid means the control connection's local address.
	DataInterface netip.Addr
	// PortLow and PortHigh bound passive data ports; zero means any.
	PortLow, PortHigh int
	// Listen, when set, opens passive data listeners in place of a port
	// of this host, and PASV announces the listener's address (a
	// *net.TCPAddr): ferry connect listens on the service's relay. The
	// listener must admit only connections from the addresses of from,
	// which the session cannot check itself (they reach it from the
	// listener, not from the sender); from is nil when any may come (the
	// session authenticates each one, DCAU A, or PassiveFromAnywhere).
	Listen func(from []netip.Addr) (net.Listener, error)

	// TargetPolicy decides where active data connections (PORT, EPRT,
	// SPOR, whatever DCAU says) and the connections of layers (multicast
	// children, their data) may go besides the client (datasec.go).
	TargetPolicy TargetPolicy
	// PassiveFromAnywhere lets passive ports admit unauthenticated data
	// connections from any address, as GCT does, instead of only the
	// client's and those it names (OPTS PASV From): for third-party
	// transfers driven by clients that cannot name the sender. It lets a
	// stranger who finds the port first take or inject the data.
	PassiveFromAnywhere bool
	// MaxFileSize is the largest file a client may make: every size or
	// offset it names (ALLO, REST, ESTO, SITE TRNC) or sends (MODE E
	// blocks, data past it) beyond this is refused with 501
	// FILE_TOO_LARGE. 0 means 16 TiB, negative means no limit.
	MaxFileSize int64
	// ChecksumHoles is the most bytes of holes (unwritten, sparse parts of
	// a file) one checksum hashes, where the storage can tell; a CKSM, or
	// the SCKS check of a STOR, over more is refused with 504. 0 means
	// 4 GiB, negative means no limit.
	ChecksumHoles int64
	// MaxStreams bounds the data streams of one transfer: OPTS RETR
	// Parallelism is lowered to it, and a receive that gets more fails.
	// 0 means 64.
	MaxStreams int
	// GrowPeriod is the length of each step of a send's probe for more
	// streams (OPTS RETR Parallelism's maximum; gridftp.Growth); 0: from
	// the data streams' round trip.
	GrowPeriod time.Duration
	// GrowAnyControl lets sends grow whatever the data streams'
	// congestion control; else not under bbr (gridftp.Growth).
	GrowAnyControl bool
	// SessionBuffers bounds the data buffers (BlockSize each) one
	// session's transfer holds at once, whatever its streams; 0 means 32.
	SessionBuffers int

	// Layers are the kinds of layer SITE SETDISKSTACK may stack (package
	// stack); nil means stack.Kinds(), the file layer and ordering.
	Layers stack.Registry
	// MaxForwardStreams bounds the data streams a layer (a multicast hop)
	// opens to other servers for one transfer: its children times the
	// streams to each (GCT's cc and P). A transfer that asks for more is
	// refused (501 TOO_MANY_STREAMS) before any is opened. 0 means 256
	// (the widest tree ferry's engine plans, 4 children, at 64 streams
	// each), negative means no limit.
	MaxForwardStreams int
	// MaxForwardTotal bounds those streams of all sessions at once; a
	// transfer that would pass it is refused (451, try again later). 0
	// means 1024, negative means no limit. Each child's control connection
	// also counts, while it is open, as a session of the client's address
	// against MaxSessions and MaxSessionsPerAddress.
	MaxForwardTotal int

	// Striping (mover.go, front.go). With Mover, this server is a data
	// mover: it serves only a front end that proves MoverKey (Serve
	// wraps its listener in TLS), whose sessions start logged in. With
	// Movers, it is the front end of a striped endpoint: data moves
	// through the movers at these addresses (host:port), which must see
	// the same storage as FS, and its own sessions do all else.
	Mover    bool
	Movers   []string
	MoverKey []byte

	MaxSessions    int           // concurrent sessions; 0 means unlimited
	IdleTimeout    time.Duration // control channel idle limit; default 30 min
	DataTimeout    time.Duration // wait for a data connection; default 60 s
	MarkerInterval time.Duration // 111/112 markers while receiving; default 1 s, so a client shows a large file's bytes as they land
	BlockSize      int           // MODE E block size when sending; default 1 MiB
	Logger         *slog.Logger
	// Stats, when set, counts sessions, transfers, bytes and refusals.
	Stats *Stats

	mu       sync.Mutex
	sessions map[*session]struct{}
	lns      map[net.Listener]struct{}
	closed   bool
	wg       sync.WaitGroup
	poolOnce sync.Once
	pool     *gridftp.BufferPool
	conns    connlimit.Counter // open sessions by addressKey, with their layers' children
	children int               // layers' children's control connections open (bounds.go), under mu
	forwards int               // layers' data streams to other servers open (bounds.go), under mu
	logins   throttle.Throttle // when Logins is nil
	sums     sumCache          // live checksums (livesum.go)
	tlsOnce  sync.Once         // moverTLS, from MoverKey
	tlsConf  *tls.Config
	tlsErr   error
	nextPasv atomic.Uint64 // the mover a front end's next PASV goes to
	// growClock is the Clock of sends' growth (gridftp.Growth); nil: now.
	// Tests set it (export_test.go).
	growClock func(streams int, moved int64) time.Time
}

// moverTLS is the TLS configuration of the channel between a front end
// and its movers (moverkey.go).
func (s *Server) moverTLS() (*tls.Config, error) {
	s.tlsOnce.Do(func() {
		switch {
		case s.Mover && len(s.Movers) > 0:
			s.tlsErr = errors.New("a server is a data mover or a front end, not both")
		case len(s.Movers) > maxMovers:
			s.tlsErr = fmt.Errorf("%d data movers; at most %d", len(s.Movers), maxMovers)
		default:
			s.tlsConf, s.tlsErr = MoverTLS(s.MoverKey)
		}
	})
	return s.tlsConf, s.tlsErr
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("gridftp server closed")

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (s *Server) idleTimeout() time.Duration  { return durationOr(s.IdleTimeout, 30*time.Minute) }
func (s *Server) loginTimeout() time.Duration { return durationOr(s.LoginTimeout, 30*time.Second) }
func (s *Server) dataTimeout() time.Duration  { return durationOr(s.DataTimeout, 60*time.Second) }
func (s *Server) markerInterval() time.Duration {
	return durationOr(s.MarkerInterval, time.Second)
}

func (s *Server) blockSize() int {
	if s.BlockSize > 0 {
		return s.BlockSize
	}
	return 1 << 20
}

// loginThrottle is Logins, or the server's own default.
func (s *Server) loginThrottle() *throttle.Throttle {
	if s.Logins != nil {
		return s.Logins
	}
	return &s.logins
}

// loginFailures is how many failed logins in a row an account may make
// before it waits.
func (s *Server) loginFailures() int { return intOr(s.LoginFailures, 10) }

// Limits with their defaults; ok is false for no limit.
func (s *Server) perAddressLimit() (int, bool) { return limitOr(s.MaxSessionsPerAddress, 64) }
func (s *Server) fileSizeLimit() (int64, bool) { return limitOr(s.MaxFileSize, 16<<40) }
func (s *Server) checksumHoles() (int64, bool) { return limitOr(s.ChecksumHoles, 4<<30) }
func (s *Server) forwardStreams() (int, bool)  { return limitOr(s.MaxForwardStreams, 256) }
func (s *Server) forwardTotal() (int, bool)    { return limitOr(s.MaxForwardTotal, 1024) }

// limitOr reads a limit field: 0 means def, negative means no limit.
func limitOr[T int | int64](n, def T) (limit T, ok bool) {
	switch {
	case n < 0:
		return 0, false
	case n == 0:
		return def, true
	}
	return n, true
}

func (s *Server) maxStreams() int     { return max(intOr(s.MaxStreams, 64), 1) }
func (s *Server) sessionBuffers() int { return max(intOr(s.SessionBuffers, 32), 1) }

func intOr(n, def int) int {
	if n != 0 {
		return n
	}
	return def
}

func durationOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// buffers is the server's pool of block buffers.
func (s *Server) buffers() *gridftp.BufferPool {
	s.poolOnce.Do(func() { s.pool = gridftp.NewBufferPool(s.blockSize()) })
	return s.pool
}

// Sessions is the number of open control connections from clients (not
// counting those its layers hold to other servers).
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns.Total() - s.children
}

// Serve accepts control connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	if s.FS == nil {
		return errors.New("gridftp server: no storage driver")
	}
	if s.Mover || len(s.Movers) > 0 {
		conf, err := s.moverTLS()
		if err != nil {
			return fmt.Errorf("gridftp server: %w", err)
		}
		if s.Mover {
			ln = tls.NewListener(ln, conf)
		}
	}
	if err := s.open(ln); err != nil {
		return err
	}
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.startSession(c)
	}
}

// ServeConn serves the one control connection c, e.g. a session on stdin
// and stdout that sshd started (ferry gridftp --stdio), and returns when
// it ends.
func (s *Server) ServeConn(c net.Conn) error {
	if s.FS == nil {
		return errors.New("gridftp server: no storage driver")
	}
	if err := s.open(nil); err != nil {
		return err
	}
	s.startSession(c)
	s.wg.Wait()
	return nil
}

// open readies the server's bookkeeping and records ln (when not nil), or
// fails once the server is closed.
func (s *Server) open(ln net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrServerClosed
	}
	if s.lns == nil {
		s.lns = map[net.Listener]struct{}{}
		s.sessions = map[*session]struct{}{}
	}
	if ln != nil {
		s.lns[ln] = struct{}{}
	}
	return nil
}

func (s *Server) startSession(c net.Conn) {
	addr := addressKey(c.RemoteAddr())
	if why := s.admit(addr); why != "" {
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		gridftp.Reply{Code: gridftp.CodeNotAvailable, Lines: []string{why}}.WriteTo(c)
		s.Stats.reply(gridftp.CodeNotAvailable)
		c.Close()
		s.logger().Warn("session refused", "remote", c.RemoteAddr().String(), "why", why)
		return
	}
	ss := newSession(s, c, addr)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.leave(addr)
		c.Close()
		return
	}
	s.sessions[ss] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		ss.serve()
		s.mu.Lock()
		delete(s.sessions, ss)
		s.mu.Unlock()
		s.leave(addr)
	}()
}

// admit counts a new session from addr in, or says why it is refused:
// the server's or the address's limit is reached.
func (s *Server) admit(addr string) (refusal string) {
	perAddr, _ := s.perAddressLimit() // 0: none
	switch err := s.conns.Take(addr, s.MaxSessions, perAddr); {
	case errors.Is(err, connlimit.ErrTotal):
		return fmt.Sprintf("Too many sessions (limit %d); try again later.", s.MaxSessions)
	case errors.Is(err, connlimit.ErrAddress):
		return fmt.Sprintf("Too many sessions from your address (limit %d); try again later.", perAddr)
	}
	s.Stats.session()
	return ""
}

// leave counts a session from addr out.
func (s *Server) leave(addr string) { s.conns.Give(addr) }

// addressKey names the client address of a session for its limits
// (throttle.AddressKey: an IPv6 /64 is one).
func addressKey(a net.Addr) string { return throttle.AddressKey(a.String()) }

// Close stops the listeners and ends every session at once.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.lns {
		ln.Close()
	}
	for ss := range s.sessions {
		ss.kill()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Shutdown stops accepting sessions and waits for running ones to end until
// ctx is done, then closes the rest.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.lns {
		ln.Close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.Close()
		return ctx.Err()
	}
}
