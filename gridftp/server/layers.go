package server

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"ferry/gridftp"
	"ferry/stack"
)

// The storage side of a session's transfers is a stack of layers (package
// stack), file alone unless SITE SETDISKSTACK chose another; many-file
// layers take their members from SITE MEMBERS and report them in 113
// replies (gridftp/members.go).

// Limits on SITE MEMBERS: the names one transfer may name, and their bytes.
const (
	maxMembers     = 1 << 17
	maxMemberBytes = 32 << 20
)

// memberFlush is how often a transfer's member results go out while it
// runs, and how many at most wait for it.
const (
	memberFlush = 200 * time.Millisecond
	memberBatch = 512
)

// layers are the kinds of layer sessions may choose.
func (s *Server) layers() stack.Registry {
	if s.Layers != nil {
		return s.Layers
	}
	return stack.Kinds()
}

// diskStackFeature is the FEAT line naming the layers on offer.
func (s *Server) diskStackFeature() string {
	names := make([]string, 0, len(s.layers()))
	for n := range s.layers() {
		names = append(names, n)
	}
	slices.Sort(names)
	return " DISKSTACK " + strings.Join(names, ",")
}

// siteSETDISKSTACK chooses the session's stack, "default" the file layer,
// in GCT's grammar and with GCT's replies.
func (ss *session) siteSETDISKSTACK(arg string) {
	if arg == "" {
		ss.reply(gridftp.CodeBadArguments, "Syntax error in parameters or arguments.")
		return
	}
	if strings.EqualFold(arg, "default") {
		ss.disk = nil
		ss.reply(gridftp.CodeFileActionOK, "OK.")
		return
	}
	entries, err := stack.Parse(arg)
	var s *stack.Stack
	if err == nil {
		s, err = stack.Build(arg, entries, ss.srv.layers(), ss.stackEnv())
	}
	if err != nil {
		why := []string{err.Error()}
		if r, ok := err.(*stack.Refusal); ok {
			why = r.Lines
		}
		lines := []string{"Setting filesystem driver stack failed."}
		for _, l := range why {
			lines = append(lines, fmt.Sprintf("%d-%s", gridftp.CodeSyntaxError, l))
		}
		ss.reply(gridftp.CodeSyntaxError, append(lines, "End.")...)
		return
	}
	ss.log.Debug("disk stack", "stack", gridftp.Redact(arg))
	ss.disk = s
	ss.reply(gridftp.CodeFileActionOK, "OK.")
}

func (ss *session) stackEnv() stack.Env {
	env := stack.Env{FS: ss.srv.FS, ReadOnly: ss.readOnly, Anonymous: ss.anonymous, Log: ss.log, Dial: ss.dialOut, Reserve: ss.reserveFanout}
	if ss.gsi.mapped {
		env.User = ss.user
	}
	if d, ok := ss.srv.FS.(interface{ Dir() string }); ok {
		env.Dir = d.Dir()
	}
	if limit, ok := ss.srv.fileSizeLimit(); ok {
		env.MaxFile = limit
	}
	if d := ss.gsi.delegated; d != nil && ss.srv.GSI != nil {
		env.Grid = &stack.GridCredential{Chain: d.Chain, Key: d.Key, Verify: ss.srv.GSI.Verify}
	}
	return env
}

// sessionStack is the stack transfers go through now.
func (ss *session) sessionStack() *stack.Stack {
	if ss.disk == nil {
		s, err := stack.Build(stack.FileLayer, []stack.Entry{{Name: stack.FileLayer}}, stack.Kinds(), ss.stackEnv())
		if err != nil {
			panic(err) // the file layer always builds
		}
		ss.disk = s
	}
	return ss.disk
}

// siteMEMBERS adds names to the members of the next transfer.
func (ss *session) siteMEMBERS(arg string) {
	names := strings.Fields(arg)
	size := 0
	for _, n := range ss.members {
		size += len(n)
	}
	for _, f := range names {
		n, err := gridftp.DecodeName(f)
		if err != nil {
			ss.reply(gridftp.CodeBadArguments, "SITE MEMBERS: bad name "+f+".")
			return
		}
		size += len(n)
		if len(ss.members) >= maxMembers || size > maxMemberBytes {
			ss.members = nil
			ss.replyf(gridftp.CodeBadArguments, "SITE MEMBERS: more than %d names or %d MiB for one transfer; the list is dropped.", maxMembers, maxMemberBytes>>20)
			return
		}
		ss.members = append(ss.members, n)
	}
	ss.replyf(gridftp.CodeOK, "%d members.", len(ss.members))
}

// transferFor makes the stack's view of a transfer of p, taking the
// members named for it, with a reporter that sends 113 replies while it
// runs. Call done before the final reply.
func (ss *session) transferFor(p string) (t *stack.Transfer, done func()) {
	t = &stack.Transfer{Name: p, Members: ss.members}
	ss.members = nil
	rep := &memberReporter{ss: ss, stop: make(chan struct{})}
	t.Report = rep.add
	return t, rep.done
}

// memberReporter gathers a transfer's member results into 113 replies,
// sent every memberFlush from the first result on, and at the end.
type memberReporter struct {
	ss      *session
	start   sync.Once
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	pending []gridftp.Member
}

func (r *memberReporter) add(res stack.Result) {
	r.start.Do(func() {
		r.wg.Add(1)
		go r.tick()
	})
	m := gridftp.Member{Name: res.Name, Size: res.Size, Sum: res.Sum}
	if res.Err != nil {
		k := replyFor(res.Err)
		r.ss.log.Debug("member failed", "member", res.Name, "err", res.Err)
		text := k.text
		if se, ok := errors.AsType[*stack.ShownError](res.Err); ok {
			text = se.Text
		}
		m.Fault = &gridftp.Reply{Code: k.code, Lines: []string{fmt.Sprintf("GlobusError: v=1 c=%s: %s", k.class, text)}}
	}
	r.mu.Lock()
	r.pending = append(r.pending, m)
	full := len(r.pending) >= memberBatch
	r.mu.Unlock()
	if full {
		r.flush()
	}
}

func (r *memberReporter) tick() {
	defer r.wg.Done()
	t := time.NewTicker(memberFlush)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.flush()
		case <-r.stop:
			return
		}
	}
}

// done stops the ticks and sends what is left.
func (r *memberReporter) done() {
	r.start.Do(func() {}) // no ticks from here on
	close(r.stop)
	r.wg.Wait()
	r.flush()
}

func (r *memberReporter) flush() {
	r.mu.Lock()
	defer r.mu.Unlock() // held while sending, so that replies keep the order of results
	if len(r.pending) == 0 {
		return
	}
	r.ss.send(gridftp.MembersReply(r.pending))
	r.pending = r.pending[:0]
}
