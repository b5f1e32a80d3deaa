package stack

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// The ordering layer puts MODE E blocks, which parallel streams deliver
// in any order, in order for the layer below, which can only be written
// from start to end. A block that comes early is copied and kept, up to
// OrderingWindow bytes; past that, the writer that brought it waits for the
// blocks before it (senders send each stream's blocks in increasing
// offsets, so the stream holding the next block never waits, and TCP holds
// the others back). A sender that sends each stream backwards past the
// window stalls, and the receiver's data timeout ends the transfer.

// OrderingWindow is how many bytes of early blocks one transfer keeps.
const OrderingWindow = 16 << 20

type ordering struct{}

func newOrdering(e Entry, _ Env) (Filter, error) {
	if len(e.Opts) > 0 {
		return nil, Refuse(fmt.Sprintf("%s takes no options.", e.Name))
	}
	return ordering{}, nil
}

func (ordering) WrapSink(_ context.Context, _ *Transfer, below Sink) (Sink, error) {
	return InOrder(below), nil
}

func (ordering) WrapSource(_ context.Context, _ *Transfer, below Source) (Source, error) {
	return below, nil
}

// InOrder returns s as an io.WriterAt: s itself when it is one, else a
// writer that passes blocks to s in order.
func InOrder(s Sink) Sink {
	if _, ok := s.(io.WriterAt); ok {
		return s
	}
	o := &Ordered{below: s, w: s.(io.Writer), early: map[int64][]byte{}, window: OrderingWindow}
	o.turn = sync.NewCond(&o.mu)
	return o
}

// Ordered is a sequential Sink made an io.WriterAt.
type Ordered struct {
	below  Sink
	w      io.Writer
	window int

	mu    sync.Mutex
	turn  *sync.Cond
	next  int64            // offset the next write to w starts at
	early map[int64][]byte // blocks past next, copied
	held  int              // bytes in early
	spare [][]byte         // buffers of blocks written out, for reuse
	err   error            // ends every write, once set
}

// WriteAt writes p at off: now if off is next, else once the blocks
// before it are written.
func (o *Ordered) WriteAt(p []byte, off int64) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for {
		switch {
		case o.err != nil:
			return 0, o.err
		case off < o.next:
			return 0, fmt.Errorf("ordering: block at %d overlaps what was written up to %d", off, o.next)
		case off == o.next:
			if err := o.write(p); err != nil {
				return 0, err
			}
			for o.err == nil {
				b, ok := o.early[o.next]
				if !ok {
					break
				}
				delete(o.early, o.next)
				o.held -= len(b)
				o.write(b)
				o.spare = append(o.spare, b[:0])
			}
			o.turn.Broadcast()
			return len(p), o.err
		case o.early[off] != nil:
			return 0, fmt.Errorf("ordering: block at %d came twice", off)
		case o.held+len(p) <= o.window:
			o.early[off] = append(o.buffer(len(p)), p...)
			o.held += len(p)
			return len(p), nil
		}
		o.turn.Wait()
	}
}

// write passes p to the layer below; under mu.
func (o *Ordered) write(p []byte) error {
	n, err := o.w.Write(p)
	o.next += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		o.err = err
	}
	return err
}

// buffer returns an empty buffer for n bytes, reused if one is spare.
func (o *Ordered) buffer(n int) []byte {
	for i, b := range o.spare {
		if cap(b) >= n {
			o.spare = append(o.spare[:i], o.spare[i+1:]...)
			return b
		}
	}
	return make([]byte, 0, n)
}

// Write writes p after what was written.
func (o *Ordered) Write(p []byte) (int, error) {
	o.mu.Lock()
	next := o.next
	o.mu.Unlock()
	return o.WriteAt(p, next)
}

// Abort wakes the writers that wait, with cause, and aborts the layer
// below.
func (o *Ordered) Abort(cause error) {
	o.mu.Lock()
	if o.err == nil {
		o.err = cause
	}
	o.turn.Broadcast()
	o.mu.Unlock()
	if a, ok := o.below.(Aborter); ok {
		a.Abort(cause)
	}
}

// Close closes the layer below, or fails if blocks past a gap are held:
// some of the data never came.
func (o *Ordered) Close() error {
	o.mu.Lock()
	gap := len(o.early) > 0 && o.err == nil
	if o.err == nil {
		o.err = fmt.Errorf("ordering: closed")
	}
	o.turn.Broadcast()
	next := o.next
	o.mu.Unlock()
	if gap {
		err := fmt.Errorf("ordering: the data has a gap at %d", next)
		if a, ok := o.below.(Aborter); ok {
			a.Abort(err)
		}
		o.below.Close()
		return err
	}
	return o.below.Close()
}
