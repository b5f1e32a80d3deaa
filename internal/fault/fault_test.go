package fault_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/internal/fault"
	"ferry/service/domain"
)

// TestVerdicts: what a failure says of another try, wherever its cause
// sits in the chain: bare, in a transfer's end, in the engine's stop for a
// full destination, in the service's domain error of a file operation.
func TestVerdicts(t *testing.T) {
	reply := func(code int, lines ...string) *gridftp.Error {
		return &gridftp.Error{Reply: gridftp.Reply{Code: code, Lines: lines}}
	}
	full := reply(452, "GlobusError: v=1 c=NO_SPACE_LEFT", "GridFTP-Error-String: No space left on device", "End.")
	denied := reply(550, "GlobusError: v=1 c=PERMISSION_DENIED", "GridFTP-Error-String: Permission denied", "End.")
	bare := reply(500, "Command failed.")
	const (
		retry = iota // ShouldRetry
		final        // Final, not fatal
		fatal        // IsFatal (and Final)
		none         // says nothing: neither
	)
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"disk full", full, fatal},
		{"disk full, in a transfer's end", &client.EndError{Dest: true, Err: full}, fatal},
		{"disk full, as the engine stops for it", fmt.Errorf("%w: %w", errors.New("the destination has no space left"), full), fatal},
		{"disk full, in a file operation", &domain.Error{Code: domain.ELimit, Err: full}, fatal},
		{"over the storage allocation (RFC 959's 552)", &client.EndError{Dest: true, Err: reply(552, "Requested file action aborted.")}, fatal},
		{"permission denied", &client.EndError{Err: denied}, final},
		{"permission denied, in a file operation", &domain.Error{Code: domain.EForbidden, Err: denied}, final},
		{"refused without a reason", &client.EndError{Err: bare}, retry},
		{"refused by the source while the destination broke", errors.Join(&client.EndError{Err: denied}, &client.EndError{Dest: true, Err: io.EOF}), final},
		{"refused without a reason, in a file operation", &domain.Error{Code: domain.EInvalid, Err: bare}, retry},
		{"on the way", reply(451, "busy"), retry},
		{"login refused", &client.HandshakeError{Stage: client.StageLogin, Err: reply(530, "Login incorrect.")}, final},
		{"connection refused", &client.HandshakeError{Stage: client.StageConnect, Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, retry},
		{"unreachable, in a file operation", &domain.Error{Code: domain.EUnavailable}, retry},
		{"unreachable, with its cause", &domain.Error{Code: domain.EUnavailable, Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, retry},
		{"a bad request", &domain.Error{Code: domain.EInvalid}, final},
		{"says nothing", errors.New("checksum mismatch"), none},
		{"canceled", context.Canceled, none},
		{"nil", nil, none},
	} {
		got := none
		switch {
		case fault.ShouldRetry(tc.err):
			got = retry
		case fault.IsFatal(tc.err):
			got = fatal
		case fault.Final(tc.err):
			got = final
		}
		if fault.IsFatal(tc.err) && !fault.Final(tc.err) || fault.ShouldRetry(tc.err) && fault.Final(tc.err) {
			t.Errorf("%s: IsFatal %v, ShouldRetry %v, Final %v: contradict", tc.name, fault.IsFatal(tc.err), fault.ShouldRetry(tc.err), fault.Final(tc.err))
		}
		if got != tc.want {
			t.Errorf("%s: verdict %d, want %d (0 retry, 1 final, 2 fatal, 3 none)", tc.name, got, tc.want)
		}
	}
}
