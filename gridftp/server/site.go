package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"ferry/gridftp"
	"ferry/storage"
)

// siteCommand is one row of the SITE table.
type siteCommand struct {
	fn    func(ss *session, arg string)
	write bool // changes the tree: refused to read-only sessions
}

// siteCommands is the table of SITE subcommands.
var siteCommands map[string]siteCommand

func init() {
	siteCommands = map[string]siteCommand{
		"CHMOD":        {fn: (*session).siteCHMOD, write: true},
		"UTIME":        {fn: (*session).siteUTIME, write: true},
		"RDEL":         {fn: (*session).siteRDEL, write: true},
		"TRNC":         {fn: (*session).siteTRNC, write: true},
		"VERSION":      {fn: (*session).siteVERSION},
		"WHOAMI":       {fn: (*session).siteWHOAMI},
		"CLIENTINFO":   {fn: (*session).siteOK},
		"TASKID":       {fn: (*session).siteOK},
		"STORBUFSIZE":  {fn: func(ss *session, arg string) { ss.siteBufSize(arg, &ss.storBuf) }},
		"RETRBUFSIZE":  {fn: func(ss *session, arg string) { ss.siteBufSize(arg, &ss.retrBuf) }},
		"HELP":         {fn: (*session).siteHELP},
		"SETDISKSTACK": {fn: (*session).siteSETDISKSTACK},
		"MEMBERS":      {fn: (*session).siteMEMBERS},
		"CLIENT":       {fn: (*session).siteCLIENT},
		"STRIPE":       {fn: (*session).siteSTRIPE},
		"MOVERS":       {fn: (*session).siteMOVERS},
		"PARTSTOR":     {fn: (*session).sitePARTSTOR, write: true},
	}
}

func (ss *session) handleSITE(arg string) bool {
	sub, rest, _ := strings.Cut(strings.TrimSpace(arg), " ")
	sub = strings.ToUpper(sub)
	c, ok := siteCommands[sub]
	switch {
	case !ok:
		ss.reply(gridftp.CodeSyntaxError, "Invalid command.")
	case c.write && ss.refuseWrite("SITE "+sub):
	default:
		c.fn(ss, strings.TrimSpace(rest))
	}
	return true
}

func (ss *session) siteOK(string) { ss.reply(gridftp.CodeFileActionOK, "OK.") }

func (ss *session) siteHELP(string) {
	var names []string
	for n := range siteCommands {
		names = append(names, n)
	}
	ss.reply(gridftp.CodeHelp, helpList(names)...)
}

func (ss *session) siteVERSION(string) { ss.replyf(gridftp.CodeOK, "ferry %s", Version) }
func (ss *session) siteWHOAMI(string)  { ss.reply(gridftp.CodeOK, ss.user) }

func (ss *session) siteCHMOD(arg string) {
	m, p, ok := strings.Cut(arg, " ")
	mode, err := strconv.ParseUint(m, 8, 32)
	if !ok || p == "" || err != nil || mode > 0o7777 {
		ss.reply(gridftp.CodeBadArguments, "SITE CHMOD: expected OCTAL-MODE PATH.")
		return
	}
	if err := ss.srv.FS.Chmod(ss.ctx, ss.path(p), fs.FileMode(mode)&fs.ModePerm); err != nil {
		ss.errorReply("chmod", err)
		return
	}
	ss.reply(gridftp.CodeOK, "Site Command Successful.")
}

func (ss *session) siteUTIME(arg string) {
	t, p, err := parseTimeAndPath(arg)
	if err != nil {
		ss.replyf(gridftp.CodeBadArguments, "SITE UTIME: %v.", err)
		return
	}
	if err := ss.srv.FS.Chtimes(ss.ctx, ss.path(p), t); err != nil {
		ss.errorReply("utime", err)
		return
	}
	ss.reply(gridftp.CodeOK, "Site Command Successful.")
}

func (ss *session) siteTRNC(arg string) {
	const usage = "SITE TRNC: expected LENGTH PATH."
	n, p, ok := strings.Cut(arg, " ")
	if !ok || p == "" {
		ss.reply(gridftp.CodeBadArguments, usage)
		return
	}
	size, ok := ss.sizeArg(n, "truncate", usage)
	if !ok {
		return
	}
	ss.srv.sums.forget(ss.path(p), size, -1)
	if err := ss.srv.FS.Truncate(ss.ctx, ss.path(p), size); err != nil {
		ss.errorReply("truncate", err)
		return
	}
	ss.reply(gridftp.CodeOK, "Site Command Successful.")
}

func (ss *session) siteRDEL(arg string) {
	p := ss.path(arg)
	if p == "/" {
		ss.errorReply("rdel", fmt.Errorf("rdel /: %w", storage.ErrPermission))
		return
	}
	ctx, done := ss.transferContext()
	defer done()
	ss.srv.sums.forget(p, 0, -1)
	if err := removeAll(ctx, ss.srv.FS, p); err != nil {
		ss.errorReply("rdel", err)
		return
	}
	ss.reply(gridftp.CodeFileActionOK, "RDEL command successful.")
}

// SITE RDEL deletes a directory as it lists it (storage.ListDir), each
// entry as the listing yields it, so that a directory of millions of
// entries costs the memory of the driver's listing batch. Removing entries
// already listed does not make a listing skip others (POSIX leaves
// unspecified only whether the entries added or removed meanwhile are
// listed). A directory is listed again until it can be removed: the next
// pass finds what one missed or someone added meanwhile. A pass removes at
// most rdelWindow entries, or, once one has, as many as the directory held
// when counted then, plus rdelWindow: a listing that yields what someone
// adds as fast as it is deleted ends all the same. After rdelPasses
// passes the directory is being filled as fast as it is emptied, and RDEL
// fails.
const rdelPasses = 8

var rdelWindow = 4096 // a variable for tests (SetRDELWindow)

// errStillFilled is a directory that rdelPasses passes did not empty.
var errStillFilled = fmt.Errorf("still being filled while it was deleted: %w", storage.ErrNotEmpty)

// errPassDone ends a pass of removeAll that removed as many entries as
// it may.
var errPassDone = errors.New("rdel: pass done")

// removeAll deletes p and everything below it. Symlinks are removed, never
// followed.
func removeAll(ctx context.Context, d storage.Driver, p string) error {
	info, err := d.Stat(ctx, p)
	if err != nil {
		return err
	}
	if !info.IsDir() || info.Target != "" { // a symlink is removed, not entered
		return d.Remove(ctx, p)
	}
	budget := rdelWindow
	for range rdelPasses {
		removed := 0
		err := storage.ListDir(ctx, d, p, func(e storage.Info) error {
			if removed == budget {
				return errPassDone
			}
			removed++
			if err := ctx.Err(); err != nil {
				return err
			}
			name := path.Join(p, e.Name)
			if e.IsDir() && e.Target == "" {
				err = removeAll(ctx, d, name)
			} else {
				err = d.Remove(ctx, name)
			}
			if errors.Is(err, storage.ErrNotExist) {
				return nil // removed by someone else
			}
			return err
		})
		switch {
		case errors.Is(err, errPassDone):
			n := 0
			if err := storage.ListDir(ctx, d, p, func(storage.Info) error { n++; return nil }); err != nil {
				return err
			}
			budget = n + rdelWindow
		case err != nil:
			return err
		default:
			if err := d.Remove(ctx, p); !errors.Is(err, storage.ErrNotEmpty) {
				return err
			}
		}
	}
	return fmt.Errorf("rdel %s: %d passes: %w", p, rdelPasses, errStillFilled)
}

func (ss *session) siteBufSize(arg string, dst *int) {
	n, err := strconv.Atoi(strings.TrimSpace(arg))
	if err != nil || n < 0 || n > 1<<30 {
		ss.reply(gridftp.CodeBadArguments, "Bad buffer size.")
		return
	}
	*dst = n
	ss.reply(gridftp.CodeOK, "Site Command Successful.")
}

// sitePARTSTOR is "SITE PARTSTOR ON|OFF", ferry's extension (FEAT
// PARTSTOR): while on, a STOR of a whole file (no REST; ESTO and APPE
// write where they name) is written under the file's temporary name
// (partname.For, the name a later transfer resumes from) and renamed over
// its name when it succeeded, before its 226: the file is never under its
// name short of its data, and the client sends no RNFR and RNTO. One that
// fails or is aborted leaves its temporary file. The rename is what RNTO
// would do in the session, confined and checked as any write.
func (ss *session) sitePARTSTOR(arg string) {
	switch strings.ToUpper(arg) {
	case "ON":
		ss.partStor = true
	case "OFF":
		ss.partStor = false
	default:
		ss.reply(gridftp.CodeBadArguments, "SITE PARTSTOR: expected ON or OFF.")
		return
	}
	ss.reply(gridftp.CodeOK, "PARTSTOR "+strings.ToUpper(arg)+".")
}
