package server

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"ferry/checksum"
	"ferry/gridftp"
	"ferry/internal/throttle"
	"ferry/storage"
)

type argRule int

const (
	argAny argRule = iota
	argRequired
	argNone
)

// handler is one row of the command table; fn returns false to end the
// session.
type handler struct {
	fn    func(ss *session, arg string) bool
	open  bool    // allowed before login
	arg   argRule // argument checked before fn runs
	write bool    // changes the tree: refused to read-only sessions
	// quick: runs at once, without waiting on data or the network; its
	// reply may wait for those of the commands queued behind it (batch).
	quick bool
}

// commands is the table of verbs; each row names a handleXXX method.
var commands map[string]handler

func init() {
	commands = map[string]handler{
		"USER": {fn: (*session).handleUSER, open: true, arg: argRequired},
		"PASS": {fn: (*session).handlePASS, open: true},
		"QUIT": {fn: (*session).handleQUIT, open: true},
		"AUTH": {fn: (*session).handleAUTH, open: true, arg: argRequired},
		"ADAT": {fn: (*session).handleADAT, open: true, arg: argRequired},
		"FEAT": {fn: (*session).handleFEAT, open: true, arg: argNone},
		"HELP": {fn: (*session).handleHELP, open: true},
		"NOOP": {fn: (*session).handleNOOP, open: true},
		"SYST": {fn: (*session).handleSYST, arg: argNone},
		"TYPE": {fn: (*session).handleTYPE, arg: argRequired, quick: true},
		"STRU": {fn: (*session).handleSTRU, arg: argRequired},
		"MODE": {fn: (*session).handleMODE, arg: argRequired, quick: true},
		"ALLO": {fn: (*session).handleALLO, write: true},
		"PASV": {fn: (*session).handlePASV},
		"EPSV": {fn: (*session).handleEPSV},
		"SPAS": {fn: (*session).handleSPAS},
		"PORT": {fn: (*session).handlePORT, arg: argRequired},
		"EPRT": {fn: (*session).handleEPRT, arg: argRequired},
		"SPOR": {fn: (*session).handleSPOR, arg: argRequired},
		"REST": {fn: (*session).handleREST, arg: argRequired, quick: true},
		"RETR": {fn: (*session).handleRETR, arg: argRequired},
		"ERET": {fn: (*session).handleERET, arg: argRequired},
		"STOR": {fn: (*session).handleSTOR, arg: argRequired, write: true},
		"ESTO": {fn: (*session).handleESTO, arg: argRequired, write: true},
		"APPE": {fn: (*session).handleAPPE, arg: argRequired, write: true},
		"LIST": {fn: (*session).handleLIST},
		"NLST": {fn: (*session).handleNLST},
		"MLSD": {fn: (*session).handleMLSD},
		"MLST": {fn: (*session).handleMLST, quick: true},
		"SIZE": {fn: (*session).handleSIZE, arg: argRequired, quick: true},
		"MDTM": {fn: (*session).handleMDTM, arg: argRequired, quick: true},
		"MFMT": {fn: (*session).handleMFMT, arg: argRequired, write: true, quick: true},
		"DELE": {fn: (*session).handleDELE, arg: argRequired, write: true, quick: true},
		"MKD":  {fn: (*session).handleMKD, arg: argRequired, write: true, quick: true},
		"RMD":  {fn: (*session).handleRMD, arg: argRequired, write: true},
		"RNFR": {fn: (*session).handleRNFR, arg: argRequired, write: true, quick: true},
		"RNTO": {fn: (*session).handleRNTO, arg: argRequired, write: true, quick: true},
		"CWD":  {fn: (*session).handleCWD, arg: argRequired, quick: true},
		"CDUP": {fn: (*session).handleCDUP, arg: argNone},
		"PWD":  {fn: (*session).handlePWD, arg: argNone},
		"CKSM": {fn: (*session).handleCKSM, arg: argRequired},
		"SCKS": {fn: (*session).handleSCKS, arg: argRequired},
		"OPTS": {fn: (*session).handleOPTS, arg: argRequired},
		"SITE": {fn: (*session).handleSITE, arg: argRequired},
		"DCAU": {fn: (*session).handleDCAU, arg: argRequired},
		"PBSZ": {fn: (*session).handlePBSZ, arg: argRequired},
		"PROT": {fn: (*session).handlePROT, arg: argRequired},
		"DCSC": {fn: (*session).handleDCSC, arg: argRequired},
		"TREV": {fn: (*session).handleTREV, arg: argRequired},
		"ABOR": {fn: (*session).handleABOR, open: true, arg: argNone},
		"STAT": {fn: (*session).handleSTAT},
	}
	commands["XPWD"] = commands["PWD"]
	commands["XCUP"] = commands["CDUP"]
	commands["XMKD"] = commands["MKD"]
	commands["XRMD"] = commands["RMD"]
	commands["XCWD"] = commands["CWD"]
}

func isAnonymous(user string) bool {
	return strings.EqualFold(user, "anonymous") || strings.EqualFold(user, "ftp")
}

func (ss *session) handleUSER(arg string) bool {
	// A new login starts without the last one's stack, built for its user.
	ss.disk, ss.anonymous, ss.partStor = nil, false, false
	if ss.gsi.dn != "" && ss.protected.Load() != nil {
		ss.userGSI(arg)
		return true
	}
	ss.user, ss.loggedIn = arg, false
	ss.replyf(gridftp.CodeNeedPassword, "Password required for %s.", arg)
	return true
}

func (ss *session) handlePASS(arg string) bool {
	switch {
	case ss.user == "":
		ss.reply(gridftp.CodeBadSequence, "Login with USER first.")
		return true
	case ss.loggedIn:
		ss.reply(gridftp.CodeBadSequence, "Already logged in.")
		return true
	case ss.gsi.mapped:
		ss.loggedIn, ss.readOnly = true, false // the gridmap allowed it; the password means nothing
		ss.loggedInGSI()
	case ss.srv.Anonymous && isAnonymous(ss.user):
		ss.user, ss.anonymous = "anonymous", true
		ss.loggedIn, ss.readOnly = true, !ss.srv.AnonymousWrite
	default:
		keys := ss.loginKeys()
		if wait := ss.srv.loginThrottle().Try(keys...); wait > 0 {
			// The password is not even checked: a guess made now tells
			// nothing, whatever it is.
			ss.log.Warn("login refused: too many failures", "user", ss.user, "wait", wait)
			ss.replyf(gridftp.CodeNotAvailable, "Too many failed logins; try again in %v.", (wait + time.Second - 1).Truncate(time.Second))
			return false
		}
		ss.loggedIn, ss.readOnly = ss.srv.Auth != nil && ss.srv.Auth.Check(ss.user, arg), false
		if ss.loggedIn {
			ss.srv.loginThrottle().Succeeded(keys...)
		}
	}
	if !ss.loggedIn {
		ss.failures++
		ss.log.Info("login failed", "user", ss.user)
		ss.reply(gridftp.CodeNotLoggedIn, "Login incorrect.")
		return ss.failures < maxLoginFailures
	}
	ss.loggedInOnce.Store(true)
	ss.log.Info("login", "user", ss.user)
	ss.replyf(gridftp.CodeLoggedIn, "User %s logged in.", ss.user)
	return true
}

// loginKeys are what a password login of the session's user counts
// against: the account, then the client address, which may fail three
// times as often (many users may share it).
func (ss *session) loginKeys() []throttle.Key {
	free := ss.srv.loginFailures()
	return []throttle.Key{{Name: "user " + ss.user, Free: free}, {Name: "addr " + ss.addr, Free: 3 * free}}
}

func (ss *session) handleQUIT(string) bool {
	ss.reply(gridftp.CodeClosing, "Goodbye.")
	return false
}

// features are the FEAT lines after the checksum line.
var features = []string{
	" DCAU",
	" DCSC P,D",
	" DATATLS", // DCAU A with a DCSC credential, as ferry does it (datasec.go)
	" MFMT",
	" WHOAMI",
	" UTF8",
	" LANG EN",
	" PARALLEL",
	" SIZE",
	" MLST Type*;Size*;Modify*;Perm*;UNIX.mode*;UNIX.slink*;",
	" ERET",
	" ESTO",
	" SPAS",
	" SPOR",
	" REST STREAM",
	" MDTM",
	" TVFS",
	" CKSMLIVE", // OPTS CKSM Live=ALG; (livesum.go)
	" PASVSEND", // in MODE E, RETR after PASV: the receiver connects (senderStreams)
	" PARTSTOR", // SITE PARTSTOR ON: a whole STOR under the temporary name, renamed at its end (site.go)
}

func (ss *session) handleFEAT(string) bool {
	var ck strings.Builder
	ck.WriteString(" CKSM ")
	for i, n := range checksum.Names() {
		fmt.Fprintf(&ck, "%s:%d;", n, 10+i)
	}
	lines := append([]string{"Extensions supported", ck.String()}, features...)
	// OPTS RETR Parallelism=start,min,max: sending, streams are added up
	// to max while they add throughput; receiving, streams may join during
	// a transfer, up to MaxStreams, which the line names (grow.go).
	lines = append(lines, fmt.Sprintf(" STREAMGROW %d", ss.srv.maxStreams()), ss.srv.diskStackFeature())
	ss.reply(gridftp.CodeFeatures, append(lines, "End.")...)
	return true
}

func helpList(names []string) []string {
	slices.Sort(names)
	lines := []string{"The following commands are recognized:"}
	for i := 0; i < len(names); i += 8 {
		row := "   "
		for _, n := range names[i:min(i+8, len(names))] {
			row += fmt.Sprintf(" %-7s", n)
		}
		lines = append(lines, strings.TrimRight(row, " "))
	}
	return append(lines, "End")
}

func (ss *session) handleHELP(string) bool {
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	ss.reply(gridftp.CodeHelp, helpList(names)...)
	return true
}

func (ss *session) handleNOOP(string) bool {
	ss.reply(gridftp.CodeOK, "NOOP command successful.")
	return true
}

func (ss *session) handleSYST(string) bool {
	ss.reply(gridftp.CodeSystem, "UNIX Type: L8")
	return true
}

func (ss *session) handleTYPE(arg string) bool {
	t := strings.ToUpper(strings.Fields(arg)[0]) // dispatch ensures a non-blank argument
	switch t {
	case "I", "A", "L":
		ss.replyf(gridftp.CodeOK, "Type set to %s.", t)
	default:
		ss.replyf(gridftp.CodeParamNotSupported, "Type %s not supported.", arg)
	}
	return true
}

func (ss *session) handleSTRU(arg string) bool {
	if strings.EqualFold(arg, "F") {
		ss.reply(gridftp.CodeOK, "Structure set to F.")
	} else {
		ss.replyf(gridftp.CodeParamNotSupported, "Structure %s not supported.", arg)
	}
	return true
}

func (ss *session) handleMODE(arg string) bool {
	switch strings.ToUpper(arg) {
	case "S":
		if ss.modeE {
			ss.data.dropCache()
		}
		ss.modeE = false
	case "E":
		ss.modeE = true
	default:
		ss.replyf(gridftp.CodeBadArguments, "'MODE %s' unrecognized transfer mode.", arg)
		return true
	}
	ss.replyf(gridftp.CodeOK, "Mode set to %s.", strings.ToUpper(arg))
	return true
}

// handleALLO takes "ALLO SIZE [R RECORD]" (RFC 959): nothing is reserved,
// but a size past the largest file is refused at once.
func (ss *session) handleALLO(arg string) bool {
	if f := strings.Fields(arg); len(f) > 0 {
		if _, ok := ss.sizeArg(f[0], "allocate", "ALLO: expected SIZE [R RECORD-SIZE]."); !ok {
			return true
		}
	}
	ss.reply(gridftp.CodeOK, "ALLO command successful.")
	return true
}

func (ss *session) handleREST(arg string) bool {
	arg = strings.TrimSpace(arg)
	if strings.ContainsAny(arg, "-,") {
		rs, err := gridftp.ParseRanges(arg)
		if err != nil {
			ss.reply(gridftp.CodeBadArguments, "Bad restart range list.")
			return true
		}
		if err := ss.checkSize(rs.End()); err != nil {
			ss.errorReply("restart", err)
			return true
		}
		ss.restRanges, ss.restOffset = rs, 0
	} else {
		n, ok := ss.sizeArg(arg, "restart", "Bad restart offset.")
		if !ok {
			return true
		}
		ss.restOffset, ss.restRanges = n, gridftp.Ranges{}
	}
	ss.restSet = true
	ss.reply(gridftp.CodePending, "Restart Marker OK. Send STORE or RETR to initiate transfer.")
	return true
}

func (ss *session) handleSIZE(arg string) bool {
	info, err := ss.srv.FS.Stat(ss.ctx, ss.path(arg))
	if err != nil {
		ss.errorReply("stat", err)
		return true
	}
	ss.replyf(gridftp.CodeFileStatus, "%d", info.Size)
	return true
}

func (ss *session) handleMDTM(arg string) bool {
	info, err := ss.srv.FS.Stat(ss.ctx, ss.path(arg))
	if err != nil {
		ss.errorReply("stat", err)
		return true
	}
	ss.reply(gridftp.CodeFileStatus, info.ModTime.UTC().Format(gridftp.TimeLayout))
	return true
}

// parseTimeAndPath splits "YYYYMMDDHHMMSS[.fff] path".
func parseTimeAndPath(arg string) (time.Time, string, error) {
	ts, p, ok := strings.Cut(arg, " ")
	if !ok || p == "" {
		return time.Time{}, "", errors.New("expected TIME PATH")
	}
	ts, _, _ = strings.Cut(ts, ".")
	t, err := time.ParseInLocation(gridftp.TimeLayout, ts, time.UTC)
	if err != nil {
		return time.Time{}, "", errors.New("time must be YYYYMMDDHHMMSS")
	}
	return t, p, nil
}

func (ss *session) handleMFMT(arg string) bool {
	t, p, err := parseTimeAndPath(arg)
	if err != nil {
		ss.replyf(gridftp.CodeBadArguments, "MFMT: %v.", err)
		return true
	}
	if err := ss.srv.FS.Chtimes(ss.ctx, ss.path(p), t); err != nil {
		ss.errorReply("utime", err)
		return true
	}
	ss.replyf(gridftp.CodeFileStatus, "Modify=%s; %s", t.Format(gridftp.TimeLayout), p)
	return true
}

func (ss *session) handleDELE(arg string) bool {
	p := ss.path(arg)
	info, err := ss.srv.FS.Stat(ss.ctx, p)
	if err == nil && info.IsDir() {
		err = fmt.Errorf("dele %s: %w", p, storage.ErrIsDir)
	}
	if err == nil {
		ss.srv.sums.forget(p, 0, -1)
		err = ss.srv.FS.Remove(ss.ctx, p)
	}
	if err != nil {
		ss.errorReply("unlink", err)
		return true
	}
	ss.reply(gridftp.CodeFileActionOK, "DELE command successful.")
	return true
}

func (ss *session) handleMKD(arg string) bool {
	p := ss.path(arg)
	if err := ss.srv.FS.Mkdir(ss.ctx, p); err != nil {
		ss.errorReply("mkdir", err)
		return true
	}
	ss.replyf(gridftp.CodePathCreated, "Directory %s created successfully.", quotePath(p))
	return true
}

func (ss *session) handleRMD(arg string) bool {
	p := ss.path(arg)
	info, err := ss.srv.FS.Stat(ss.ctx, p)
	if err == nil && !info.IsDir() {
		err = fmt.Errorf("rmd %s: %w", p, storage.ErrNotDir)
	}
	if err == nil && p == "/" {
		err = fmt.Errorf("rmd /: %w", fs.ErrPermission)
	}
	if err == nil {
		err = ss.srv.FS.Remove(ss.ctx, p)
	}
	if err != nil {
		ss.errorReply("rmdir", err)
		return true
	}
	ss.reply(gridftp.CodeFileActionOK, "RMD command successful.")
	return true
}

func (ss *session) handleRNFR(arg string) bool {
	p := ss.path(arg)
	if _, err := ss.srv.FS.Stat(ss.ctx, p); err != nil {
		ss.errorReply("stat", err)
		return true
	}
	ss.rnfr = p
	ss.reply(gridftp.CodePending, "OK. Send RNTO with destination name.")
	return true
}

func (ss *session) handleRNTO(arg string) bool {
	from := ss.rnfr
	ss.rnfr = ""
	if from == "" {
		ss.reply(gridftp.CodeBadSequence, "RNTO must follow RNFR.")
		return true
	}
	if err := ss.rename(from, ss.path(arg)); err != nil {
		ss.errorReply("rename", err)
		return true
	}
	ss.reply(gridftp.CodeFileActionOK, "OK.")
	return true
}

// rename moves from to to, replacing a file there (RNTO, SITE PARTSTOR):
// the checksums known of either are forgotten.
func (ss *session) rename(from, to string) error {
	ss.srv.sums.forget(from, 0, -1)
	ss.srv.sums.forget(to, 0, -1)
	return ss.srv.FS.Rename(ss.ctx, from, to)
}

func (ss *session) handleCWD(arg string) bool {
	p := ss.path(arg)
	info, err := ss.srv.FS.Stat(ss.ctx, p)
	if err == nil && !info.IsDir() {
		err = fmt.Errorf("cwd %s: %w", p, storage.ErrNotDir)
	}
	if err != nil {
		ss.errorReply("stat", err)
		return true
	}
	ss.cwd = p
	ss.reply(gridftp.CodeFileActionOK, "CWD command successful.")
	return true
}

func (ss *session) handleCDUP(string) bool { return ss.handleCWD("..") }

func (ss *session) handlePWD(string) bool {
	ss.replyf(gridftp.CodePathCreated, "%s is current directory.", quotePath(ss.cwd))
	return true
}

// quotePath quotes a path for a 257 reply (RFC 959: double any quote).
func quotePath(p string) string { return `"` + strings.ReplaceAll(p, `"`, `""`) + `"` }

// parseCksmArgs splits "ALG OFFSET LENGTH PATH".
func parseCksmArgs(arg string) (alg string, off, length int64, p string, err error) {
	f := strings.SplitN(arg, " ", 4)
	if len(f) != 4 || f[3] == "" {
		return "", 0, 0, "", errors.New("expected ALGORITHM OFFSET LENGTH PATH")
	}
	off, err1 := strconv.ParseInt(f[1], 10, 64)
	length, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || off < 0 || length < -1 {
		return "", 0, 0, "", errors.New("bad offset or length")
	}
	return f[0], off, length, f[3], nil
}

func (ss *session) handleCKSM(arg string) bool {
	alg, off, length, p, err := parseCksmArgs(arg)
	if err != nil {
		ss.replyf(gridftp.CodeBadArguments, "CKSM: %v.", err)
		return true
	}
	sum, err := ss.checksum(alg, ss.path(p), off, length)
	if err != nil {
		ss.errorReply("checksum", err)
		return true
	}
	ss.reply(gridftp.CodeFileStatus, sum)
	return true
}

// checksum computes alg over a range of the file at p; a length of -1
// runs to the end the file has now, however it grows meanwhile. ABOR
// interrupts it. A whole file's sum is the driver's, when it is a
// storage.Checksummer that can tell.
func (ss *session) checksum(alg, p string, off, length int64) (string, error) {
	if _, err := checksum.New(alg); err != nil {
		return "", err
	}
	ctx, done := ss.transferContext()
	defer done()
	info, err := ss.srv.FS.Stat(ctx, p)
	if err != nil {
		return "", err
	}
	n := length
	if n < 0 {
		n = max(info.Size-off, 0)
	}
	if cs, ok := ss.srv.FS.(storage.Checksummer); ok && off == 0 && n == info.Size {
		// The driver knows whole files' sums, perhaps of data it no
		// longer holds (a sink, an object store's metadata).
		sum, err := cs.Checksum(ctx, p, alg)
		if !errors.Is(err, errors.ErrUnsupported) {
			return sum, err
		}
	}
	canon, _ := checksum.Canonical(alg)
	if sum, ok := ss.srv.sums.get(sumKey{path: p, off: off, n: n, alg: canon}); ok && n != 0 {
		return sum, nil // hashed while the data moved
	}
	return ss.sum(ctx, alg, p, off, n)
}

func (ss *session) handleSCKS(arg string) bool {
	alg, sum, ok := strings.Cut(strings.TrimSpace(arg), " ")
	if !ok || sum == "" {
		ss.reply(gridftp.CodeBadArguments, "SCKS: expected ALGORITHM CHECKSUM.")
		return true
	}
	if _, err := checksum.New(alg); err != nil {
		ss.errorReply("checksum", err)
		return true
	}
	ss.scks = &expectedSum{alg: alg, sum: strings.ToLower(sum)}
	ss.reply(gridftp.CodeOK, "SCKS OK.")
	return true
}

func (ss *session) handleOPTS(arg string) bool {
	what, rest, _ := strings.Cut(arg, " ")
	switch strings.ToUpper(what) {
	case "RETR":
		o, err := gridftp.ParseRetrOptions(rest)
		if err != nil {
			ss.reply(gridftp.CodeSyntaxError, "OPTS failed.")
			return true
		}
		if o.Parallelism > 0 {
			ss.parallel = min(o.Parallelism, ss.srv.maxStreams())
			ss.grow = growth{max: min(o.MaxParallelism, ss.srv.maxStreams())}
		}
		if o.Markers > 0 {
			ss.retrMarks = time.Duration(o.Markers) * time.Second
		}
		if o.HasLayout || o.BlockSize > 0 {
			ss.layout = o.Layout
		}
	case "CKSM":
		if err := ss.optsCKSM(rest); err != nil {
			ss.replyf(gridftp.CodeBadArguments, "OPTS CKSM: %v.", err)
			return true
		}
	case "PASV":
		if err := ss.optsPASV(rest); err != nil {
			ss.replyf(gridftp.CodeBadArguments, "OPTS PASV: %v.", err)
			return true
		}
	case "UTF8", "MLST", "MLSD":
	default:
		ss.reply(gridftp.CodeSyntaxError, "OPTS failed.")
		return true
	}
	ss.reply(gridftp.CodeOK, "OPTS Command Successful.")
	return true
}

// optsCKSM reads "OPTS CKSM Live=ALG;" (or Live=none;); other items, such
// as GCT's markers=n, are accepted and ignored.
func (ss *session) optsCKSM(arg string) error {
	for _, item := range strings.Split(arg, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(item), "=")
		if !strings.EqualFold(k, "live") {
			continue
		}
		if strings.EqualFold(v, "none") {
			ss.liveAlg = ""
			continue
		}
		alg, err := checksum.Canonical(v)
		if err != nil {
			return err
		}
		ss.liveAlg = alg
	}
	return nil
}

func (ss *session) handlePBSZ(arg string) bool {
	n, err := strconv.ParseUint(strings.TrimSpace(arg), 10, 32)
	if err != nil {
		ss.reply(gridftp.CodeBadArguments, "Bad PBSZ value.")
		return true
	}
	ss.replyf(gridftp.CodeOK, "PBSZ=%d", n)
	return true
}

func (ss *session) handleTREV(arg string) bool {
	f := strings.Fields(arg)
	if len(f) != 2 {
		ss.reply(gridftp.CodeBadArguments, "TREV: expected EVENT INTERVAL.")
		return true
	}
	if _, err := strconv.Atoi(f[1]); err != nil {
		ss.reply(gridftp.CodeBadArguments, "TREV: bad interval.")
		return true
	}
	ss.reply(gridftp.CodeOK, "TREV command successful.")
	return true
}

func (ss *session) handleABOR(string) bool {
	ss.reply(gridftp.CodeTransferComplete, "ABOR command successful.")
	return true
}

func (ss *session) handleSTAT(arg string) bool {
	if arg == "" {
		ss.reply(gridftp.CodeStatus, "GridFTP server status.")
		return true
	}
	p := ss.path(arg)
	info, err := ss.srv.FS.Stat(ss.ctx, p)
	if err != nil {
		ss.errorReply("stat", err)
		return true
	}
	ss.reply(gridftp.CodeStatus, "status of "+arg, " "+listLine(info), "End.")
	return true
}
