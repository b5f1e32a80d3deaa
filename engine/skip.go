package engine

import (
	"errors"

	"ferry/gridftp"
	"ferry/gridftp/client"
)

// SourceError reports err as the source's refusal to give a path, for a
// reason no retry mends: it is missing or not allowed (gridftp.Classify).
// Options.SkipSourceErrors skips the paths that fail so.
func SourceError(err error) bool {
	var end *client.EndError
	return errors.As(err, &end) && !end.Dest && unreadable(err)
}

// unreadable reports a reply saying a path is missing or not allowed.
func unreadable(err error) bool {
	switch gridftp.Classify(err) {
	case gridftp.FaultNotFound, gridftp.FaultPermission:
		return true
	}
	return false
}

// skipsSource records src, which the source refused with err, as skipped
// when the copy skips source errors, and reports whether it did.
func (p *planner) skipsSource(src, dst string, err error) bool {
	err = &client.EndError{Err: err}
	if !p.opts.SkipSourceErrors || !SourceError(err) {
		return false
	}
	p.settled(FileResult{Src: src, Dst: dst, Outcome: SkippedError, Attempts: 1, Err: err})
	return true
}
