package forward

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/gridftp/multicast"
	"ferry/gsi"
	"ferry/gsi/gsilogin"
	"ferry/internal/partname"
	"ferry/stack"
	"ferry/storage"
)

// Tuning of the forwarding sink.
const (
	BlockSize    = 1 << 20          // bytes of a block sent to a child
	QueueBlocks  = 16               // blocks waiting for one child at most
	AheadBlocks  = 32               // blocks held ahead of a gap, waiting for it
	SetupTimeout = 20 * time.Second // dial, login and stack of a child
	ReplyTimeout = 60 * time.Second // each reply wait of a child's connection
	// VerifyRate is the slowest a child is expected to read its copy back
	// for CKSM (bytes per second): the wait for its checksum grows with
	// the file at that rate.
	VerifyRate = 32 << 20
)

// ErrNotDelivered is in the error of a transfer that did not reach every
// destination.
var ErrNotDelivered = errors.New("forward: the file did not reach every destination")

// errCorrupt is a child's copy whose checksum is not the one of what was
// sent to it.
var errCorrupt = errors.New("the copy's checksum differs from what was sent")

// gmcToken starts GCT's failure report (GMC_ERROR_TOKEN): the lines after
// it are the destinations that failed. A ferry parent reads it from a GCT
// child's reply ("500-Command failed. : GMC_ERROR=", then a URL a line).
// A GCT parent cannot read a ferry child's report, nor a GCT child's, so
// no wording of ours would help: it looks in the child's error text for
// "GMC_ERROR=\n", which a reply never holds (its lines end in CRLF); past
// the token it would skip one character more than it (the bug recorded in
// reference/grid-extensions.md), and take the list only if every line to
// the end of the text parsed as an ftp or gsiftp URL, which a reply's last
// line ("451 End.") does not. It counts the child and its whole subtree
// as failed (interop: TestFerryMulticastGCTHeadFerryChildren).
const gmcToken = "GMC_ERROR="

// Kinds is the multicast layer under GCT's name and ferry's alias.
func Kinds() stack.Registry {
	return stack.Registry{multicast.Name: {Filter: newLayer}, multicast.Alias: {Filter: newLayer}}
}

type layer struct {
	o   multicast.Options
	env stack.Env
}

func newLayer(e stack.Entry, env stack.Env) (stack.Filter, error) {
	o, err := multicast.ParseOptions(e)
	if err != nil {
		return nil, err
	}
	if env.ReadOnly {
		return nil, stack.Refuse(fmt.Sprintf("%s: the session may not write.", e.Name))
	}
	if env.Dial == nil && len(o.URLs) > 0 {
		return nil, stack.Refuse(fmt.Sprintf("%s: this server connects to no other host.", e.Name))
	}
	for _, u := range o.URLs {
		if h, _ := multicast.ParseHop(u); h.URL.GSI() && env.Grid == nil {
			return nil, stack.Refuse(fmt.Sprintf("%s: %s: gsiftp:// needs a GSI login that delegated a credential.", e.Name, multicast.Show(u)))
		}
	}
	return layer{o: o, env: env}, nil
}

// WrapSource passes reads through: the layer only forwards writes.
func (l layer) WrapSource(_ context.Context, _ *stack.Transfer, below stack.Source) (stack.Source, error) {
	return below, nil
}

// WrapSink is DeferSink over a layer below that is already open; with
// local_write off it is closed unused. (stack.Stack opens through
// DeferSink, and so never opens the layer below of a relay-only hop.)
func (l layer) WrapSink(ctx context.Context, t *stack.Transfer, below stack.Sink) (stack.Sink, error) {
	opened := false
	s, err := l.DeferSink(ctx, t, func() (stack.Sink, error) { opened = true; return below, nil })
	if !opened {
		below.Close()
	}
	return s, err
}

// DeferSink opens the layer below when this hop writes locally, starts a
// child per planned destination, and returns the sink that writes below
// and forwards. A hop with no destinations below it is the layer below
// alone. With local_write off the layer below is never opened: a file of
// that name, if there is one, stays as it was.
func (l layer) DeferSink(ctx context.Context, t *stack.Transfer, open func() (stack.Sink, error)) (stack.Sink, error) {
	if t.Flag&storage.Keep != 0 && len(l.o.URLs) > 0 {
		return nil, fmt.Errorf("%s: %w", multicast.Name, stack.ErrNotSeekable) // children get a plain STOR
	}
	plans := multicast.Plan(l.o.URLs, l.o.CC)
	release, err := l.reserve(len(plans))
	if err != nil {
		return nil, err
	}
	var below stack.Sink
	if l.o.LocalWrite {
		if below, err = open(); err != nil {
			release()
			return nil, err
		}
		if len(l.o.URLs) == 0 {
			return below, nil
		}
		below = stack.InOrder(below)
	}
	log := l.env.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &sink{
		below:   below,
		blocks:  newBlocks(),
		md5:     md5.New(),
		ahead:   map[int64]*shared{},
		aborted: make(chan struct{}),
		eof:     make(chan struct{}),
		log:     log,
		release: release,
	}
	if below != nil {
		s.w = below.(io.WriterAt)
		_, s.osFile = below.(*os.File)
	}
	s.room.L = &s.mu
	s.gone = ctx.Done()
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, c := range plans {
		h, _ := multicast.ParseHop(c.URL) // checked by ParseOptions
		k := &kid{plan: c, hop: h, part: l.o.Part && h.Own.LocalWrite, p: l.o.P, blocks: s.blocks, q: make(chan *shared, QueueBlocks), dial: l.env.Dial, grid: l.env.Grid,
			dead: make(chan struct{}), done: make(chan struct{}), eof: s.eof, aborted: s.aborted, sent: &s.sent, log: log}
		s.kids = append(s.kids, k)
		go k.run(ctx)
	}
	return s, nil
}

// reserve counts a transfer's children and their data streams against the
// server's limits (stack.Env.Reserve); the release it returns is safe to
// call more than once.
func (l layer) reserve(children int) (release func(), err error) {
	if l.env.Reserve == nil || children == 0 {
		return func() {}, nil
	}
	return l.env.Reserve(children, children*l.o.P)
}

// sink writes each block below as it comes, and passes the blocks on to
// the children in order, hashing them (MD5) on the way: each child gets
// its blocks in increasing offsets, on each of its streams, so that every
// hop below can put them in order with a bounded window as this one does,
// and each is asked at the end for the MD5 of what it stored.
type sink struct {
	below  stack.Sink  // nil without local_write
	w      io.WriterAt // below
	osFile bool        // below is the file itself, as the POSIX driver opens it
	kids   []*kid
	blocks *blocks
	log    *slog.Logger

	// The sequence: blocks in order, for the children and the hash.
	mu    sync.Mutex
	room  sync.Cond         // a writer waits here for room ahead of a gap
	next  int64             // offset of the next block in order
	ahead map[int64]*shared // blocks past next, waiting for it
	busy  bool              // a writer is passing blocks on; it takes those that come meanwhile
	run   []*shared         // the blocks the busy writer passes on
	err   error             // set: the sequence is broken or over
	md5   hash.Hash         // of the blocks passed on
	sent  sent              // what the children were sent: set before eof closes

	cancel    context.CancelFunc
	gone      <-chan struct{} // the transfer's context is done: ABOR, or the session's end
	release   func()          // gives back what the children took of the server's limits
	eof       chan struct{}   // closed by Close: no more blocks
	aborted   chan struct{}
	abortOnce sync.Once
	endOnce   sync.Once
}

// sent is the MD5 (hex) and size of the whole stream sent to the
// children, known once the sink is closed.
type sent struct {
	sum  string
	size int64
}

// blocks hands out blocks for the children from pooled buffers.
type blocks struct {
	bufs *gridftp.BufferPool // shared with the children's connections
	free sync.Pool           // of *shared
}

func newBlocks() *blocks { return &blocks{bufs: gridftp.NewBufferPool(BlockSize)} }

// get copies p, at most BlockSize bytes, into a block with refs holders.
func (bl *blocks) get(p []byte, off int64, refs int) *shared {
	b, _ := bl.free.Get().(*shared)
	if b == nil {
		b = new(shared)
	}
	b.buf, b.off, b.n = bl.bufs.Get(), off, len(p)
	copy((*b.buf)[gridftp.HeaderLen:], p)
	b.refs.Store(int32(refs))
	return b
}

// release drops one holder of b; the last gives it back.
func (bl *blocks) release(b *shared) {
	if b.refs.Add(-1) == 0 {
		bl.bufs.Put(b.buf)
		b.buf = nil
		bl.free.Put(b)
	}
}

// shared is one copy of a block, for every child; the last holder done
// with it gives the buffer back.
type shared struct {
	buf  *[]byte
	off  int64
	n    int
	refs atomic.Int32
}

func (b *shared) data() []byte { return (*b.buf)[gridftp.HeaderLen : gridftp.HeaderLen+b.n] }

// WriteAt writes p below, then hands it to the sequence in pieces of
// BlockSize. It waits while AheadBlocks blocks wait for a gap before p, or
// while a live child's queue is full.
func (s *sink) WriteAt(p []byte, off int64) (int, error) {
	if s.w != nil {
		if n, err := s.w.WriteAt(p, off); err != nil {
			return n, err
		}
	}
	for rest, at := p, off; len(rest) > 0; {
		n := min(len(rest), BlockSize)
		if err := s.sequence(s.blocks.get(rest[:n], at, 1)); err != nil {
			return 0, err
		}
		rest, at = rest[n:], at+int64(n)
	}
	return len(p), nil
}

// sequence takes b into the sequence: the writer that brings the next
// block passes it on, with every block it makes contiguous; a block past a
// gap waits in ahead, or its writer waits for room there.
func (s *sink) sequence(b *shared) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		switch {
		case s.err != nil:
			s.blocks.release(b)
			return s.err
		case b.off < s.next || s.ahead[b.off] != nil:
			s.blocks.release(b)
			s.err = fmt.Errorf("forward: the block at %d overlaps another", b.off)
			s.room.Broadcast()
			return s.err
		case b.off == s.next && !s.busy:
			s.passOn(b)
			return s.err
		case b.off == s.next || len(s.ahead) < AheadBlocks:
			s.ahead[b.off] = b
			return nil
		}
		s.room.Wait()
	}
}

// passOn hashes b, queues it for the children and does the same for every
// block that follows it in ahead, until none does. Under mu, which it
// leaves while it works; other writers meanwhile add to ahead.
func (s *sink) passOn(b *shared) {
	s.busy = true
	run := append(s.run[:0], b)
	s.next = b.off + int64(b.n)
	for len(run) > 0 {
		for x := s.ahead[s.next]; x != nil; x = s.ahead[s.next] {
			delete(s.ahead, s.next)
			run = append(run, x)
			s.next += int64(x.n)
		}
		s.room.Broadcast()
		s.mu.Unlock()
		for _, x := range run {
			s.forward(x)
			s.md5.Write(x.data())
			s.blocks.release(x)
		}
		s.mu.Lock()
		run = run[:0]
		if x := s.ahead[s.next]; x != nil && s.err == nil {
			delete(s.ahead, s.next)
			run = append(run, x)
			s.next += int64(x.n)
		}
	}
	s.run, s.busy = run, false
	s.room.Broadcast()
}

// forward queues b for every live child.
func (s *sink) forward(b *shared) {
	b.refs.Add(int32(len(s.kids)))
	for _, k := range s.kids {
		select {
		case k.q <- b:
		case <-k.dead:
			s.blocks.release(b)
		case <-s.aborted:
			s.blocks.release(b)
		}
	}
}

// Close ends the sequence and every child's transfer, waits for their
// replies and checksums, closes below, and says which destinations failed.
func (s *sink) Close() error {
	var err error
	s.endOnce.Do(func() {
		s.mu.Lock()
		for s.busy {
			s.room.Wait()
		}
		if s.err == nil && len(s.ahead) > 0 {
			err = fmt.Errorf("forward: the data has a gap at %d", s.next)
		}
		if s.err == nil {
			s.err = errors.New("forward: closed")
		}
		for off, b := range s.ahead {
			delete(s.ahead, off)
			s.blocks.release(b)
		}
		s.sent = sent{sum: hex.EncodeToString(s.md5.Sum(nil)), size: s.next}
		s.room.Broadcast()
		s.mu.Unlock()
		if err != nil {
			// What the children have is a prefix: they must not keep it
			// as the file.
			for _, k := range s.kids {
				k.abort()
			}
		}
		close(s.eof)
		// Each child's reply, until the deadline or the transfer's end
		// (ABOR, or the session's: the server stops), after which the
		// children still at work are dropped.
		deadline := time.NewTimer(s.wait())
		defer deadline.Stop()
		var stop error
		for _, k := range s.kids {
			if stop == nil {
				select {
				case <-k.done:
				case <-deadline.C:
					stop = errors.New("no reply in time")
				case <-s.gone:
					stop = errors.New("the transfer ended")
				}
			}
			select {
			case <-k.done:
			default:
				k.fail(stop)
				k.abort()
				<-k.done
			}
		}
		s.cancel()
		s.release()
		if s.below != nil {
			if cerr := stack.End(s.below, err); err == nil {
				err = cerr
			}
		}
	})
	if err != nil {
		return err
	}
	return s.report()
}

// wait bounds how long Close waits for the children after the last block:
// a child's reply comes after its own subtree has stored and checked the
// file, one level after the other, so the bound grows with the subtree.
func (s *sink) wait() time.Duration {
	most := 0
	for _, k := range s.kids {
		most = max(most, len(k.plan.Sub)+1)
	}
	return ReplyTimeout + time.Duration(most)*verifyTimeout(s.sent.size) + time.Second
}

// verifyTimeout is how long a child is given to answer CKSM for a file
// of size bytes.
func verifyTimeout(size int64) time.Duration {
	return ReplyTimeout + time.Duration(size/VerifyRate)*time.Second
}

// Sum is the MD5 of the stream, when it went to a local file the POSIX
// driver opened: then it is the MD5 of that file, as the server takes the
// hash of the blocks it writes to such a file for the file's (a ferry hop
// then answers its parent's CKSM without reading its copy again). Through
// any other storage the server reads the file back to hash it.
func (s *sink) Sum(alg string) (string, int64, bool) {
	if !strings.EqualFold(alg, "MD5") || !s.osFile {
		return "", 0, false
	}
	select {
	case <-s.eof:
		return s.sent.sum, s.sent.size, true
	default:
		return "", 0, false
	}
}

// Abort ends the sequence, the children's transfers and the layer below.
func (s *sink) Abort(cause error) {
	s.abortOnce.Do(func() {
		s.mu.Lock()
		if s.err == nil {
			s.err = fmt.Errorf("forward: aborted: %w", cause)
		}
		s.room.Broadcast()
		s.mu.Unlock()
		close(s.aborted)
		s.cancel()
		for _, k := range s.kids {
			k.abort()
		}
		go s.releaseWhenDone()
	})
	if a, ok := s.below.(stack.Aborter); ok {
		a.Abort(cause)
	}
}

// releaseWhenDone gives back what the children took of the server's
// limits once their connections are closed.
func (s *sink) releaseWhenDone() {
	for _, k := range s.kids {
		<-k.done
	}
	s.release()
}

// report is a ShownError naming the destinations that did not get a good
// copy, nil when all did. The children's own errors go to the log only, so
// that the reply's error class is the same whichever way a child failed.
func (s *sink) report() error {
	var failed []string
	for _, k := range s.kids {
		if names, err := k.failed(); err != nil {
			s.log.Info("forward: child failed", "url", multicast.Show(k.plan.URL), "err", err)
			failed = append(failed, names...)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return &stack.ShownError{Text: multicast.Report(failed), Err: ErrNotDelivered}
}

// kid is one direct child: its connection, its queue, how it fared.
type kid struct {
	plan    multicast.Child
	hop     multicast.Hop
	part    bool                  // it writes under its temporary name, renamed once checked (multicast.Options.Part)
	dial    client.DialFunc       // the session's, under the server's target policy: control and data
	grid    *stack.GridCredential // for gsiftp:// children
	p       int
	blocks  *blocks
	q       chan *shared
	eof     <-chan struct{}
	aborted <-chan struct{}
	sent    *sent // read once eof is closed
	log     *slog.Logger

	mu    sync.Mutex
	conn  *client.Conn
	err   error
	named []string      // the destinations that failed, when err is not the whole subtree's
	dead  chan struct{} // closed once err is set
	done  chan struct{} // closed when run returns
}

// run sends the child everything queued for it until EOF, then checks
// its copy.
func (k *kid) run(ctx context.Context) {
	defer close(k.done)
	named, err := k.transfer(ctx)
	if err != nil {
		k.mu.Lock()
		if k.err == nil {
			k.err, k.named = err, named
			close(k.dead)
		}
		k.mu.Unlock()
	}
	k.mu.Lock()
	if k.conn != nil {
		k.conn.Close()
	}
	k.mu.Unlock()
}

// transfer stores the file on the child and checks the child's copy. On
// failure, named lists the failed destinations when they are not the
// whole subtree: those the child's report names, and the child itself
// when its copy is not what was sent.
func (k *kid) transfer(ctx context.Context) (named []string, err error) {
	sctx, cancel := context.WithTimeout(ctx, SetupTimeout)
	defer cancel()
	c, err := client.DialWith(sctx, k.dial, k.hop.URL.Addr())
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.conn = c
	gone := k.err != nil
	k.mu.Unlock()
	if gone {
		return nil, k.err
	}
	c.Timeout = ReplyTimeout
	if err := k.login(sctx, c); err != nil {
		return nil, err
	}
	if err := k.setup(sctx, c); err != nil {
		return nil, err
	}
	c.SetOptions(client.Options{Parallel: k.p, BlockSize: BlockSize, Pool: k.blocks.bufs, Dial: k.dialData})
	_, err = c.PutFunc(ctx, k.path(), k.next)
	if err != nil {
		if named = reported(err, k.plan.Sub); named == nil {
			return nil, err // the child's own copy failed, or it said nothing of its subtree
		}
	}
	if k.hop.Own.LocalWrite {
		if verr := k.verify(ctx, c); verr != nil {
			return append([]string{multicast.Show(k.plan.URL)}, named...), verr
		}
	}
	if k.part {
		if rerr := c.Rename(ctx, k.path(), k.hop.URL.Path); rerr != nil {
			return append([]string{multicast.Show(k.plan.URL)}, named...), fmt.Errorf("rename from its temporary name: %w", rerr)
		}
	}
	return named, err
}

// path is where the child writes its copy: its temporary name with Part,
// else its name.
func (k *kid) path() string {
	if k.part {
		return partname.For(k.hop.URL.Path)
	}
	return k.hop.URL.Path
}

// dialData opens a data stream to where the child's PASV answer points,
// under the same policy as its control connection (a hostile child may
// point anywhere). A stream that cannot be opened drops the child at
// once, with why, instead of holding the transfer back while the child
// waits for it.
func (k *kid) dialData(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := k.dial(ctx, network, addr)
	if err != nil {
		k.fail(fmt.Errorf("data connection to %s: %w", addr, err))
		k.abort()
	}
	return c, err
}

// login logs the child in: a gsiftp:// one with the session's delegated
// credential (delegating it on), as the URL's user or the child's
// grid-mapfile's; an ftp:// one with the URL's user and password, or
// anonymously.
func (k *kid) login(ctx context.Context, c *client.Conn) error {
	user := k.hop.URL.User.Username()
	if k.hop.URL.GSI() {
		cred := &gsi.Credential{Chain: k.grid.Chain, Key: k.grid.Key}
		return gsilogin.Verified(cred, k.grid.Verify, k.hop.URL.Host, user).Authenticate(ctx, c)
	}
	pass, ok := k.hop.URL.User.Password()
	if !ok {
		pass = "ferry@"
	}
	if user == "" {
		user = "anonymous"
	}
	return c.Login(ctx, user, pass)
}

// setup sets the child's stack and, for a child that writes its own
// copy, has it hash what it stores while it stores it (a ferry child,
// FEAT CKSMLIVE) and makes sure the file's directory is there: one round
// trip, and one more to make the directory when it is missing.
//
// The directory is made before the STOR rather than after a STOR refused
// for want of it: PutFunc sends STOR and at once connects the data streams
// and takes blocks from the queue, and the refusal can come after some
// were sent. Those blocks are gone, and the STOR could not be tried again.
func (k *kid) setup(ctx context.Context, c *client.Conn) error {
	var cmds []string
	dir := path.Dir(k.hop.URL.Path)
	probe := k.hop.Own.LocalWrite && dir != "/" && dir != "."
	if k.hop.Own.LocalWrite {
		if _, ok := c.Feature("CKSMLIVE"); ok {
			cmds = append(cmds, "OPTS CKSM Live=MD5;")
		}
	}
	if probe {
		cmds = append(cmds, "MLST "+dir)
	}
	_, errs, err := c.SetDiskStackThen(ctx, k.plan.Stack(), cmds)
	if err != nil {
		return err
	}
	if probe && errs[len(errs)-1] != nil {
		// Each parent in turn, from the top: those that exist are
		// refused, which does not matter; the STOR says whether the last
		// one is there.
		var mkd []string
		for d := dir; d != "/" && d != "."; d = path.Dir(d) {
			mkd = append(mkd, "MKD "+d)
		}
		slices.Reverse(mkd)
		if _, _, err := c.DoAll(ctx, mkd); err != nil {
			return err
		}
	}
	return nil
}

// verify asks the child for the MD5 of its copy and compares it with the
// MD5 of what was sent.
func (k *kid) verify(ctx context.Context, c *client.Conn) error {
	select {
	case <-k.eof: // k.sent is set
	case <-k.aborted:
		return errors.New("forward: aborted")
	case <-ctx.Done():
		return ctx.Err()
	}
	c.Timeout = verifyTimeout(k.sent.size)
	got, err := c.Checksum(ctx, "MD5", k.path(), 0, -1)
	if err != nil {
		return fmt.Errorf("CKSM: %w", err)
	}
	if got != k.sent.sum {
		return fmt.Errorf("%w: MD5 %s, sent %s (%d bytes)", errCorrupt, got, k.sent.sum, k.sent.size)
	}
	return nil
}

// next hands a data stream the next queued block; io.EOF once the sink is
// closed and the queue empty.
func (k *kid) next(ctx context.Context, payload []byte) (int64, int, error) {
	var b *shared
	select {
	case b = <-k.q:
	case <-k.eof:
		select {
		case b = <-k.q:
		default:
			return 0, 0, io.EOF
		}
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-k.aborted:
		return 0, 0, errors.New("forward: aborted")
	}
	n := copy(payload, b.data())
	off := b.off
	k.blocks.release(b)
	return off, n, nil
}

// fail records the child's first failure, of its whole subtree, and stops
// queueing for it.
func (k *kid) fail(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil {
		k.err = err
		close(k.dead)
	}
}

// abort closes the child's connection, which ends its transfer.
func (k *kid) abort() {
	k.fail(errors.New("aborted"))
	k.mu.Lock()
	if k.conn != nil {
		k.conn.Close()
	}
	k.mu.Unlock()
}

// failed names the destinations the child did not deliver a good copy
// to, with why: those it found out, else itself and its whole subtree.
func (k *kid) failed() ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil {
		return nil, nil
	}
	if k.named != nil {
		return k.named, k.err
	}
	all := []string{multicast.Show(k.plan.URL)}
	for _, u := range k.plan.Sub {
		all = append(all, multicast.Show(u))
	}
	return all, k.err
}

// reported reads the failure report in a child's reply (ferry's, or GCT's
// GMC_ERROR list): the destinations of sub it names; nil when there is no
// report, or it names none of them, or anything else (the child's own
// file, which means the child itself failed).
func reported(err error, sub []string) []string {
	var ge *gridftp.Error
	if !errors.As(err, &ge) {
		return nil
	}
	ours := make([]string, len(sub))
	for i, u := range sub {
		ours[i] = multicast.Show(u)
	}
	var named []string
	in := false
	for _, l := range ge.Reply.Lines {
		l = strings.TrimSpace(l)
		if !in {
			in = strings.HasPrefix(l, multicast.Marker) || strings.Contains(l, gmcToken)
			continue
		}
		if l == "" || l == "End." {
			continue
		}
		u := multicast.Show(l)
		if !slices.Contains(ours, u) {
			return nil
		}
		if !slices.Contains(named, u) {
			named = append(named, u)
		}
	}
	return named
}
