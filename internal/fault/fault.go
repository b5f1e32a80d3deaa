// Package fault says what a failure means for the work that met it, one
// rule for the engine's tries of a file, the service worker's runs of a
// task and its file operations alike: another try may mend it
// (ShouldRetry), no try can (Final), or nothing more can move until
// someone acts (IsFatal: a destination full or over its quota). An error
// says so itself, as rclone's fserrors have it: a Retry or a Fatal method
// anywhere in its chain (a server's reply, gridftp.Error, by its class;
// the service's domain.Error by its code), and an endpoint that did not
// answer (Unanswered) is worth another try. Backoff is the one wait
// between tries.
package fault

// Retrier is an error that says whether another try may mend it.
type Retrier interface{ Retry() bool }

// Fataler is an error that says whether it stops all the work: nothing
// more can move until someone acts.
type Fataler interface{ Fatal() bool }

// IsFatal reports whether an error in err's chain says it stops all the
// work.
func IsFatal(err error) bool {
	return anyIn(err, func(e error) bool {
		f, ok := e.(Fataler)
		return ok && f.Fatal()
	})
}

// ShouldRetry reports whether another try may mend err: it is not fatal,
// and an error in its chain says a retry may mend it, or the endpoint did
// not answer. An error that says nothing is not retried: the service runs
// a task again only for a cause that says so.
func ShouldRetry(err error) bool {
	return err != nil && !IsFatal(err) && (Unanswered(err) || anyIn(err, func(e error) bool {
		r, ok := e.(Retrier)
		return ok && r.Retry()
	}))
}

// Final reports whether err says no retry can mend it: it is fatal, or an
// error in its chain says a retry cannot mend it and none that one can.
// An error that says nothing is not final: the engine tries a file again
// after it, as often as its options allow.
func Final(err error) bool {
	return IsFatal(err) || !ShouldRetry(err) && anyIn(err, func(e error) bool {
		_, ok := e.(Retrier)
		return ok
	})
}

// anyIn reports whether f holds for an error in err's tree.
func anyIn(err error, f func(error) bool) bool {
	if err == nil {
		return false
	}
	if f(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return anyIn(u.Unwrap(), f)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if anyIn(e, f) {
				return true
			}
		}
	}
	return false
}
