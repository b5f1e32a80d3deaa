package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/storage"
)

// A front end (Server.Movers) is the one control channel of a striped
// endpoint. It logs clients in, lists, makes and checksums files itself,
// on the storage its movers share, and moves data only through the
// movers: SPAS opens a passive port on each mover and answers with one
// address per mover; a send (RETR, ERET) runs on every mover at once,
// each sending the blocks the stripe layout gives it; a receive into
// passive ports (STOR, ESTO) runs on each mover whose port the client
// was given, each writing what arrives at its port. Each mover's 111
// range markers and 112 perf markers reach the client with their stripe's
// index, as GCT's striped server sends them. A mover that fails or dies
// fails the transfer with a reply that names it, once the others are
// aborted; the range markers already sent let the client send only what
// is missing. Movers are reached over TLS with the mover key
// (moverkey.go), with a session per client session.

// frontSession is a front end session's side of its movers.
type frontSession struct {
	movers []*moverConn // by index; nil: not connected
	// stripes are the movers whose passive ports the client was given
	// (SPAS, PASV), in the order of the reply; nil after PORT, EPRT,
	// SPOR.
	stripes []int
}

// moverConn is a session with one mover.
type moverConn struct {
	c    *client.Conn
	sent map[string]string // the state lines last sent, by kind (moverState)
	used time.Time         // when it last answered
}

// moverIdle is how long a mover session may go unused before its next
// use checks that it is still there (the mover may have restarted, or
// closed it as idle), so that a transfer does not fail on a stale one.
const moverIdle = 20 * time.Second

// frontCommands are the verbs a front end serves through its movers.
var frontCommands map[string]func(ss *session, arg string) bool

func init() {
	frontCommands = map[string]func(ss *session, arg string) bool{
		"SPAS": (*session).frontSPAS,
		"PASV": func(ss *session, _ string) bool { return ss.frontPASV(false) },
		"EPSV": func(ss *session, arg string) bool {
			if strings.EqualFold(strings.TrimSpace(arg), "ALL") {
				return ss.handleEPSV(arg)
			}
			return ss.frontPASV(true)
		},
		"PORT": func(ss *session, arg string) bool { ss.frontOf().stripes = nil; return ss.handlePORT(arg) },
		"EPRT": func(ss *session, arg string) bool { ss.frontOf().stripes = nil; return ss.handleEPRT(arg) },
		"SPOR": func(ss *session, arg string) bool { ss.frontOf().stripes = nil; return ss.handleSPOR(arg) },
		"RETR": func(ss *session, arg string) bool { return ss.frontSend("RETR "+ss.path(arg), ss.path(arg)) },
		"ERET": (*session).frontERET,
		"STOR": func(ss *session, arg string) bool { return ss.frontStore("STOR", ss.path(arg), 0) },
		"ESTO": (*session).frontESTO,
		"APPE": func(ss *session, arg string) bool { return ss.frontStore("APPE", ss.path(arg), 0) },
		"LIST": func(ss *session, arg string) bool { return ss.frontList("LIST", arg, ss.handleLIST) },
		"NLST": func(ss *session, arg string) bool { return ss.frontList("NLST", arg, ss.handleNLST) },
		"MLSD": func(ss *session, arg string) bool { return ss.frontList("MLSD", arg, ss.handleMLSD) },
	}
}

func (ss *session) frontOf() *frontSession {
	if ss.front == nil {
		ss.front = &frontSession{movers: make([]*moverConn, len(ss.srv.Movers))}
	}
	return ss.front
}

// closeFront ends the sessions with the movers.
func (ss *session) closeFront() {
	if ss.front == nil {
		return
	}
	for i := range ss.front.movers {
		ss.dropMover(i)
	}
}

// dropMover closes the session with mover i; the next use connects anew.
func (ss *session) dropMover(i int) {
	if m := ss.front.movers[i]; m != nil {
		m.c.Close()
		ss.front.movers[i] = nil
	}
}

// dialMover opens a session with the mover at addr and tells it the
// client.
func (ss *session) dialMover(ctx context.Context, addr string) (*moverConn, error) {
	conf, err := ss.srv.moverTLS()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, moverDialTimeout)
	defer cancel()
	d := &tls.Dialer{Config: conf}
	c, err := client.DialWith(ctx, d.DialContext, addr)
	if err != nil {
		return nil, err
	}
	return &moverConn{c: c, sent: map[string]string{}, used: time.Now()}, nil
}

// fresh reports whether an idle mover session still answers.
func (m *moverConn) fresh(ctx context.Context) bool {
	if time.Since(m.used) < moverIdle {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, moverDialTimeout)
	defer cancel()
	if _, err := m.c.Do(ctx, "NOOP"); err != nil {
		return false
	}
	m.used = time.Now()
	return true
}

// connectMovers makes sure the movers named (all when nil) have a
// session, in parallel, and returns those that do; it logs the others.
func (ss *session) connectMovers(ctx context.Context, which []int) (up []int, down []error) {
	f := ss.frontOf()
	if which == nil {
		for i := range f.movers {
			which = append(which, i)
		}
	}
	conns := make([]*moverConn, len(f.movers))
	errs := make([]error, len(f.movers))
	var wg sync.WaitGroup
	for _, i := range which {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if m := f.movers[i]; m != nil && m.fresh(ctx) {
				conns[i] = m
				return
			}
			conns[i], errs[i] = ss.dialMover(ctx, ss.srv.Movers[i])
		}()
	}
	wg.Wait()
	for _, i := range which {
		if m := f.movers[i]; m != nil && m != conns[i] {
			m.c.Close() // it did not answer
		}
		f.movers[i] = conns[i]
		if f.movers[i] != nil {
			up = append(up, i)
			continue
		}
		err := moverError(i, ss.srv.Movers[i], errs[i])
		ss.log.Warn("data mover unreachable", "err", err)
		down = append(down, err)
	}
	return up, down
}

// moverState is the session state a mover's session must share before a
// transfer, as kinds and the line that sets each, in the order they go:
// the client (SITE CLIENT), then what the client set.
func (ss *session) moverState() [][2]string {
	mode := "MODE S"
	if ss.modeE {
		mode = "MODE E"
	}
	marks := 5 * time.Second // the front end hears from each mover while it sends
	if ss.retrMarks > 0 {
		marks = min(marks, ss.retrMarks)
	}
	retr := fmt.Sprintf("OPTS RETR Parallelism=%d;Markers=%d;%s", max(ss.parallel, 1), int(marks/time.Second), ss.layout)
	anywhere := ""
	if ss.srv.PassiveFromAnywhere {
		anywhere = " ANY"
	}
	// SITE CLIENT first: it resets the mover's data channel.
	st := [][2]string{{"client", fmt.Sprintf("SITE CLIENT %s %s%s", ss.peerIP(), ss.localIP(), anywhere)},
		{"mode", mode}, {"retr", retr}}
	if ss.dcsc != "" {
		st = append(st, [2]string{"dcsc", "DCSC P " + ss.dcsc})
	} else {
		st = append(st, [2]string{"dcsc", "DCSC D"})
	}
	if ss.dcauA {
		st = append(st, [2]string{"dcau", "DCAU A"})
		prot := "PROT C"
		if ss.protP {
			prot = "PROT P"
		}
		st = append(st, [2]string{"prot", prot})
	} else {
		st = append(st, [2]string{"dcau", "DCAU N"}, [2]string{"prot", ""})
	}
	from := make([]string, len(ss.pasvFrom))
	for i, a := range ss.pasvFrom {
		from[i] = a.String()
	}
	pasv := "OPTS PASV"
	if len(from) > 0 {
		pasv += " From=" + strings.Join(from, ",") + ";"
	}
	return append(st, [2]string{"pasv", pasv},
		[2]string{"storbuf", fmt.Sprintf("SITE STORBUFSIZE %d", ss.storBuf)},
		[2]string{"retrbuf", fmt.Sprintf("SITE RETRBUFSIZE %d", ss.retrBuf)})
}

// syncMover sends mover m the state lines that changed since it last got
// them, then cmds, pipelined; every reply must be positive.
func (ss *session) syncMover(ctx context.Context, m *moverConn, cmds []string) error {
	var lines, kinds []string
	for _, kv := range ss.moverState() {
		if kv[1] != "" && m.sent[kv[0]] != kv[1] {
			lines, kinds = append(lines, kv[1]), append(kinds, kv[0])
		}
	}
	_, errs, err := m.c.DoAll(ctx, append(lines, cmds...))
	if err != nil {
		return err
	}
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("%s: %w", strings.Fields(append(lines, cmds...)[i])[0], err)
		}
		if i < len(kinds) {
			m.sent[kinds[i]] = lines[i]
		}
	}
	return nil
}

// passiveAt opens a passive port on mover i for the client and returns
// its address.
func (ss *session) passiveAt(ctx context.Context, i int) (netip.AddrPort, error) {
	m := ss.front.movers[i]
	if err := ss.syncMover(ctx, m, nil); err != nil {
		return netip.AddrPort{}, err
	}
	rep, err := m.c.Do(ctx, "SPAS")
	if err != nil {
		return netip.AddrPort{}, err
	}
	aps, err := client.ParseStripedPassive(rep)
	if err != nil || len(aps) != 1 {
		return netip.AddrPort{}, fmt.Errorf("SPAS: reply %q", rep.Text())
	}
	return aps[0], nil
}

// frontSPAS answers with a passive port on each mover that is up.
func (ss *session) frontSPAS(string) bool {
	ss.data.close()
	f := ss.frontOf()
	f.stripes = nil
	up, down := ss.connectMovers(ss.ctx, nil)
	aps, errs := make([]netip.AddrPort, len(up)), make([]error, len(up))
	var wg sync.WaitGroup
	for k, i := range up {
		wg.Add(1)
		go func() {
			defer wg.Done()
			aps[k], errs[k] = ss.passiveAt(ss.ctx, i)
		}()
	}
	wg.Wait()
	lines := []string{"Entering Striped Passive Mode."}
	for k, i := range up {
		if err := errs[k]; err != nil {
			err = moverError(i, ss.srv.Movers[i], err)
			ss.log.Warn("data mover: no passive port", "err", err)
			ss.dropMover(i)
			down = append(down, err)
			continue
		}
		f.stripes = append(f.stripes, i)
		lines = append(lines, " "+gridftp.FormatHostPort(aps[k]))
	}
	if len(f.stripes) == 0 {
		ss.replyf(gridftp.CodeCantOpenData, "Cannot open passive data ports: %v.", errors.Join(down...))
		return true
	}
	ss.reply(gridftp.CodeExtPassive, append(lines, "End")...)
	return true
}

// frontPASV opens a passive port on one mover, each PASV the next: the
// sessions of a client that runs several at once spread over the movers.
// EPSV can only name a port of the front end's own address.
func (ss *session) frontPASV(epsv bool) bool {
	ss.data.close()
	f := ss.frontOf()
	f.stripes = nil
	n := len(ss.srv.Movers)
	first := int(ss.srv.nextPasv.Add(1) % uint64(n))
	var errs []error
	for k := range n {
		i := (first + k) % n
		if up, down := ss.connectMovers(ss.ctx, []int{i}); len(up) == 0 {
			errs = append(errs, down...)
			continue
		}
		ap, err := ss.passiveAt(ss.ctx, i)
		if err != nil {
			errs = append(errs, moverError(i, ss.srv.Movers[i], err))
			ss.dropMover(i)
			continue
		}
		switch {
		case !epsv:
			f.stripes = []int{i}
			ss.replyf(gridftp.CodePassive, "Entering Passive Mode (%s)", gridftp.FormatHostPort(ap))
		case ap.Addr() == ss.localIP():
			f.stripes = []int{i}
			ss.replyf(gridftp.CodeExtPassive, "Entering Extended Passive Mode (|||%d|)", ap.Port())
		default:
			ss.reply(gridftp.CodeCantOpenData, "The data movers are on other hosts: use PASV or SPAS.")
		}
		return true
	}
	ss.replyf(gridftp.CodeCantOpenData, "Cannot open passive data port: %v.", errors.Join(errs...))
	return true
}

// frontReady checks that the client set up the data channel.
func (ss *session) frontReady(ctx context.Context) bool {
	switch {
	case ctx.Err() != nil:
		ss.reply(gridftp.CodeTransferAborted, "Transfer aborted.")
	case ss.frontOf().stripes == nil && len(ss.data.active) == 0:
		ss.reply(gridftp.CodeCantOpenData, "Can't open data connection: send PASV, SPAS or PORT first.")
	default:
		return true
	}
	return false
}

// activeMovers are the movers an active transfer (after PORT, EPRT,
// SPOR) runs on: in MODE E every mover that is up, each connecting to
// the client's addresses; in stream mode, or for a receive, one.
func (ss *session) activeMovers(ctx context.Context, all bool) ([]int, error) {
	n := len(ss.srv.Movers)
	if all {
		up, down := ss.connectMovers(ctx, nil)
		if len(up) == 0 {
			return nil, errors.Join(down...)
		}
		return up, nil
	}
	first := int(ss.srv.nextPasv.Add(1) % uint64(n))
	var errs []error
	for k := range n {
		i := (first + k) % n
		up, down := ss.connectMovers(ctx, []int{i})
		if len(up) > 0 {
			return up, nil
		}
		errs = append(errs, down...)
	}
	return nil, errors.Join(errs...)
}

// restLine is the REST the client sent, for the movers.
func (ss *session) restLine() []string {
	switch {
	case !ss.restSet:
		return nil
	case !ss.restRanges.Empty():
		return []string{"REST " + ss.restRanges.String()}
	default:
		return []string{fmt.Sprintf("REST %d", ss.restOffset)}
	}
}

func (ss *session) frontERET(arg string) bool {
	off, n, p, ok := parseERET(arg)
	if !ok {
		ss.reply(gridftp.CodeBadArguments, "ERET: expected P OFFSET LENGTH PATH.")
		return true
	}
	return ss.frontSend(fmt.Sprintf("ERET P %d %d %s", off, n, ss.path(p)), ss.path(p))
}

// frontSend runs a send (verb is the RETR or ERET the movers get) of the
// file p on the movers.
func (ss *session) frontSend(verb, p string) bool {
	defer ss.clearRest()
	ctx, done := ss.transferContext()
	defer done()
	if !ss.frontReady(ctx) {
		return true
	}
	if _, err := ss.srv.FS.Stat(ctx, p); err != nil {
		ss.errorReply("open", err)
		return true
	}
	movers := ss.front.stripes
	if movers == nil {
		var err error
		if movers, err = ss.activeMovers(ctx, ss.modeE); err != nil {
			ss.replyf(gridftp.CodeCantOpenData, "No data mover: %v.", err)
			return true
		}
	}
	legs := make([]leg, len(movers))
	for k, i := range movers {
		cmds := []string{fmt.Sprintf("SITE STRIPE %d %d", k, len(movers))}
		if ss.front.stripes == nil {
			cmds = append(cmds, client.SPORCommand(ss.data.active))
		}
		legs[k] = leg{mover: i, cmds: append(append(cmds, ss.restLine()...), verb)}
	}
	ss.finishFront(ctx, "send", ss.runLegs(ctx, legs, false))
	return true
}

func (ss *session) frontESTO(arg string) bool {
	if p, off, ok := ss.estoArgs(arg); ok {
		ss.frontStore("ESTO", p, off)
	}
	return true
}

// frontStore runs a receive (STOR, ESTO at base, APPE) of the file p on
// the movers: on each whose passive port the client has, or on one that
// connects to the client.
func (ss *session) frontStore(verb, p string, base int64) bool {
	defer ss.clearRest()
	want := ss.scks
	ss.scks = nil
	ctx, done := ss.transferContext()
	defer done()
	if !ss.frontReady(ctx) {
		return true
	}
	if ss.disk != nil {
		ss.reply(gridftp.CodeParamNotSupported, "A striped endpoint stores files only: no disk stack.")
		return true
	}
	movers := ss.front.stripes
	striped := len(movers) > 1
	if movers == nil {
		var err error
		if movers, err = ss.activeMovers(ctx, false); err != nil {
			ss.replyf(gridftp.CodeCantOpenData, "No data mover: %v.", err)
			return true
		}
	}
	var line string
	switch {
	case verb == "APPE" && striped:
		ss.reply(gridftp.CodeParamNotSupported, "APPE is not striped: use PASV.")
		return true
	case verb == "APPE":
		line = "APPE " + p
	case verb == "STOR" && !striped:
		line = "STOR " + p
	default:
		// Several movers write one file: none may truncate it, so a
		// plain STOR empties it here first.
		if verb == "STOR" && !ss.restSet {
			f, err := ss.srv.FS.Create(ctx, p, storage.Truncate)
			if err != nil {
				ss.errorReply("open", err)
				return true
			}
			f.Close()
		}
		line = fmt.Sprintf("ESTO A %d %s", base, p)
	}
	ss.srv.sums.forget(p, 0, -1)
	legs := make([]leg, len(movers))
	for k, i := range movers {
		var cmds []string
		if ss.front.stripes == nil {
			cmds = append(cmds, client.SPORCommand(ss.data.active))
		}
		if !strings.HasPrefix(line, "ESTO") {
			cmds = append(cmds, ss.restLine()...)
		}
		legs[k] = leg{mover: i, cmds: append(cmds, line)}
	}
	err := ss.runLegs(ctx, legs, true)
	ss.srv.sums.forget(p, 0, -1)
	if err == nil && want != nil {
		err = ss.verify(ctx, p, want)
	}
	ss.finishFront(ctx, "write", err)
	return true
}

// frontList sends a listing through the mover whose passive port the
// client has, or, after PORT, from here.
func (ss *session) frontList(verb, arg string, local func(string) bool) bool {
	f := ss.frontOf()
	if f.stripes == nil {
		return local(arg)
	}
	ctx, done := ss.transferContext()
	defer done()
	line := verb
	if arg != "" {
		line += " " + arg
	}
	ss.finishFront(ctx, "list", ss.runLegs(ctx, []leg{{mover: f.stripes[0], cmds: []string{"SITE STRIPE 0 1", "CWD " + ss.cwd, line}}}, false))
	return true
}

// finishFront sends a front end transfer's final reply.
func (ss *session) finishFront(ctx context.Context, op string, err error) {
	var mf *moverFailure
	switch {
	case err == nil:
		ss.reply(gridftp.CodeTransferComplete, "Transfer Complete.")
	case ss.aborted(ctx):
		ss.reply(gridftp.CodeTransferAborted, "Transfer aborted.")
	case errors.As(err, &mf):
		ss.replyf(mf.code, "%v", err)
	default:
		ss.errorReply(op, err)
	}
}

// leg is one mover's part of a transfer: the commands it gets after the
// state lines, the transfer verb last.
type leg struct {
	mover int
	cmds  []string
}

// moverFailure is a transfer a mover failed: the reply names it.
type moverFailure struct {
	code int // the reply code for the client
	err  error
}

func (e *moverFailure) Error() string { return e.err.Error() }
func (e *moverFailure) Unwrap() error { return e.err }

// legState is where a leg stands, for stopping it.
type legState struct {
	mu      sync.Mutex
	stop    bool // the transfer is over for it: a failure elsewhere, ABOR
	running bool // its transfer command went out and has no final reply
	aborted bool // ABOR went out while it ran: its reply follows
	broken  bool // its session is in an unknown state: dropped
}

// errLegStopped is a leg stopped before its transfer began.
var errLegStopped = errors.New("stopped")

// abortGrace is how long an aborted mover has to answer before its
// session is dropped.
const abortGrace = 15 * time.Second

// runLegs runs a transfer on its legs' movers at once: it sends the
// client one 150 when every mover has begun, passes their markers on
// with their stripe's index, and when one fails aborts the others. The
// error names the first mover that failed.
func (ss *session) runLegs(ctx context.Context, legs []leg, receiving bool) error {
	n := len(legs)
	type result struct {
		k   int
		err error
	}
	started := make(chan int, n)
	begin := make(chan struct{}) // closed when the client got the 150, or the transfer failed
	results := make(chan result, n)
	states := make([]*legState, n)
	for k, l := range legs {
		states[k] = &legState{}
		m := ss.front.movers[l.mover]
		go func() {
			results <- result{k, ss.runLeg(k, n, m, l, states[k], started, begin, receiving)}
		}()
	}
	opened := false
	open := func() {
		if !opened {
			opened = true
			close(begin)
		}
	}
	stopAll := func() {
		open()
		for k, st := range states {
			st.mu.Lock()
			st.stop = true
			if st.running && !st.aborted {
				st.aborted = true
				c := ss.front.movers[legs[k].mover].c
				c.Send("ABOR")
				time.AfterFunc(abortGrace, func() {
					st.mu.Lock()
					defer st.mu.Unlock()
					if st.running {
						c.Close() // the leg's read fails, and its mover is dropped
					}
				})
			}
			st.mu.Unlock()
		}
	}
	var first error
	begun, finished := 0, 0
	for finished < n {
		select {
		case <-started:
			if begun++; begun == n && first == nil && !opened {
				ss.reply(gridftp.CodeOpeningData, "Beginning transfer.")
				open()
			}
		case r := <-results:
			finished++
			if r.err != nil && first == nil {
				first = r.err
				stopAll()
			}
		case <-ctx.Done():
			stopAll()
			ctx = context.Background() // now wait for the legs' answers
		}
	}
	open()
	for k, l := range legs {
		if st := states[k]; st.broken || st.running {
			ss.dropMover(l.mover)
		} else {
			ss.front.movers[l.mover].used = time.Now()
		}
	}
	return first
}

// runLeg runs one leg on mover m (stripe k of n): it sends the state and
// the commands, reports on started when the transfer begins, waits for
// begin, and passes the mover's markers on until its final reply.
func (ss *session) runLeg(k, n int, m *moverConn, l leg, st *legState, started chan<- int, begin <-chan struct{}, receiving bool) error {
	name := func(err error) error { return moverError(l.mover, ss.srv.Movers[l.mover], err) }
	lost := func(err error) error {
		st.mu.Lock()
		st.broken = true
		st.mu.Unlock()
		return &moverFailure{code: gridftp.CodeLocalError, err: name(fmt.Errorf("lost: %w", err))}
	}
	if err := ss.syncMover(ss.ctx, m, l.cmds[:len(l.cmds)-1]); err != nil {
		var refused *gridftp.Error
		if errors.As(err, &refused) {
			return &moverFailure{code: gridftp.CodeCantOpenData, err: name(err)}
		}
		return lost(err)
	}
	st.mu.Lock()
	if st.stop {
		st.mu.Unlock()
		return errLegStopped
	}
	if err := m.c.Send("%s", l.cmds[len(l.cmds)-1]); err != nil {
		st.mu.Unlock()
		return lost(err)
	}
	st.running = true
	st.mu.Unlock()
	var final gridftp.Reply
	for final.Code == 0 {
		rep, err := m.c.Next(context.Background())
		if err != nil {
			return lost(err)
		}
		switch {
		case rep.Code == gridftp.CodeOpeningData || rep.Code == gridftp.CodeReusingData:
			started <- k
			<-begin // no marker before the client's 150
		case rep.Code == gridftp.CodeRestartMarker:
			ss.send(rep)
		case rep.Code == gridftp.CodePerfMarker:
			if pm, err := gridftp.ParsePerfMarker(rep); err == nil && (receiving || ss.retrMarks > 0) {
				pm.StripeIndex, pm.StripeCount = k, n
				ss.send(pm.Reply())
			}
		case rep.Preliminary():
		default:
			final = rep
		}
	}
	st.mu.Lock()
	aborted := st.aborted
	st.mu.Unlock()
	if aborted {
		// ABOR's own reply follows the transfer's.
		if _, err := m.c.Final(context.Background(), nil); err != nil {
			var refused *gridftp.Error
			if !errors.As(err, &refused) {
				return lost(err)
			}
		}
	}
	st.mu.Lock()
	st.running = false
	st.mu.Unlock()
	if !final.Positive() {
		return &moverFailure{code: gridftp.CodeLocalError, err: name(&gridftp.Error{Reply: final})}
	}
	return nil
}

// siteMOVERS reports each mover of a front end, up or down, from a fresh
// connection to it.
func (ss *session) siteMOVERS(string) {
	if len(ss.srv.Movers) == 0 {
		ss.reply(gridftp.CodeSyntaxError, "Invalid command.")
		return
	}
	lines := make([]string, len(ss.srv.Movers))
	var wg sync.WaitGroup
	for i, addr := range ss.srv.Movers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := ss.dialMover(ss.ctx, addr)
			if err != nil {
				var op *net.OpError // the line names the address already
				if errors.As(err, &op) && op.Err != nil {
					err = op.Err
				}
				lines[i] = fmt.Sprintf(" %d %s down %s", i, addr, oneLine(err))
				return
			}
			m.c.Close()
			lines[i] = fmt.Sprintf(" %d %s up", i, addr)
		}()
	}
	wg.Wait()
	ss.reply(gridftp.CodeOK, append(append([]string{"Data movers:"}, lines...), "End.")...)
}

// oneLine flattens an error for a reply line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
