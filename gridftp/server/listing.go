package server

import (
	"bytes"
	"fmt"
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

// list sends a listing over the data channel.
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
	var entries []storage.Info
	if err == nil && info.IsDir() {
		entries, err = ss.srv.FS.ReadDir(ctx, p)
	} else if err == nil {
		entries = []storage.Info{info}
	}
	if err != nil {
		ss.errorReply("list", err)
		return true
	}
	var b bytes.Buffer
	switch format {
	case formatMLSD:
		info.Name = "."
		writeFacts(&b, info, "cdir")
		if parent, err := ss.srv.FS.Stat(ctx, path.Dir(p)); err == nil {
			parent.Name = ".."
			writeFacts(&b, parent, "pdir")
		}
		for _, e := range entries {
			writeFacts(&b, e, "")
		}
	case formatNLST:
		for _, e := range entries {
			b.WriteString(e.Name)
			b.WriteString("\r\n")
		}
	default:
		now := time.Now()
		for _, e := range entries {
			b.WriteString(listLineAt(e, now))
			b.WriteString("\r\n")
		}
	}
	data := b.Bytes()
	err = ss.sendData(ctx, bytes.NewReader(data), []gridftp.Range{{Start: 0, End: int64(len(data))}}, 0, int64(len(data)))
	ss.finish(ctx, "list", err, false)
	return true
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
func writeFacts(b *bytes.Buffer, info storage.Info, kind string) {
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
	b.WriteString(e.Format())
	b.WriteString("\r\n")
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
