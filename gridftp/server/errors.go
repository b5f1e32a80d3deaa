package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"ferry/checksum"
	"ferry/gridftp"
	"ferry/stack"
	"ferry/storage"
)

// errorKind is one row of the table mapping errors to replies: the FTP code,
// GCT's GlobusError class (grid clients parse it), and the errno GCT shows.
type errorKind struct {
	err   error
	code  int
	class string
	errno int
	text  string
}

// errorTable maps errors to replies, first match wins.
var errorTable = []errorKind{
	{storage.ErrNotExist, gridftp.CodeFileUnavailable, "PATH_NOT_FOUND", 2, "No such file or directory"},
	{storage.ErrPermission, gridftp.CodeFileUnavailable, "PERMISSION_DENIED", 13, "Permission denied"},
	{storage.ErrExist, gridftp.CodeNameNotAllowed, "PATH_EXISTS", 17, "File exists"},
	{storage.ErrNotDir, gridftp.CodeFileUnavailable, "PATH_NOT_FOUND", 20, "Not a directory"},
	{storage.ErrIsDir, gridftp.CodeFileUnavailable, "IS_A_DIRECTORY", 21, "Is a directory"},
	{errStillFilled, gridftp.CodeFileUnavailable, "INVALID_PATH", 39, "Directory not empty: still being filled while it was deleted"},
	{storage.ErrNotEmpty, gridftp.CodeFileUnavailable, "INVALID_PATH", 39, "Directory not empty"},
	{storage.ErrNoSpace, gridftp.CodeNoSpace, "NO_SPACE_LEFT", 28, "No space left on device"},
	{syscall.ENOSPC, gridftp.CodeNoSpace, "NO_SPACE_LEFT", 28, "No space left on device"}, // from File writes
	{syscall.EDQUOT, gridftp.CodeNoSpace, "QUOTA_EXCEEDED", 122, "Disk quota exceeded"},
	{syscall.EFBIG, gridftp.CodeNoSpace, "NO_SPACE_LEFT", 27, "File too large"},
	{syscall.ENAMETOOLONG, gridftp.CodeNameNotAllowed, "INVALID_PATH", 36, "File name too long"},
	{syscall.ELOOP, gridftp.CodeFileUnavailable, "INVALID_PATH", 40, "Too many levels of symbolic links"},
	{checksum.ErrUnknown, gridftp.CodeParamNotSupported, "UNSUPPORTED", 95, "Unsupported checksum algorithm"},
	{errTooSparse, gridftp.CodeParamNotSupported, "UNSUPPORTED", 95, "Checksum of a sparse file: more holes than the server hashes"},
	{errTooLarge, gridftp.CodeBadArguments, "FILE_TOO_LARGE", 27, "Larger than the server's maximum file size"},
	{gridftp.ErrTooManyStreams, gridftp.CodeBadArguments, "TOO_MANY_STREAMS", 24, "More parallel data streams than the server takes"},
	{errForwardBusy, gridftp.CodeLocalError, "SERVER_BUSY", 11, "Too many connections to other servers now; try again later"},
	{errChecksumMismatch, gridftp.CodeFileUnavailable, "INCORRECT_CHECKSUM", 5, "Checksum mismatch"},
	{errAborted, gridftp.CodeTransferAborted, "ABORTED", 125, "Transfer aborted"},
	{errDataConn, gridftp.CodeTransferAborted, "DATA_CHANNEL", 104, "Data connection failed"},
	{gridftp.ErrDataStream, gridftp.CodeTransferAborted, "DATA_CHANNEL", 104, "Data connection failed"},
	{gridftp.ErrBadHeader, gridftp.CodeTransferAborted, "PROTOCOL", 71, "Bad MODE E block header"},
	{os.ErrDeadlineExceeded, gridftp.CodeTransferAborted, "TIMEOUT", 110, "Timed out"},
	{stack.ErrNotSeekable, gridftp.CodeParamNotSupported, "UNSUPPORTED", 29, "The disk stack cannot seek: no restart, offset or append"},
}

var errChecksumMismatch = errors.New("checksum mismatch")

// errTooLarge is a size or offset past Server.MaxFileSize.
var errTooLarge = errors.New("larger than the maximum file size")

// errTooSparse is a checksum over more holes than Server.ChecksumHoles.
var errTooSparse = errors.New("checksum over too many holes")
var errDataConn = errors.New("data connection failed")

var internalKind = errorKind{code: gridftp.CodeLocalError, class: "INTERNAL_ERROR", errno: 5, text: "Input/output error"}

func replyFor(err error) errorKind {
	for _, k := range errorTable {
		if errors.Is(err, k.err) {
			return k
		}
	}
	var ne *net.OpError
	if errors.As(err, &ne) {
		return errorKind{code: gridftp.CodeTransferAborted, class: "DATA_CHANNEL", errno: 104, text: "Data connection failed"}
	}
	return internalKind
}

// errorReply builds GCT's multi-line error reply for op failing with err.
// Like GCT's, the reply names the operation and the error class only: paths
// and other details of the server's side go to its log.
//
// A layer's failure meant for the client (stack.ShownError, a program's
// exit status and standard error) is shown after those lines.
func errorReply(op string, err error) gridftp.Reply {
	k := replyFor(err)
	reason := fmt.Sprintf("System error in %s", op)
	detail := k.text
	lines := []string{
		fmt.Sprintf("GlobusError: v=1 c=%s", k.class),
		fmt.Sprintf("%d-GridFTP-Errno: %d", k.code, k.errno),
		fmt.Sprintf("%d-GridFTP-Reason: %s", k.code, reason),
		fmt.Sprintf("%d-GridFTP-Error-String: %s", k.code, detail),
	}
	if se, ok := errors.AsType[*stack.ShownError](err); ok {
		for _, l := range strings.Split(strings.TrimRight(se.Text, "\n"), "\n") {
			lines = append(lines, fmt.Sprintf("%d-%s", k.code, strings.Map(printable, l)))
		}
	}
	return gridftp.Reply{Code: k.code, Lines: append(lines, "End.")}
}

// printable keeps a shown line on one control-channel line.
func printable(r rune) rune {
	if r < ' ' || r == 0x7f {
		return ' '
	}
	return r
}
