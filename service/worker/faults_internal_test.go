package worker

import (
	"errors"
	"io"
	"testing"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/internal/fault"
	"ferry/service/domain"
	"ferry/service/gridops"
)

// TestFaultsAgree: a server's refusal means one thing at every level. The
// engine tries a file again after a reply that a task, meeting the same
// reply in a file operation (delete, as gridops words it), would also run
// again; and what ends a file for good in the engine fails a task's path.
func TestFaultsAgree(t *testing.T) {
	reply := func(code int, lines ...string) *gridftp.Error {
		return &gridftp.Error{Reply: gridftp.Reply{Code: code, Lines: lines}}
	}
	for _, tc := range []struct {
		name  string
		err   *gridftp.Error
		retry bool
	}{
		{"GCT: reset, as 500", reply(500, "Command failed. : an end-of-file was reached", "Connection reset by peer", "End."), true},
		{"GCT: refused without a reason", reply(500, "Command failed."), true},
		{"refused, bare 554", reply(554, "Requested action not taken."), true},
		{"busy", reply(421, "Too many sessions"), true},
		{"damaged data", reply(550, "GlobusError: v=1 c=INCORRECT_CHECKSUM", "Checksum mismatch"), true},
		{"missing", reply(550, "GlobusError: v=1 c=PATH_NOT_FOUND", "No such file or directory"), false},
		{"not allowed", reply(550, "GlobusError: v=1 c=PERMISSION_DENIED", "Permission denied"), false},
		{"login refused", reply(530, "Login incorrect."), false},
		{"not implemented", reply(502, "Not implemented."), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inEngine := !fault.Final(&client.EndError{Err: tc.err})
			inTask := classify(gridops.Err("delete", "/p on ep", tc.err)).transient
			if inEngine != tc.retry || inTask != tc.retry {
				t.Errorf("%s: the engine retries a file: %v; a task runs again: %v; want both %v", gridftp.Told(tc.err), inEngine, inTask, tc.retry)
			}
		})
	}
}

// TestFailureCodes: the name a task's failure gets (its fatal error code,
// nice status, metrics class) is what the fault is, wherever it was met.
func TestFailureCodes(t *testing.T) {
	reply := func(code int, lines ...string) error {
		return &client.EndError{Dest: true, Err: &gridftp.Error{Reply: gridftp.Reply{Code: code, Lines: lines}}}
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"disk full", reply(452, "GlobusError: v=1 c=NO_SPACE_LEFT", "No space left on device"), domain.NiceNoSpace},
		{"over the storage allocation", reply(552, "Exceeded storage allocation."), domain.NiceNoSpace},
		{"missing", reply(550, "GlobusError: v=1 c=PATH_NOT_FOUND", "No such file or directory"), domain.NiceFileNotFound},
		{"not allowed", reply(550, "GlobusError: v=1 c=PERMISSION_DENIED", "Permission denied"), domain.NicePermissionDenied},
		{"login refused", &client.HandshakeError{Stage: client.StageLogin, Err: &gridftp.Error{Reply: gridftp.Reply{Code: 530, Lines: []string{"Login incorrect."}}}}, domain.NiceCredentialExpired},
		{"damaged, as the destination server found", reply(550, "GlobusError: v=1 c=INCORRECT_CHECKSUM", "Checksum mismatch"), domain.NiceChecksumMismatch},
		{"no answer", &client.EndError{Err: io.ErrUnexpectedEOF}, domain.NiceConnectFailed},
		{"says nothing", errors.New("no destination"), "FAILED"},
	} {
		if got := classify(tc.err).code; got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
