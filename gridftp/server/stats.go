package server

import "sync/atomic"

// Stats counts a server's work for monitoring (ferry gridftp
// --metrics-listen exports it to Prometheus). Each field is updated at
// most once per session, transfer or reply, never per block, and read with
// Load at any time.
type Stats struct {
	Sessions atomic.Int64 // sessions admitted so far (Server.Sessions is those open now)
	// BytesIn and BytesOut count the file data of finished transfers,
	// received and sent. A striped endpoint's data goes through its
	// movers, which count it; its front end counts none.
	BytesIn, BytesOut atomic.Int64
	// Transfers of files (RETR, ERET, STOR, ESTO, APPE) by outcome:
	// succeeded (226), aborted (ABOR, 426) and failed. A striped front
	// end's are counted by its movers.
	Succeeded, Aborted, Failed atomic.Int64
	// Refusals: replies of class 4 (transient: try again) and 5
	// (permanent), of every command.
	Transient, Permanent atomic.Int64
}

// transfer counts the end of a file transfer that moved n bytes, in or
// out, and ended with err (aborted: by the client).
func (s *Stats) transfer(in bool, n int64, err error, aborted bool) {
	if s == nil {
		return
	}
	if in {
		s.BytesIn.Add(n)
	} else {
		s.BytesOut.Add(n)
	}
	switch {
	case err == nil:
		s.Succeeded.Add(1)
	case aborted:
		s.Aborted.Add(1)
	default:
		s.Failed.Add(1)
	}
}

// reply counts a reply of code.
func (s *Stats) reply(code int) {
	switch {
	case s == nil:
	case code >= 500:
		s.Permanent.Add(1)
	case code >= 400:
		s.Transient.Add(1)
	}
}

// session counts a session admitted.
func (s *Stats) session() {
	if s != nil {
		s.Sessions.Add(1)
	}
}
