package domain

import (
	"errors"
	"fmt"
)

// Error codes: one per kind of failure a user can act on. The HTTP layer
// maps each to a status in one table.
const (
	EInvalid      = "BadRequest"      // malformed input
	ENotFound     = "NotFound"        // missing, or not the caller's to see
	EConflict     = "Conflict"        // already exists
	EDuplicate    = "Duplicate"       // a submission_id seen before
	EUnauthorized = "Unauthorized"    // no, bad, expired or revoked credentials
	EForbidden    = "Forbidden"       // visible but not the caller's to change
	ENotActivated = "NotActivated"    // the endpoint needs activation first
	ELimit        = "LimitExceeded"   // too large or too many
	EThrottled    = "TooManyRequests" // too many tries: wait, then try again
	EUnavailable  = "Unavailable"     // an endpoint could not be reached
	ETimeout      = "Timeout"         // an endpoint's server did not answer in time
	EInternal     = "Internal"        // anything else; details are logged, not shown
)

// Error is the one error type whose message is safe to show users.
type Error struct {
	Code    string
	Message string
	Err     error // the cause, for programs (whether to retry); never shown
}

func (e *Error) Error() string { return e.Message }

// Unwrap is the cause.
func (e *Error) Unwrap() error { return e.Err }

// Retry reports whether another try may mend e, by its code: an endpoint
// could not be reached, or did not answer in time (internal/fault; a
// cause may say so too).
func (e *Error) Retry() bool { return e.Code == EUnavailable || e.Code == ETimeout }

// Errorf makes an *Error.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode is the code of err's *Error, or EInternal.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrorMessage is the user-safe message of err: an *Error's message, or a
// generic one.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// IsNotFound reports an ENotFound error.
func IsNotFound(err error) bool { return ErrorCode(err) == ENotFound }
