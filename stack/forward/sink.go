package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/stack"
	"ferry/storage"
)

// Tuning of the forwarding sink.
const (
	BlockSize    = 1 << 20          // bytes of a block sent to a child
	QueueBlocks  = 16               // blocks waiting for one child at most
	SetupTimeout = 20 * time.Second // dial, login and stack of a child
	ReplyTimeout = 60 * time.Second // a child's final reply after EOF; each reply wait
)

// ErrNotDelivered is in the error of a transfer that did not reach every
// destination.
var ErrNotDelivered = errors.New("forward: the file did not reach every destination")

// marker starts the lines of a failure report, which a parent reads from
// its child's reply to learn which of that child's destinations failed.
const marker = "Multicast: the file did not reach "

// Kinds is the multicast layer under GCT's name and ferry's alias.
func Kinds() stack.Registry {
	return stack.Registry{Name: {Filter: newLayer}, Alias: {Filter: newLayer}}
}

type layer struct {
	o   Options
	env stack.Env
}

func newLayer(e stack.Entry, env stack.Env) (stack.Filter, error) {
	o, err := ParseOptions(e)
	if err != nil {
		return nil, err
	}
	if env.ReadOnly {
		return nil, stack.Refuse(fmt.Sprintf("%s: the session may not write.", e.Name))
	}
	if env.Dial == nil && len(o.URLs) > 0 {
		return nil, stack.Refuse(fmt.Sprintf("%s: this server connects to no other host.", e.Name))
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
// child per planned destination and returns the sink that writes below
// and forwards. With local_write off the layer below is never opened: a
// file of that name, if there is one, stays as it was.
func (l layer) DeferSink(ctx context.Context, t *stack.Transfer, open func() (stack.Sink, error)) (stack.Sink, error) {
	if t.Flag&storage.Keep != 0 && len(l.o.URLs) > 0 {
		return nil, fmt.Errorf("%s: %w", Name, stack.ErrNotSeekable) // children get a plain STOR
	}
	log := l.env.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &sink{pool: gridftp.NewBufferPool(BlockSize), aborted: make(chan struct{}), eof: make(chan struct{}), log: log}
	if l.o.LocalWrite {
		below, err := open()
		if err != nil {
			return nil, err
		}
		below = stack.InOrder(below)
		s.below, s.w = below, below.(io.WriterAt)
	}
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, c := range plan(l.o.URLs, l.o.CC) {
		h, _ := parseHop(c.URL) // checked by ParseOptions
		k := &kid{plan: c, hop: h, p: l.o.P, pool: s.pool, q: make(chan *shared, QueueBlocks), dial: l.env.Dial,
			dead: make(chan struct{}), done: make(chan struct{}), eof: s.eof, aborted: s.aborted, log: log}
		s.kids = append(s.kids, k)
		go k.run(ctx)
	}
	return s, nil
}

// sink writes each block below and queues it for every live child.
type sink struct {
	below stack.Sink  // nil without local_write
	w     io.WriterAt // below
	kids  []*kid
	pool  *gridftp.BufferPool
	log   *slog.Logger

	cancel    context.CancelFunc
	eof       chan struct{} // closed by Close: no more blocks
	aborted   chan struct{}
	abortOnce sync.Once
	endOnce   sync.Once
}

// shared is one copy of a block, for every child; the last child done
// with it gives the buffer back.
type shared struct {
	buf  *[]byte
	off  int64
	n    int
	refs atomic.Int32
}

func (b *shared) release(pool *gridftp.BufferPool) {
	if b.refs.Add(-1) == 0 {
		pool.Put(b.buf)
	}
}

// WriteAt queues p for the children, in pieces of BlockSize, then writes
// it below. It waits while a live child's queue is full.
func (s *sink) WriteAt(p []byte, off int64) (int, error) {
	for rest, at := p, off; len(rest) > 0 && len(s.kids) > 0; {
		n := min(len(rest), BlockSize)
		b := &shared{buf: s.pool.Get(), off: at, n: n}
		copy((*b.buf)[gridftp.HeaderLen:], rest[:n])
		b.refs.Store(int32(len(s.kids)) + 1)
		for _, k := range s.kids {
			select {
			case k.q <- b:
			case <-k.dead:
				b.release(s.pool)
			case <-s.aborted:
				b.release(s.pool)
			}
		}
		b.release(s.pool)
		rest, at = rest[n:], at+int64(n)
	}
	select {
	case <-s.aborted:
		return 0, errors.New("forward: aborted")
	default:
	}
	if s.w == nil {
		return len(p), nil
	}
	return s.w.WriteAt(p, off)
}

// Close ends every child's transfer, waits for their replies (each within
// ReplyTimeout), closes below, and says which destinations failed.
func (s *sink) Close() error {
	var belowErr error
	s.endOnce.Do(func() {
		close(s.eof)
		deadline := time.NewTimer(ReplyTimeout + time.Second)
		defer deadline.Stop()
		for _, k := range s.kids {
			select {
			case <-k.done:
			case <-deadline.C:
				k.fail(errors.New("no reply in time"))
				k.abort()
				<-k.done
			}
		}
		s.cancel()
		if s.below != nil {
			belowErr = s.below.Close()
		}
	})
	if belowErr != nil {
		return belowErr
	}
	return s.report()
}

// Abort ends the children's transfers and the layer below.
func (s *sink) Abort(cause error) {
	s.abortOnce.Do(func() {
		close(s.aborted)
		s.cancel()
		for _, k := range s.kids {
			k.abort()
		}
	})
	if a, ok := s.below.(stack.Aborter); ok {
		a.Abort(cause)
	}
}

// report is a ShownError naming the destinations that did not get the
// file, nil when all did. The children's own errors go to the log only, so
// that the reply's error class is the same whichever way a child failed.
func (s *sink) report() error {
	var failed []string
	for _, k := range s.kids {
		if err := k.error(); err != nil {
			s.log.Info("forward: child failed", "url", Show(k.plan.URL), "err", err)
			failed = append(failed, k.failed(err)...)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	lines := []string{fmt.Sprintf("%s%d of its destinations:", marker, len(failed))}
	lines = append(lines, failed...)
	return &stack.ShownError{Text: strings.Join(lines, "\n"), Err: ErrNotDelivered}
}

// kid is one direct child: its connection, its queue, how it fared.
type kid struct {
	plan    child
	hop     hop
	dial    client.DialFunc // the session's, under the server's target policy
	p       int
	pool    *gridftp.BufferPool
	q       chan *shared
	eof     <-chan struct{}
	aborted <-chan struct{}
	log     *slog.Logger

	mu   sync.Mutex
	conn *client.Conn
	err  error
	dead chan struct{} // closed once err is set
	done chan struct{} // closed when run returns
}

// run sends the child everything queued for it until EOF.
func (k *kid) run(ctx context.Context) {
	defer close(k.done)
	if err := k.transfer(ctx); err != nil {
		k.fail(err)
	}
	k.mu.Lock()
	if k.conn != nil {
		k.conn.Close()
	}
	k.mu.Unlock()
}

func (k *kid) transfer(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, SetupTimeout)
	defer cancel()
	c, err := client.DialWith(sctx, k.dial, k.hop.addr())
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.conn = c
	gone := k.err != nil
	k.mu.Unlock()
	if gone {
		return k.err
	}
	c.Timeout = ReplyTimeout
	user, pass := "anonymous", "ferry@"
	if u := k.hop.URL.User; u != nil {
		user = u.Username()
		if p, ok := u.Password(); ok {
			pass = p
		}
	}
	if err := c.Login(sctx, user, pass); err != nil {
		return err
	}
	if err := c.SetDiskStack(sctx, childStack(k.plan)); err != nil {
		return err
	}
	c.SetOptions(client.Options{Parallel: k.p, BlockSize: BlockSize, Pool: k.pool})
	_, err = c.PutFunc(ctx, k.hop.URL.Path, k.next)
	return err
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
	n := copy(payload, (*b.buf)[gridftp.HeaderLen:gridftp.HeaderLen+b.n])
	off := b.off
	b.release(k.pool)
	return off, n, nil
}

// fail records the child's first failure and stops queueing for it.
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

func (k *kid) error() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// failed names the destinations a failed child did not deliver to: the
// ones its own report names, when it sent one (it stored the file and only
// some of its subtree failed), else itself and its whole subtree.
func (k *kid) failed(err error) []string {
	all := []string{Show(k.plan.URL)}
	for _, u := range k.plan.Sub {
		all = append(all, Show(u))
	}
	var ge *gridftp.Error
	if !errors.As(err, &ge) {
		return all
	}
	reported := false
	var named []string
	for _, l := range ge.Reply.Lines {
		l = strings.TrimSpace(l)
		if _, rest, ok := strings.Cut(l, "-"); ok && len(l) > 4 && l[3] == '-' {
			l = rest
		}
		if strings.HasPrefix(l, marker) {
			reported = true
		}
		if slices.Contains(all[1:], l) && !slices.Contains(named, l) {
			named = append(named, l)
		}
	}
	if !reported || len(named) == 0 {
		return all
	}
	return named
}
