package client

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"ferry/gridftp"
)

// Pair is a source and a destination session set up for third-party MODE E
// transfers: data flows between the two servers over a data channel that
// stays cached across files (no PASV/PORT per file), and transfers may be
// pipelined: Start several, then Finish them in order.
type Pair struct {
	Src, Dst *Conn
	// Live names a checksum algorithm both servers compute while data
	// moves (FEAT CKSMLIVE), so that a CKSM after a transfer costs no
	// second pass over the data; "" for none.
	Live string
	// Reverse makes the destination connect to the source: PASV goes to
	// the source (which must offer FEAT PASVSEND), PORT to the
	// destination. In MODE E the sender normally connects; a destination
	// that accepts no connections (ferry connect) needs this.
	Reverse bool
	// Cred, when set, authenticates the data channel: both servers get it
	// (DCSC P, DCAU A; both must offer FEAT DATATLS), and Private
	// encrypts it (PROT P).
	Cred    *gridftp.DataCredential
	Private bool
	// From names the addresses the passive side admits besides this
	// client (OPTS PASV From, a ferry server's): the other server's, for
	// an unauthenticated data channel.
	From []netip.Addr
	// Striping, when set, sets the data channel up striped: SPAS to the
	// destination, SPOR with every address it gives to the source, and
	// the layout in the source's OPTS RETR. Each of the destination's
	// stripes then reports its own markers, which Finish adds up. Not
	// with Reverse.
	Striping *gridftp.Layout
	// MaxParallel, above the parallelism, lets the source add streams up
	// to it while a transfer runs and they add throughput (OPTS RETR
	// Parallelism's maximum; FEAT STREAMGROW at both ends, which the
	// caller checks). Not with Reverse or Striping.
	MaxParallel int
	// Stall, when positive, bounds how long a transfer may go without
	// progress once its markers have shown data moving: Finish then ends
	// it with a *StallError (ErrStalled). Zero: never.
	Stall    time.Duration
	parallel int
	stripes  int // addresses of the passive side; 0 until Setup
	ready    bool
	used     bool // a transfer started since Setup
}

// Part names what one transfer moves: a whole file (Length < 0) or the
// section [Offset, Offset+Length) of it, and the ranges the destination
// already holds (a restart). Members, for a source stack that moves many
// files in one transfer (ferry's tar), names them, relative to SrcPath.
type Part struct {
	SrcPath, DstPath string
	Offset, Length   int64
	Have             gridftp.Ranges
	Members          []string
	// SrcStack and DstStack, when set, are disk stacks (SITE SETDISKSTACK)
	// sent ahead of the transfer, pipelined ("default" for the default):
	// for layers the server names in FEAT, whose refusal is not expected
	// (a refusal fails the transfer; close the pair then).
	SrcStack, DstStack string
	// DstPartStor, when set, is SITE PARTSTOR's argument ("ON", "OFF")
	// sent to the destination ahead of the transfer, pipelined (PartStor):
	// on, a whole STOR is written under DstPath's temporary name and the
	// server renames it over DstPath before its 226. Only for a server
	// that names PARTSTOR in FEAT (a refusal fails the transfer).
	DstPartStor string
}

// pre counts the commands Start sends each side ahead of the transfer.
func (part Part) pre() (src, dst int) {
	if !part.Have.Empty() {
		src, dst = 1, 1
	}
	if part.SrcStack != "" {
		src++
	}
	if part.DstStack != "" {
		dst++
	}
	if part.DstPartStor != "" {
		dst++
	}
	return src + len(membersCommands(part.Members)), dst
}

// Setup prepares both sessions: MODE E, parallelism and markers on the
// source, the passive side's address announced to the other (the
// destination's to the source or, with Reverse, the other way round; the
// parallelism then goes to the destination too, which connects that many
// streams). The commands to each side go out together and only PORT
// waits, for the reply to PASV: a round trip to each side in all. Sessions
// that moved data to or from this client (a listing) drop that data
// channel first. A pair set up that has moved nothing yet takes another
// parallelism (not reversed or striped) as one command to the source,
// sent ahead of the first transfer. After an error, close the pair.
func (p *Pair) Setup(ctx context.Context, parallel int) error {
	parallel = max(parallel, 1)
	if p.ready && (p.stripes > 0) == (p.Striping != nil) {
		switch {
		case p.parallel == parallel:
			return nil
		case !p.used && !p.Reverse && p.Striping == nil && p.Src.takesLateParallelism():
			// Nothing moved yet, so no streams are cached: the source
			// takes the new parallelism ahead of the first transfer,
			// with no round trip of its own (a refusal fails that one).
			if err := p.Src.ahead(p.retrOpts(parallel)); err != nil {
				return err
			}
			p.parallel = parallel
			return nil
		}
	}
	if p.Striping != nil && p.Reverse {
		return errors.New("client: a striped pair cannot be reversed")
	}
	p.Src.dropData()
	p.Dst.dropData()
	src, err := p.Src.securityCommands(p.Cred, p.Private)
	if err != nil {
		return err
	}
	dst, err := p.Dst.securityCommands(p.Cred, p.Private)
	if err != nil {
		return err
	}
	if !p.Src.data.modeE {
		src = append(src, "MODE E")
	}
	if !p.Dst.data.modeE {
		dst = append(dst, "MODE E")
	}
	src = append(src, p.retrOpts(parallel))
	if p.Live != "" {
		live := fmt.Sprintf("OPTS CKSM Live=%s;", p.Live)
		src, dst = append(src, live), append(dst, live)
	}
	passive, pcmds, active, acmds := p.Dst, dst, p.Src, src
	if p.Reverse {
		passive, pcmds, active, acmds = p.Src, src, p.Dst, append(dst, fmt.Sprintf("OPTS RETR Parallelism=%d,%d,%d;", parallel, parallel, parallel))
	}
	if len(p.From) > 0 && p.Cred == nil {
		from := make([]string, len(p.From))
		for i, a := range p.From {
			from[i] = a.String()
		}
		pcmds = append(pcmds, "OPTS PASV From="+strings.Join(from, ",")+";")
	}
	if p.Striping != nil {
		pcmds = append(pcmds, "SPAS")
	} else {
		pcmds = append(pcmds, "PASV")
	}
	if err := active.write(acmds...); err != nil {
		return err
	}
	if err := passive.write(pcmds...); err != nil {
		return err
	}
	reps, err := passive.finals(ctx, len(pcmds))
	if err != nil {
		return err
	}
	port, stripes, err := p.portFor(passive, reps[len(reps)-1])
	if err != nil {
		return err
	}
	if err := active.write(port); err != nil {
		return err
	}
	if _, err := active.finals(ctx, len(acmds)+1); err != nil {
		return err
	}
	// Secured first: that drops the data channel, which PASV and PORT
	// have just set up anew at the servers; this client holds none.
	p.Src.secured(p.Cred, p.Private)
	p.Dst.secured(p.Cred, p.Private)
	p.Src.data.modeE, p.Dst.data.modeE = true, true
	p.parallel, p.stripes, p.ready, p.used = parallel, stripes, true, false
	return nil
}

// takesLateParallelism reports whether the server, as a source, takes a
// parallelism given after PORT for its next transfer: one that grows its
// streams while a transfer runs (FEAT STREAMGROW) does. GCT fixes a data
// channel's parallelism at PORT: a later OPTS RETR applied only from the
// next PORT, so a pair set up for 4 streams and then asked for 1 sent its
// first transfer on 4.
func (c *Conn) takesLateParallelism() bool {
	_, ok := c.Feature("STREAMGROW")
	return ok
}

// retrOpts is the source's OPTS RETR: the parallelism (start, minimum,
// maximum), the striped layout, if any, and markers, which keep its
// control channel alive during long files.
func (p *Pair) retrOpts(parallel int) string {
	most, layout := parallel, ""
	if p.Striping != nil {
		layout = p.Striping.String()
	} else if !p.Reverse {
		most = max(parallel, p.MaxParallel)
	}
	return fmt.Sprintf("OPTS RETR Parallelism=%d,%d,%d;%sMarkers=5;", parallel, parallel, most, layout)
}

// portFor is the command that announces the passive side's reply rep to
// the active side (PORT, EPRT or, striped, SPOR), and the stripes it
// names (0 when not striped).
func (p *Pair) portFor(passive *Conn, rep gridftp.Reply) (cmd string, stripes int, err error) {
	if p.Striping == nil {
		ap, err := passive.passiveAddr(rep)
		if err != nil {
			return "", 0, err
		}
		return portCommand(ap), 0, nil
	}
	aps, err := passive.stripedAddrs(rep)
	if err != nil {
		return "", 0, err
	}
	return SPORCommand(aps), len(aps), nil
}

// Stripes is how many stripes the destination receives on: the
// addresses its SPAS gave; 0 unless the pair is set up striped.
func (p *Pair) Stripes() int {
	if !p.ready {
		return 0
	}
	return p.stripes
}

// Reset forgets the data channel setup: the next Setup sends PASV and
// PORT again (after a long pause, a passive side may have stopped
// listening).
func (p *Pair) Reset() { p.ready = false }

// Start sends the commands of one transfer to both sides without waiting.
func (p *Pair) Start(part Part) error {
	if !p.ready {
		return errors.New("client: pair not set up")
	}
	p.used = true
	for _, s := range []struct {
		c    *Conn
		spec string
	}{{p.Src, part.SrcStack}, {p.Dst, part.DstStack}} {
		if s.spec != "" {
			if err := s.c.sendStack(s.spec); err != nil {
				return err
			}
		}
	}
	if part.DstPartStor != "" {
		if err := p.Dst.Send("SITE PARTSTOR %s", part.DstPartStor); err != nil {
			return err
		}
		p.Dst.partStor = part.DstPartStor == "ON"
	}
	if !part.Have.Empty() {
		if err := p.Dst.Send("REST %s", part.Have.String()); err != nil {
			return err
		}
		if err := p.Src.Send("REST %s", part.Have.String()); err != nil {
			return err
		}
	}
	if len(part.Members) > 0 {
		if err := p.Src.write(membersCommands(part.Members)...); err != nil {
			return err
		}
	}
	var err error
	if part.Length >= 0 {
		err = p.Dst.Send("ESTO A %d %s", part.Offset, part.DstPath)
	} else {
		err = p.Dst.Send("STOR %s", part.DstPath)
	}
	if err != nil {
		return err
	}
	if part.Length >= 0 {
		return p.Src.Send("ERET P %d %d %s", part.Offset, part.Length, part.SrcPath)
	}
	return p.Src.Send("RETR %s", part.SrcPath)
}

// Markers receives what the destination reports while data moves: bytes
// of this transfer so far (112, added up over the stripes of a striped
// destination, each of which counts its own) and ranges written (111,
// each stripe its own: the union is what arrived); and what either side
// reports of the members of a many-file transfer (113).
type Markers struct {
	Bytes   func(total int64)
	Ranges  func(gridftp.Ranges)
	Members func(fromSrc bool, ms []gridftp.Member)
}

// Finish reads the replies of the oldest started transfer from both sides,
// concurrently, and returns the first failure. With restart ranges, the
// REST replies come first.
func (p *Pair) Finish(ctx context.Context, part Part, m Markers) error {
	var wg sync.WaitGroup
	var srcErr, dstErr error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The destination's markers prove the transfer alive; a source may say
	// nothing until it has sent the whole file (not every server sends RETR
	// markers), so its wait is bounded only once the destination is done.
	srcCtx, srcStop := context.WithCancel(ctx)
	defer srcStop()
	timeout := p.Src.Timeout
	p.Src.Timeout = 7 * 24 * time.Hour
	defer func() { p.Src.Timeout = timeout }()
	srcPre, dstPre := part.pre()
	stall := p.watch(cancel)
	defer stall.stop()
	read := func(ctx context.Context, c *Conn, pre int, onPrelim func(gridftp.Reply), errp *error, done func()) {
		defer wg.Done()
		for range pre {
			if _, err := c.Final(ctx, nil); err != nil {
				*errp = err // the transfer's replies stay unread: close the pair
				cancel()
				return
			}
		}
		if _, err := c.Final(ctx, onPrelim); err != nil {
			*errp = err
			cancel()
			return
		}
		done()
	}
	members := func(fromSrc bool, r gridftp.Reply) {
		if ms, err := gridftp.ParseMembers(r); err == nil && m.Members != nil {
			m.Members(fromSrc, ms)
		}
	}
	var srcBytes int64
	onSrc := func(r gridftp.Reply) {
		switch r.Code {
		case gridftp.CodePerfMarker:
			if pm, err := gridftp.ParsePerfMarker(r); err == nil {
				stall.marker(pm.Bytes > srcBytes)
				srcBytes = max(srcBytes, pm.Bytes)
			}
		case gridftp.CodeMembers:
			members(true, r)
		}
	}
	stripes := map[int]int64{} // bytes so far by stripe index
	var arrived gridftp.Ranges // the union of the range markers
	onDst := func(r gridftp.Reply) {
		switch r.Code {
		case gridftp.CodePerfMarker:
			if pm, err := gridftp.ParsePerfMarker(r); err == nil {
				stall.marker(pm.Bytes > stripes[pm.StripeIndex])
				stripes[pm.StripeIndex] = pm.Bytes
				var total int64
				for _, n := range stripes {
					total += n
				}
				if m.Bytes != nil {
					m.Bytes(total)
				}
			}
		case gridftp.CodeRestartMarker:
			if rs, err := gridftp.ParseRangeMarker(r); err == nil {
				was := arrived.Total()
				arrived.AddAll(rs)
				stall.marker(arrived.Total() > was)
				if m.Ranges != nil {
					m.Ranges(rs)
				}
			}
		case gridftp.CodeMembers:
			members(false, r)
		}
	}
	wg.Add(2)
	var grace *time.Timer
	go read(srcCtx, p.Src, srcPre, onSrc, &srcErr, func() {})
	go read(ctx, p.Dst, dstPre, onDst, &dstErr, func() { grace = time.AfterFunc(p.Dst.timeout(), srcStop) })
	wg.Wait()
	if grace != nil {
		grace.Stop()
	}
	switch {
	case srcErr == nil && dstErr == nil:
		return nil
	case stall.stalled():
		return &StallError{After: p.Stall}
	case srcErr != nil && !errors.Is(srcErr, context.Canceled):
		return &EndError{Err: srcErr}
	case dstErr != nil && !errors.Is(dstErr, context.Canceled):
		return &EndError{Dest: true, Err: dstErr}
	case srcErr != nil:
		return &EndError{Err: srcErr}
	}
	return &EndError{Dest: true, Err: dstErr}
}

// EndError is a failure at one end of a pair: the source's, or the
// destination's (Dest).
type EndError struct {
	Dest bool
	Err  error
}

func (e *EndError) Error() string {
	if e.Dest {
		return "destination: " + e.Err.Error()
	}
	return "source: " + e.Err.Error()
}

func (e *EndError) Unwrap() error { return e.Err }

// Close ends both sessions.
func (p *Pair) Close() {
	p.Src.Close()
	p.Dst.Close()
	p.ready = false
}
