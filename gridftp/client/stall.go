package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrStalled is the error of a transfer whose data stopped moving for
// Pair.Stall: a data path that drops packets silently (no reset) would
// otherwise hold it for as long as TCP keeps retrying, many minutes.
// Finish returns it as a *StallError.
var ErrStalled = errors.New("data channel stalled")

// StallError is a transfer that moved no data for After. It is a
// net.Error that timed out, as a silent connection's read would be.
type StallError struct{ After time.Duration }

func (e *StallError) Error() string {
	return fmt.Sprintf("%v: no data moved for %s", ErrStalled, e.After)
}

func (e *StallError) Is(target error) bool { return target == ErrStalled }

// Timeout reports true: the transfer waited too long for data.
func (e *StallError) Timeout() bool { return true }

// Temporary reports true: another try may find the path back.
func (e *StallError) Temporary() bool { return true }

// stallWatch ends a transfer (cancel) when no marker of it has shown
// progress for the Pair's Stall; a marker that repeats the last count is
// no progress. It is armed by the first marker that shows data moved: a
// server that sends no markers keeps only the reply timeout, and a source
// that takes long to give its first byte (a file staged from tape) is
// left to the servers' own data timeouts.
type stallWatch struct {
	after  time.Duration
	cancel context.CancelFunc
	mu     sync.Mutex
	timer  *time.Timer
	fired  bool
}

// watch starts the stall watch of one transfer; with no Stall it never fires.
func (p *Pair) watch(cancel context.CancelFunc) *stallWatch {
	return &stallWatch{after: p.Stall, cancel: cancel}
}

// marker notes a marker of the transfer, which moved the data on or not.
func (w *stallWatch) marker(moved bool) {
	if w.after <= 0 {
		return
	}
	if !moved {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.timer == nil:
		w.timer = time.AfterFunc(w.after, w.fire)
	case !w.fired:
		w.timer.Reset(w.after)
	}
}

func (w *stallWatch) fire() {
	w.mu.Lock()
	w.fired = true
	w.mu.Unlock()
	w.cancel()
}

// stalled reports whether the watch ended the transfer.
func (w *stallWatch) stalled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fired
}

// stop ends the watch.
func (w *stallWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
}
