// Package fault says what a failure means for the work that met it, one
// rule for the engine's tries of a file, the service worker's runs of a
// task and its file operations alike: another try may mend it
// (ShouldRetry), no try can (Final), or nothing more can move until
// someone acts (IsFatal: a destination full or over its quota). An error
// says so itself, as rclone's fserrors have it: a Retry or a Fatal method
// in its chain (a server's reply, gridftp.Error, by its class; the
// service's domain.Error by its code, unless its cause says), and an
// endpoint that did not answer (Unanswered) is worth another try. Backoff is the one wait
// between tries.
package fault

// Retrier is an error that says whether another try may mend it.
type Retrier interface{ Retry() bool }

// Fataler is an error that says whether it stops all the work: nothing
// more can move until someone acts. One that says so anywhere in a chain
// makes the chain fatal.
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
// and the deepest error in its chain that says (a Retrier, the first of
// several joined) says a retry may mend it, or none says and the endpoint
// did not answer. An error that says nothing is not retried: the service
// runs a task again only for a cause that says so.
func ShouldRetry(err error) bool {
	if err == nil || IsFatal(err) {
		return false
	}
	if retry, ok := said(err); ok {
		return retry
	}
	return Unanswered(err)
}

// Final reports whether err says no retry can mend it: it is fatal, or the
// deepest error in its chain that says, says so. An error that says
// nothing is not final: the engine tries a file again after it, as often
// as its options allow.
func Final(err error) bool {
	retry, ok := said(err)
	return IsFatal(err) || ok && !retry
}

// said is what the deepest error in err's chain that says (a Retrier)
// says of another try, the first of several joined: a cause knows better
// than what wraps it. ok is false when none says.
func said(err error) (retry, ok bool) {
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if retry, ok = said(u.Unwrap()); ok {
			return retry, ok
		}
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if retry, ok = said(e); ok {
				return retry, ok
			}
		}
	}
	if r, is := err.(Retrier); is {
		return r.Retry(), true
	}
	return false, false
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
