package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"ferry/gridftp"
	"ferry/storage"
)

// listFormat renders directory entries for one listing command.
type listFormat int

const (
	formatLIST listFormat = iota
	formatNLST
	formatMLSD
)

func (ss *session) handleLIST(arg string) bool { return ss.list(arg, formatLIST) }
func (ss *session) handleNLST(arg string) bool { return ss.list(arg, formatNLST) }
func (ss *session) handleMLSD(arg string) bool { return ss.list(arg, formatMLSD) }

// listArg drops ls-style options ("-la") that clients put before the path.
func listArg(arg string) string {
	for strings.HasPrefix(arg, "-") {
		_, rest, _ := strings.Cut(arg, " ")
		arg = strings.TrimSpace(rest)
	}
	return arg
}

// list sends a listing over the data channel. The entries of a directory
// are written as the storage lists them (storage.ListDir), in its order,
// so a directory of millions of entries costs the memory of a few blocks;
// an error before anything is sent (the directory cannot be read) is the
// command's reply, one after is the transfer's.
func (ss *session) list(arg string, format listFormat) bool {
	defer ss.clearRest()
	ctx, done := ss.transferContext()
	defer done()
	if !ss.readyToTransfer(ctx) {
		return true
	}
	p := ss.path(listArg(arg))
	info, err := ss.srv.FS.Stat(ctx, p)
	if err == nil && format == formatMLSD && !info.IsDir() {
		err = fmt.Errorf("mlsd %s: %w", p, storage.ErrNotDir)
	}
	if err != nil {
		ss.errorReply("list", err)
		return true
	}
	write := func(w *bufio.Writer) error {
		err := ss.writeListing(ctx, w, p, info, format)
		if err == nil {
			err = w.Flush()
		}
		return err
	}
	if ss.striped() || ss.modeE && ss.stripe.count > 1 {
		// The stripes send ranges of a whole: the listing is made first.
		var b bytes.Buffer
		if err := write(bufio.NewWriter(&b)); err != nil {
			ss.errorReply("list", err)
			return true
		}
		data := b.Bytes()
		err = ss.sendData(ctx, bytes.NewReader(data), []gridftp.Range{{Start: 0, End: int64(len(data))}}, 0, int64(len(data)))
		ss.finish(ctx, "list", err, false)
		return true
	}
	pr, pw := io.Pipe()
	written := make(chan struct{})
	go func() {
		defer close(written)
		pw.CloseWithError(write(bufio.NewWriterSize(pw, listBuffer)))
	}()
	defer func() {
		pr.CloseWithError(errListingDone) // stops the writer if the transfer failed
		<-written
	}()
	r := bufio.NewReaderSize(pr, listBuffer)
	if _, err := r.Peek(1); err != nil && !errors.Is(err, io.EOF) {
		ss.errorReply("list", err)
		return true
	}
	err = ss.sendStream(ctx, r)
	ss.finish(ctx, "list", err, false)
	return true
}

// listBuffer is how much of a listing is written at once; the first
// block is written only once the directory has been opened and read.
const listBuffer = 32 << 10

// errListingDone stops the writing of a listing no longer read.
var errListingDone = errors.New("listing no longer read")

// writeListing writes the listing of p, which info describes, to w: a
// directory's entries as the storage lists them, or the one line of a
// file.
func (ss *session) writeListing(ctx context.Context, w *bufio.Writer, p string, info storage.Info, format listFormat) error {
	now := time.Now()
	line := func(e storage.Info) error {
		switch format {
		case formatMLSD:
			return writeFacts(w, e, "")
		case formatNLST:
			_, err := w.WriteString(e.Name + "\r\n")
			return err
		default:
			_, err := w.WriteString(listLineAt(e, now) + "\r\n")
			return err
		}
	}
	if !info.IsDir() {
		return line(info)
	}
	if format == formatMLSD {
		dot := info
		dot.Name = "."
		writeFacts(w, dot, "cdir")
		if parent, err := ss.srv.FS.Stat(ctx, path.Dir(p)); err == nil {
			parent.Name = ".."
			writeFacts(w, parent, "pdir")
		}
	}
	return storage.ListDir(ctx, ss.srv.FS, p, line)
}

func (ss *session) handleMLST(arg string) bool {
	p := ss.path(arg)
	if arg == "" {
		p = ss.cwd
	}
	info, err := ss.srv.FS.Stat(ss.ctx, p)
	if err != nil {
		ss.errorReply("stat", err)
		return true
	}
	var b bytes.Buffer
	info.Name = p
	writeFacts(&b, info, "")
	ss.reply(gridftp.CodeFileActionOK, "status of "+p, " "+strings.TrimSuffix(b.String(), "\r\n"), "End.")
	return true
}

// shownTarget is the symlink target a listing shows: that of a link the
// storage followed inside the root (a client removing a tree must know
// not to enter it), never where a link leads out of the root, dangles or
// loops: such a link is listed as a link with no target.
func shownTarget(info storage.Info) string {
	if info.Mode&fs.ModeSymlink != 0 {
		return ""
	}
	return info.Target
}

// writeFacts writes one MLSx line (RFC 3659): facts, a space, the name.
// kind overrides the Type fact ("cdir", "pdir").
func writeFacts(b io.StringWriter, info storage.Info, kind string) error {
	e := gridftp.Entry{Name: info.Name, Type: "file", Size: info.Size, Modify: info.ModTime,
		Perm: "r", Mode: uint32(info.Mode.Perm()), Target: shownTarget(info), Unique: info.ID}
	writable := info.Mode.Perm()&0o200 != 0
	if writable {
		e.Perm = "adfrw"
	}
	if info.IsDir() {
		e.Type, e.Perm = "dir", "el"
		if writable {
			e.Perm = "cdeflmp"
		}
	}
	if kind != "" {
		e.Type = kind
	}
	if info.Mode&fs.ModeSymlink != 0 {
		e.Type, e.Perm = "OS.unix=slink", ""
	}
	_, err := b.WriteString(e.Format() + "\r\n")
	return err
}

// listLine renders one "ls -l" line.
func listLine(info storage.Info) string { return listLineAt(info, time.Now()) }

func listLineAt(info storage.Info, now time.Time) string {
	mode := info.Mode.Perm().String()[1:]
	kind := "-"
	switch {
	case info.Mode&fs.ModeSymlink != 0:
		kind = "l"
	case info.IsDir():
		kind = "d"
	}
	t := info.ModTime
	stamp := t.Format("Jan _2 15:04")
	if t.Before(now.AddDate(0, -6, 0)) || t.After(now.Add(time.Hour)) {
		stamp = t.Format("Jan _2  2006")
	}
	// A link is shown as "l" only when it does not lead inside the root,
	// and then without its target (shownTarget).
	return fmt.Sprintf("%s%s   1 ferry    ferry    %12d %s %s", kind, mode, info.Size, stamp, info.Name)
}
