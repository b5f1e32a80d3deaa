// Package client speaks GridFTP to any server — ferry's own and the GCT
// globus-gridftp-server — over one control connection: login, FEAT
// detection, both multi-line reply styles, pipelined commands, passive and
// active data channel setup, MLST/MLSD facts and CKSM. The transfer engine
// builds on it; it knows nothing of scheduling or storage.
package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"ferry/gridftp"
	"ferry/gsi/gss"
)

// Conn is one control connection. Commands may be pipelined: Send queues a
// command, Next reads the replies in order. Do is both for one command.
// A Conn is safe for one goroutine at a time, except Close.
type Conn struct {
	c    net.Conn
	r    *bufio.Reader
	wmu  sync.Mutex
	feat map[string]string
	addr string
	opts Options
	data data
	rtt  time.Duration // the least round trip measured (sample)
	rtts int           // how many were measured
	owed int           // replies to commands sent ahead, which Next reads first
	held []byte        // command lines that go out with the next write, or before the next read (SendRename)

	diskStack string // SITE SETDISKSTACK sent last; "" for the default
	partStor  bool   // SITE PARTSTOR ON sent last (Part.DstPartStor)

	// sec protects every command and reply once AUTH GSSAPI succeeded
	// (gsi.go).
	sec *gss.Context

	// Timeout bounds each reply wait; zero means 60 s.
	Timeout time.Duration
}

// DialFunc opens a connection, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Dial connects to a GridFTP server and reads its banner.
func Dial(ctx context.Context, addr string) (*Conn, error) { return DialWith(ctx, nil, addr) }

// DialWith is Dial over a connection that dial opens to addr, e.g. a
// tunnel to a server that accepts no connections; nil dials TCP, again
// while the server does not answer (dialTCP).
func DialWith(ctx context.Context, dial DialFunc, addr string) (*Conn, error) {
	if dial == nil {
		dial = dialTCP
	}
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, &HandshakeError{Stage: StageConnect, Addr: addr, Err: err}
	}
	cc := &Conn{c: c, r: bufio.NewReaderSize(c, 4096), addr: addr}
	start := time.Now()
	rep, err := cc.Next(ctx)
	cc.sample(start) // a TCP server's banner comes a round trip after connect returns
	if err == nil && rep.Code != gridftp.CodeReady {
		err = &gridftp.Error{Reply: rep}
	}
	if err != nil {
		c.Close()
		return nil, &HandshakeError{Stage: StageBanner, Addr: addr, Err: err}
	}
	return cc, nil
}

// Stages of a HandshakeError.
const (
	StageConnect = "connect" // the connection was not made
	StageBanner  = "banner"  // the peer sent no 220 banner
	StageLogin   = "login"   // USER and PASS were not accepted
)

// HandshakeError is a failure before a server accepted a login: while
// connecting, reading its banner or logging in. Until a login is accepted
// nothing shows that the peer speaks FTP at all (an address may lead to
// an SSH, SMTP or HTTP server), so a caller that must not repeat what such
// a peer sent tells these failures from later ones by this type, and
// reads Err for what kind of failure it was.
type HandshakeError struct {
	Stage string // StageConnect, StageBanner or StageLogin
	Addr  string // the server's address as dialled
	Err   error
}

func (e *HandshakeError) Error() string {
	switch e.Stage {
	case StageConnect:
		return fmt.Sprintf("connect %s: %v", e.Addr, e.Err)
	case StageBanner:
		return fmt.Sprintf("%s: banner: %v", e.Addr, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Stage, e.Err) // callers name the server
}

func (e *HandshakeError) Unwrap() error { return e.Err }

// Addr is the server address the Conn was dialled with.
func (c *Conn) Addr() string { return c.addr }

// LocalAddr is the local end of the control connection.
func (c *Conn) LocalAddr() net.Addr { return c.c.LocalAddr() }

// RemoteAddr is the server end of the control connection.
func (c *Conn) RemoteAddr() net.Addr { return c.c.RemoteAddr() }

// Close ends the connection without QUIT, as globus-url-copy does, and
// its data connections.
func (c *Conn) Close() error {
	c.closeData()
	return c.c.Close()
}

// Quit sends QUIT, waits briefly for the reply and closes.
func (c *Conn) Quit(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.Do(ctx, "QUIT")
	c.Close()
	return err
}

// Send writes one command without waiting for its reply.
func (c *Conn) Send(format string, args ...any) error {
	return c.write(fmt.Sprintf(format, args...))
}

// write sends command lines in one write, without waiting for replies,
// after the lines held (hold).
func (c *Conn) write(lines ...string) error {
	b, err := c.encode(lines)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b, c.held = append(c.held, b...), nil
	c.c.SetWriteDeadline(time.Now().Add(c.timeout()))
	_, err = c.c.Write(b)
	return err
}

// hold keeps command lines to go out with the next write, or before the
// next reply is read, whichever comes first: they cost no write of their
// own.
func (c *Conn) hold(lines ...string) error {
	b, err := c.encode(lines)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.held = append(c.held, b...)
	return nil
}

// encode turns command lines into what goes on the wire, each sealed once
// the control channel is protected.
func (c *Conn) encode(lines []string) ([]byte, error) {
	var b []byte
	for _, line := range lines {
		if strings.ContainsAny(line, "\r\n\x00") {
			return nil, fmt.Errorf("%w: control characters in %q", gridftp.ErrBadCommand, line)
		}
		if c.sec != nil {
			sealed, err := gridftp.SealCommand(line, c.sec.Wrap)
			if err != nil {
				return nil, err
			}
			line = sealed
		}
		b = append(append(b, line...), "\r\n"...)
	}
	return b, nil
}

func (c *Conn) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return 60 * time.Second
}

// ahead sends a command whose reply the next read takes first: Next
// returns its failure, if it failed, in place of the reply asked for.
func (c *Conn) ahead(line string) error {
	if err := c.write(line); err != nil {
		return err
	}
	c.owed++
	return nil
}

// Next reads the next reply, preliminary or final. The wait ends with ctx
// or after Timeout. The replies of commands sent ahead come first.
func (c *Conn) Next(ctx context.Context) (gridftp.Reply, error) {
	for c.owed > 0 {
		rep, err := c.next(ctx)
		if err != nil {
			return rep, err
		}
		if rep.Preliminary() {
			continue
		}
		c.owed--
		if !rep.Positive() {
			return rep, &gridftp.Error{Reply: rep}
		}
	}
	return c.next(ctx)
}

func (c *Conn) next(ctx context.Context) (gridftp.Reply, error) {
	c.wmu.Lock()
	held := len(c.held) > 0
	c.wmu.Unlock()
	if held {
		if err := c.write(); err != nil { // the replies awaited may be theirs
			return gridftp.Reply{}, err
		}
	}
	deadline := time.Now().Add(c.timeout())
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.c.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	rep, err := gridftp.ReadReply(c.r)
	if err != nil && ctx.Err() != nil {
		return rep, ctx.Err()
	}
	return rep, err
}

// Final reads replies until a final (non-1xx) one; each preliminary reply
// is handed to onPrelim when it is not nil. A 4xx or 5xx final reply is
// returned as a *gridftp.Error as well.
func (c *Conn) Final(ctx context.Context, onPrelim func(gridftp.Reply)) (gridftp.Reply, error) {
	for {
		rep, err := c.Next(ctx)
		if err != nil {
			return rep, err
		}
		if rep.Preliminary() {
			if onPrelim != nil {
				onPrelim(rep)
			}
			continue
		}
		if !rep.Positive() {
			return rep, &gridftp.Error{Reply: rep}
		}
		return rep, nil
	}
}

// finals reads the final replies of n pipelined commands, in order, and
// stops at the first failure; the replies after it are left unread.
func (c *Conn) finals(ctx context.Context, n int) ([]gridftp.Reply, error) {
	reps := make([]gridftp.Reply, 0, n)
	for range n {
		rep, err := c.Final(ctx, nil)
		if err != nil {
			return reps, err
		}
		reps = append(reps, rep)
	}
	return reps, nil
}

// Do sends one command and waits for its final reply.
func (c *Conn) Do(ctx context.Context, format string, args ...any) (gridftp.Reply, error) {
	if err := c.Send(format, args...); err != nil {
		return gridftp.Reply{}, err
	}
	return c.Final(ctx, nil)
}

// Login authenticates and reads the server's features. USER, PASS, TYPE I
// and FEAT go out together and their replies are read in order, so that a
// login costs one round trip (servers read commands from a queue: ferry's
// and GCT's do); the wait for the first reply is a round trip (RTT). A PASS that a server did not ask for is ignored, as is a
// refused FEAT, as globus-url-copy does. After an error the session is in
// an unknown state: close it.
func (c *Conn) Login(ctx context.Context, user, password string) error {
	if strings.ContainsAny(user+password, "\r\n\x00") {
		return fmt.Errorf("login: %w: control characters in the user name or password", gridftp.ErrBadCommand)
	}
	start := time.Now()
	// Binary type, always: GCT starts in ASCII and would rewrite line ends.
	if err := c.write("USER "+user, "PASS "+password, "TYPE I", "FEAT"); err != nil {
		return &HandshakeError{Stage: StageLogin, Addr: c.addr, Err: err}
	}
	rep, err := c.Final(ctx, nil)
	c.sample(start)
	if err != nil {
		return &HandshakeError{Stage: StageLogin, Addr: c.addr, Err: err}
	}
	asked := rep.Code == gridftp.CodeNeedPassword
	var ge *gridftp.Error
	if _, err := c.Final(ctx, nil); err != nil && (asked || !errors.As(err, &ge)) {
		return &HandshakeError{Stage: StageLogin, Addr: c.addr, Err: err}
	}
	if _, err := c.Final(ctx, nil); err != nil {
		return fmt.Errorf("TYPE I: %w", err)
	}
	c.feat = map[string]string{}
	rep, err = c.Final(ctx, nil)
	if errors.As(err, &ge) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("FEAT: %w", err)
	}
	for _, l := range rep.Lines[1:] {
		if !strings.HasPrefix(l, " ") {
			continue
		}
		name, params, _ := strings.Cut(strings.TrimSpace(l), " ")
		c.feat[strings.ToUpper(name)] = params
	}
	return nil
}

// RTT is the least of the round trips measured (RTTSamples of them): the
// wait for the banner, for the reply to USER (Login), which servers
// answer at once, and for each Ping's. A busy server or client makes a
// round trip longer, never shorter, so the least is the link's. Zero
// before any.
func (c *Conn) RTT() time.Duration { return c.rtt }

// RTTSamples is how many round trips RTT is the least of.
func (c *Conn) RTTSamples() int { return c.rtts }

// sample counts the wait since start as a round trip.
func (c *Conn) sample(start time.Time) {
	d := time.Since(start)
	if c.rtts == 0 || d < c.rtt {
		c.rtt = d
	}
	c.rtts++
}

// Ping measures one more round trip (RTT) with a NOOP; a server that
// refuses it answers in a round trip too.
func (c *Conn) Ping(ctx context.Context) error {
	start := time.Now()
	var ge *gridftp.Error
	if _, err := c.Do(ctx, "NOOP"); err != nil && !errors.As(err, &ge) {
		return fmt.Errorf("NOOP: %w", err)
	}
	c.sample(start)
	return nil
}

// PeerIP is the server's IP address when the control connection is a TCP
// connection straight to it (DialWith's dial returned a *net.TCPConn);
// false over a tunnel, an SSH channel or any other connection a dial made.
func (c *Conn) PeerIP() (netip.Addr, bool) {
	tc, ok := c.c.(*net.TCPConn)
	if !ok {
		return netip.Addr{}, false
	}
	a, ok := tc.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	return a.AddrPort().Addr().Unmap().WithZone(""), true
}

// Feature reports whether the server announced a FEAT line name, and its
// parameters ("CKSM" → "MD5:10;ADLER32:10;...").
func (c *Conn) Feature(name string) (params string, ok bool) {
	params, ok = c.feat[strings.ToUpper(name)]
	return params, ok
}

// Checksums lists the algorithms the server's FEAT CKSM line names.
func (c *Conn) Checksums() []string {
	params, _ := c.Feature("CKSM")
	var out []string
	for _, item := range strings.Split(params, ";") {
		if name, _, _ := strings.Cut(item, ":"); name != "" {
			out = append(out, strings.ToUpper(name))
		}
	}
	return out
}

// Passive sends PASV and returns the address the server listens on. A
// server that answers with an unusable address (0.0.0.0, a private address
// seen from outside) is reached at its control connection's address.
func (c *Conn) Passive(ctx context.Context) (netip.AddrPort, error) {
	rep, err := c.Do(ctx, "PASV")
	if err != nil {
		return netip.AddrPort{}, err
	}
	return c.passiveAddr(rep)
}

// passiveAddr reads the address of a PASV reply, as Passive describes.
func (c *Conn) passiveAddr(rep gridftp.Reply) (netip.AddrPort, error) {
	ap, err := gridftp.ParsePassive(rep.Text())
	if err != nil {
		return netip.AddrPort{}, err
	}
	if ap.Addr().IsUnspecified() {
		if r, err := netip.ParseAddrPort(c.c.RemoteAddr().String()); err == nil {
			ap = netip.AddrPortFrom(r.Addr().Unmap(), ap.Port())
		}
	}
	return ap, nil
}

// Port sends PORT (IPv4) or EPRT (IPv6) for addr.
func (c *Conn) Port(ctx context.Context, addr netip.AddrPort) error {
	_, err := c.Do(ctx, "%s", portCommand(addr))
	return err
}

// portCommand is the PORT (IPv4) or EPRT (IPv6) command for addr.
func portCommand(addr netip.AddrPort) string {
	if addr.Addr().Unmap().Is4() {
		return "PORT " + gridftp.FormatHostPort(addr)
	}
	return fmt.Sprintf("EPRT |2|%s|%d|", addr.Addr(), addr.Port())
}

// Size returns the size of path.
func (c *Conn) Size(ctx context.Context, path string) (int64, error) {
	rep, err := c.Do(ctx, "SIZE %s", path)
	if err != nil {
		return 0, err
	}
	var n int64
	if _, err := fmt.Sscan(strings.TrimSpace(rep.Text()), &n); err != nil || n < 0 {
		return 0, fmt.Errorf("SIZE %s: bad reply %q", path, rep.Text())
	}
	return n, nil
}

// Checksum runs CKSM over [off, off+length) of path (length -1: to the end)
// and returns the lowercase hex digest.
func (c *Conn) Checksum(ctx context.Context, alg, path string, off, length int64) (string, error) {
	rep, err := c.Do(ctx, "CKSM %s %d %d %s", alg, off, length, path)
	if err != nil {
		return "", err
	}
	return strings.ToLower(strings.TrimSpace(rep.Text())), nil
}

// Rename renames from to to (RNFR, RNTO), replacing a file there, in one
// round trip: the two commands go out together.
func (c *Conn) Rename(ctx context.Context, from, to string) error {
	if err := c.SendRename(from, to); err != nil {
		return err
	}
	return c.RenameReply(ctx)
}

// PartStorChange is the SITE PARTSTOR argument (Part.DstPartStor) that
// makes c write whole STORs under their temporary names and rename them
// itself (on) or not, or "" when c does so already.
func (c *Conn) PartStorChange(on bool) string {
	switch {
	case on == c.partStor:
		return ""
	case on:
		return "ON"
	}
	return "OFF"
}

// SendRename sends the rename of from to to (RNFR, RNTO) without
// waiting, in the next command's write (or before the next reply is read):
// RenameReply reads its outcome in its turn, after the replies of the
// commands sent before it (pipelined).
func (c *Conn) SendRename(from, to string) error {
	return c.hold("RNFR "+from, "RNTO "+to)
}

// RenameReply reads the replies of a rename SendRename sent: nil when it
// was done, a *gridftp.Error when it was refused, another error when the
// session broke.
func (c *Conn) RenameReply(ctx context.Context) error {
	var refused *gridftp.Error
	_, from := c.Final(ctx, nil)
	if from != nil && !errors.As(from, &refused) {
		return from
	}
	_, to := c.Final(ctx, nil) // RNTO's refusal follows RNFR's
	if to != nil && !errors.As(to, &refused) {
		return to
	}
	return errors.Join(from, to)
}

// RenameAll renames each move's [0] to its [1] (RNFR, RNTO), pipelined
// (DoAll): many renames cost about a round trip. errs holds each one's
// refusal; err is a broken session.
func (c *Conn) RenameAll(ctx context.Context, moves [][2]string) (errs []error, err error) {
	cmds := make([]string, 0, 2*len(moves))
	for _, m := range moves {
		cmds = append(cmds, "RNFR "+m[0], "RNTO "+m[1])
	}
	_, cerrs, err := c.DoAll(ctx, cmds)
	if err != nil {
		return nil, err
	}
	errs = make([]error, len(moves))
	for i := range moves {
		errs[i] = errors.Join(cerrs[2*i], cerrs[2*i+1]) // RNTO's refusal follows RNFR's
	}
	return errs, nil
}

// PipelineDepth bounds the commands DoAll sends before it reads their
// replies: enough to hide the round trips, few enough that replies waiting
// to be read never stall the server.
const PipelineDepth = 64

// DoAll sends commands pipelined, PipelineDepth at a time, and returns
// each one's reply, or its refusal in errs; err is a broken session. A
// batch of commands costs about a round trip, not one each.
func (c *Conn) DoAll(ctx context.Context, cmds []string) (reps []gridftp.Reply, errs []error, err error) {
	reps, errs = make([]gridftp.Reply, len(cmds)), make([]error, len(cmds))
	for start := 0; start < len(cmds); start += PipelineDepth {
		batch := cmds[start:min(start+PipelineDepth, len(cmds))]
		if err := c.write(batch...); err != nil {
			return nil, nil, err
		}
		for i := range batch {
			rep, err := c.Final(ctx, nil)
			var refused *gridftp.Error
			switch {
			case errors.As(err, &refused):
				errs[start+i] = err
			case err != nil:
				return nil, nil, err
			default:
				reps[start+i] = rep
			}
		}
	}
	return reps, errs, nil
}

// ChecksumAll runs CKSM alg over each whole file of paths, pipelined
// (DoAll).
func (c *Conn) ChecksumAll(ctx context.Context, alg string, paths []string) (sums []string, errs []error, err error) {
	cmds := make([]string, len(paths))
	for i, p := range paths {
		cmds[i] = fmt.Sprintf("CKSM %s 0 -1 %s", alg, p)
	}
	reps, errs, err := c.DoAll(ctx, cmds)
	if err != nil {
		return nil, nil, err
	}
	sums = make([]string, len(paths))
	for i, r := range reps {
		if errs[i] == nil {
			sums[i] = strings.ToLower(strings.TrimSpace(r.Text()))
		}
	}
	return sums, errs, nil
}
