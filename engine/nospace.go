package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"ferry/gridftp"
)

// ErrNoSpace is the error (errors.Is) of a copy that stopped because the
// destination is full or over its quota: nothing more can move until
// someone frees space, so the copy stops at once, removes the partial files
// it left, and says so instead of retrying every file.
var ErrNoSpace = errors.New("the destination has no space left")

// filled stops the copy for err, a destination's NO_SPACE reply.
func (c *copier) filled(err error) {
	c.mu.Lock()
	if c.noSpace == nil {
		c.noSpace = fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	c.mu.Unlock()
	c.stop()
}

// full is the error of a copy stopped by a full destination, or nil.
func (c *copier) full() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.noSpace
}

// touch marks f as started at the destination.
func (c *copier) touch(f *file) {
	c.mu.Lock()
	f.touched = true
	c.keep(f) // ended meanwhile (canceled)
	c.mu.Unlock()
}

// keep keeps, once, an ended file that failed or was canceled and may
// have left a temporary file, for settleTemps; the files that moved are
// not kept. Called with c.mu held.
func (c *copier) keep(f *file) {
	if f.kept || !f.ended || f.tmp == "" || f.outcome != Failed && f.outcome != Canceled || !f.touched && f.restart.Empty() {
		return
	}
	f.kept = true
	c.ended = append(c.ended, f)
}

// removePartials deletes, on a session of its own, the files whose
// transfers started and did not end: they are partial, and they take the
// space the user must free. Their bytes are taken back from the progress,
// and a Partials reporter is told that none of them is at the destination:
// they go again, whole (a file whose rename was in doubt may still be
// there whole, and a later run must not take it for bytes counted). ctx
// is the caller's: the copy's own has ended.
func (c *copier) removePartials(ctx context.Context) {
	c.mu.Lock()
	var partial []*file
	for f := range c.live {
		if f.touched {
			partial = append(partial, f)
		}
	}
	c.mu.Unlock()
	for _, f := range partial {
		c.mu.Lock()
		back := f.moved
		f.have, f.chunks = gridftp.Ranges{}, gridftp.Ranges{}
		c.mu.Unlock()
		c.progress(f, -back)
		c.partial(f, false)
	}
	if len(partial) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	conn, err := c.dst.dial(ctx)
	if err != nil {
		return // the files stay partial: the next run checks them by checksum
	}
	defer conn.Close()
	for _, f := range partial {
		conn.Do(ctx, "DELE %s", f.at())
	}
}

// settleTemps sees to the temporary files of the files that did not
// arrive: what a canceled or interrupted file left is kept for a later
// copy to resume from, and listed in Result.Partial; that of a file that
// failed for good is deleted, on a session of its own (ctx is the
// caller's: the copy's own may have ended).
func (c *copier) settleTemps(ctx context.Context) {
	var gone []string
	c.mu.Lock()
	files := slices.AppendSeq(c.ended, maps.Keys(c.live))
	slices.SortFunc(files, func(a, b *file) int { return strings.Compare(a.tmp, b.tmp) })
	for _, f := range files {
		if f.tmp == "" || !f.touched && f.restart.Empty() {
			continue
		}
		switch {
		case !f.ended || f.outcome == Canceled:
			c.res.Partial = append(c.res.Partial, f.tmp)
		case f.outcome == Failed:
			gone = append(gone, f.tmp)
		}
	}
	c.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	conn, err := c.dst.dial(ctx)
	if err != nil {
		return // the next copy of the files finds them, and resumes or replaces them
	}
	defer conn.Close()
	cmds := make([]string, len(gone))
	for i, p := range gone {
		cmds[i] = "DELE " + p
	}
	conn.DoAll(ctx, cmds)
}
