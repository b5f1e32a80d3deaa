// Package sshgw is the service's SSH command gateway: `ssh alice@host ls
// ep:/data` runs ferry's service commands as alice, with nothing
// installed on her machine, as the hosted Globus CLI did.
//
// Users log in with the public keys stored for them (domain.SSHKey);
// passwords are not taken. A session runs one command line (exec), or
// an interactive prompt (shell) that runs a line at a time; what a line
// does is the Login callback's business: the gateway itself only speaks
// SSH and enforces its policy. Nothing else is served: no other channel
// than sessions (no port forwarding), no global requests, no
// subsystems (sftp), no agent or X11 forwarding, no environment. The
// gateway bounds the connections that have not logged in (in all and
// from each client address), each user's sessions, the handshake and idle
// time.
package sshgw

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"ferry/internal/connlimit"
	"ferry/internal/throttle"
	"ferry/service/domain"
)

// Defaults of the Server's limits.
const (
	DefaultSessions        = 8
	DefaultIdle            = 15 * time.Minute
	DefaultHandshake       = 10 * time.Second
	DefaultUnauthenticated = 32
	// DefaultUnauthenticatedPerAddress is a quarter of
	// DefaultUnauthenticated: one address cannot keep everyone else
	// from logging in.
	DefaultUnauthenticatedPerAddress = 8
)

// IO is where a command line reads and writes. Terminal says that the
// client asked for a pseudo-terminal: output goes to a screen (a
// progress bar is worth drawing).
type IO struct {
	In       io.Reader
	Out, Err io.Writer
	Terminal bool
}

// Runner runs one command line and returns its exit status. It stops
// when ctx ends (the client went away, or typed Ctrl-C on a terminal).
type Runner func(ctx context.Context, rw IO, line string) int

// Login begins a session of user u, connected from addr: it returns the
// Runner of the session's command lines, and end, called once the session
// is over.
type Login func(ctx context.Context, u domain.User, addr net.Addr) (run Runner, end func(), err error)

// Server is the gateway. Set the fields, then call Serve.
type Server struct {
	Users   domain.UserService // users and their keys
	HostKey ssh.Signer
	Login   Login
	Logger  *slog.Logger // nil: none
	// Sessions bounds each user's sessions at once, and their
	// connections, whether or not they hold a session (0: DefaultSessions);
	// Idle closes a connection that has neither input nor a running
	// command for that long (0: DefaultIdle); Handshake bounds the time to
	// log in (0: DefaultHandshake); Unauthenticated bounds the connections
	// not yet logged in (0: DefaultUnauthenticated), and
	// UnauthenticatedPerAddress those of one client address, an IPv6 /64
	// (0: DefaultUnauthenticatedPerAddress): more are closed at once.
	Sessions                                   int
	Idle, Handshake                            time.Duration
	Unauthenticated, UnauthenticatedPerAddress int

	once     sync.Once
	config   *ssh.ServerConfig
	unauth   connlimit.Counter // connections logging in, by address
	mu       sync.Mutex
	sessions map[int64]int // by user ID
	conns    map[int64]int // by user ID
}

// userExt is the Permissions extension that carries the user's ID from
// the public key check to the connection.
const userExt = "ferry-user-id"

func (s *Server) init() {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Sessions <= 0 {
		s.Sessions = DefaultSessions
	}
	if s.Idle <= 0 {
		s.Idle = DefaultIdle
	}
	if s.Handshake <= 0 {
		s.Handshake = DefaultHandshake
	}
	if s.Unauthenticated <= 0 {
		s.Unauthenticated = DefaultUnauthenticated
	}
	if s.UnauthenticatedPerAddress <= 0 {
		s.UnauthenticatedPerAddress = DefaultUnauthenticatedPerAddress
	}
	s.sessions, s.conns = map[int64]int{}, map[int64]int{}
	s.config = &ssh.ServerConfig{
		MaxAuthTries:      6,
		ServerVersion:     "SSH-2.0-ferry",
		PublicKeyCallback: s.checkKey,
		// No PasswordCallback nor KeyboardInteractiveCallback: only keys.
	}
	s.config.AddHostKey(s.HostKey)
}

// checkKey lets in the user named in the login whose stored keys include
// key.
func (s *Server) checkKey(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.Handshake)
	defer cancel()
	u, err := s.Users.KeyUser(ctx, meta.User(), ssh.FingerprintSHA256(key))
	if err != nil {
		return nil, err
	}
	return &ssh.Permissions{Extensions: map[string]string{userExt: strconv.FormatInt(u.ID, 10)}}, nil
}

// Serve accepts SSH connections on ln until it fails or is closed.
func (s *Server) Serve(ln net.Listener) error {
	s.once.Do(s.init)
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		addr := throttle.AddressKey(c.RemoteAddr().String())
		if err := s.unauth.Take(addr, s.Unauthenticated, s.UnauthenticatedPerAddress); err != nil {
			s.Logger.Warn("ssh: too many connections logging in; closed one", "from", c.RemoteAddr(), "why", err)
			c.Close()
			continue
		}
		go s.serveConn(c, addr)
	}
}

// serveConn serves c, from the client address addr, counted among the
// connections logging in until it has logged in or failed to.
func (s *Server) serveConn(c net.Conn, addr string) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(s.Handshake))
	conn, chans, reqs, err := ssh.NewServerConn(c, s.config)
	s.unauth.Give(addr)
	if err != nil {
		s.Logger.Debug("ssh: no login", "from", c.RemoteAddr(), "err", err)
		return
	}
	c.SetDeadline(time.Time{})
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	id, _ := strconv.ParseInt(conn.Permissions.Extensions[userExt], 10, 64)
	u, err := s.Users.UserByID(ctx, id)
	if err != nil {
		s.Logger.Warn("ssh: user gone after login", "user", conn.User(), "err", err)
		return
	}
	log := s.Logger.With("user", u.Name, "from", c.RemoteAddr())
	if !s.take(s.conns, u.ID) {
		log.Warn("ssh: too many connections of the user; closed one")
		return
	}
	defer s.give(s.conns, u.ID)
	log.Info("ssh: logged in")
	idle := newIdle(s.Idle, func() { log.Info("ssh: idle; closed"); conn.Close() })
	defer idle.stop()
	// Global requests (tcpip-forward, ...) are refused.
	go ssh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.Prohibited, "only commands are served: no port forwarding")
			continue
		}
		if !s.take(s.sessions, u.ID) {
			nc.Reject(ssh.ResourceShortage, fmt.Sprintf("at most %d sessions at once", s.Sessions))
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			s.give(s.sessions, u.ID)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.give(s.sessions, u.ID)
			(&session{srv: s, user: u, addr: c.RemoteAddr(), ch: ch, idle: idle, log: log}).serve(ctx, chReqs)
		}()
	}
	cancel()
	wg.Wait()
}

// take counts a new session or connection (in count) of user id, if the
// user has one left.
func (s *Server) take(count map[int64]int, id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if count[id] >= s.Sessions {
		return false
	}
	count[id]++
	return true
}

func (s *Server) give(count map[int64]int, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if count[id]--; count[id] <= 0 {
		delete(count, id)
	}
}

// idle closes a connection when nothing happens on it for a while:
// no input, and no command running.
type idle struct {
	mu      sync.Mutex
	t       *time.Timer
	d       time.Duration
	running int
}

func newIdle(d time.Duration, expire func()) *idle {
	return &idle{t: time.AfterFunc(d, expire), d: d}
}

// touch starts the wait again, unless a command runs.
func (i *idle) touch() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.running == 0 {
		i.t.Reset(i.d)
	}
}

// busy marks a command running until the returned function is called.
func (i *idle) busy() (done func()) {
	i.mu.Lock()
	i.running++
	i.t.Stop()
	i.mu.Unlock()
	return func() {
		i.mu.Lock()
		i.running--
		i.mu.Unlock()
		i.touch()
	}
}

func (i *idle) stop() { i.t.Stop() }

// LoadOrCreateHostKey reads the ed25519 host key at path, or makes one
// there (readable by the owner only) when there is none.
func LoadOrCreateHostKey(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		blk, err := ssh.MarshalPrivateKey(priv, "ferry server")
		if err != nil {
			return nil, err
		}
		b = pem.EncodeToMemory(blk)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		tmp := path + ".new"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return nil, err
		}
		if err := os.Rename(tmp, path); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	k, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("SSH host key %s: %w", path, err)
	}
	return k, nil
}
