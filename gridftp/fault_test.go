package gridftp

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestClassify(t *testing.T) {
	reply := func(code int, lines ...string) error { return &Error{Reply: Reply{Code: code, Lines: lines}} }
	ferry := func(code int, class, text string) error {
		return reply(code, "GlobusError: v=1 c="+class, "GridFTP-Errno: 2", "GridFTP-Reason: System error in open", "GridFTP-Error-String: "+text, "End.")
	}
	for _, tc := range []struct {
		name string
		err  error
		want Fault
	}{
		{"ferry: missing", ferry(550, "PATH_NOT_FOUND", "No such file or directory"), FaultNotFound},
		{"ferry: refused", ferry(550, "PERMISSION_DENIED", "Permission denied"), FaultPermission},
		{"ferry: full", ferry(452, "NO_SPACE_LEFT", "No space left on device"), FaultNoSpace},
		{"ferry: quota", ferry(452, "QUOTA_EXCEEDED", "Disk quota exceeded"), FaultNoSpace},
		{"ferry: exists", ferry(553, "PATH_EXISTS", "File exists"), FaultExists},
		{"ferry: not a directory", ferry(550, "PATH_NOT_FOUND", "Not a directory"), FaultNotDir},
		{"ferry: data channel", ferry(426, "DATA_CHANNEL", "Data connection failed"), FaultTransient},
		{"ferry: bad checksum", ferry(550, "INCORRECT_CHECKSUM", "Checksum mismatch"), FaultChecksum},
		{"GCT: missing, as 500", reply(500, "Command failed. : globus_gridftp_server_file.c:globus_l_gfs_file_open:", "System error in open: No such file or directory", "End."), FaultNotFound},
		{"GCT: reset, as 500", reply(500, "Command failed. : an end-of-file was reached", "Connection reset by peer", "End."), FaultTransient},
		{"GCT: full, as 451", reply(451, "Command failed. : System error in write: No space left on device", "End."), FaultNoSpace},
		{"RFC 959: over the storage allocation, 552", reply(552, "Requested file action aborted. Exceeded storage allocation."), FaultNoSpace},
		{"login", reply(530, "Login incorrect."), FaultLogin},
		{"unknown verb", reply(500, "Command not supported."), FaultRefused},
		{"not implemented", reply(502, "Not implemented."), FaultInvalid},
		{"busy", reply(421, "Too many sessions"), FaultTransient},
		{"bare 550", reply(550, "Nope."), FaultNotFound},
		{"not a reply", io.ErrUnexpectedEOF, FaultTransient},
		{"wrapped", errors.Join(errors.New("source"), reply(550, "GlobusError: v=1 c=PERMISSION_DENIED")), FaultPermission},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSaid: a refusal in one line for users, without the lines only
// programs read.
func TestSaid(t *testing.T) {
	for _, tc := range []struct {
		reply Reply
		want  string
	}{
		{Reply{Code: 550, Lines: []string{"GlobusError: v=1 c=PERMISSION_DENIED", "GridFTP-Errno: 13",
			"GridFTP-Reason: System error in stor", "GridFTP-Error-String: Permission denied", "End."}},
			"550 System error in stor: Permission denied"},
		{Reply{Code: 451, Lines: []string{"GlobusError: v=1 c=INTERNAL_ERROR: cannot read bad%one"}}, "451 cannot read bad%one"},
		{Reply{Code: 550, Lines: []string{"GlobusError: v=1 c=PATH_NOT_FOUND", "End."}}, "550 PATH_NOT_FOUND"},
		{Reply{Code: 550, Lines: []string{"/x: No such file or directory."}}, "550 /x: No such file or directory."},
		{Reply{Code: 426, Lines: []string{"Data connection", " closed", "End"}}, "426 Data connection: closed: End"},
		{Reply{Code: 530}, "530"},
	} {
		if got := (&Error{Reply: tc.reply}).Said(); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.reply.Lines, got, tc.want)
		}
	}
	wrapped := fmt.Errorf("destination: %w", &Error{Reply: Reply{Code: 550,
		Lines: []string{"GlobusError: v=1 c=PERMISSION_DENIED", "GridFTP-Error-String: Permission denied", "End."}}})
	if got, want := Told(wrapped), "destination: 550 Permission denied"; got != want {
		t.Errorf("Told = %q, want %q", got, want)
	}
	if got := Told(errors.New("plain")); got != "plain" {
		t.Errorf("Told of a plain error = %q", got)
	}
}

// TestFaultRetry: what each kind of refusal means for another try; only a
// full destination stops all the work.
func TestFaultRetry(t *testing.T) {
	for _, tc := range []struct {
		fault        Fault
		retry, fatal bool
	}{
		{FaultTransient, true, false},
		{FaultChecksum, true, false},
		{FaultRefused, true, false},
		{FaultNoSpace, false, true},
		{FaultNotFound, false, false},
		{FaultPermission, false, false},
		{FaultExists, false, false},
		{FaultNotEmpty, false, false},
		{FaultIsDir, false, false},
		{FaultNotDir, false, false},
		{FaultInvalid, false, false},
		{FaultLogin, false, false},
	} {
		if tc.fault.Retry() != tc.retry || tc.fault.Fatal() != tc.fatal {
			t.Errorf("fault %d: Retry %v, Fatal %v; want %v, %v", tc.fault, tc.fault.Retry(), tc.fault.Fatal(), tc.retry, tc.fatal)
		}
	}
}
