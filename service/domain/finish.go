package domain

import (
	"fmt"
	"strings"

	"ferry/internal/synclevel"
)

// finishShown bounds the commands FinishCommands names: a task of many
// items is finished by submitting them again in one batch.
const finishShown = 3

// FinishCommands are the ferry transfer commands that finish what a
// transfer task that is over (SUCCEEDED or FAILED: canceled, deadline,
// a fatal error) left undone, one for each of its first items, with the
// task's options, and how many more items there are; for a delete task,
// the one ferry rm command that deletes its paths again. A transfer to
// several destinations has none.
//
// They ask for --sync-level size whatever level the task had: a file the
// task left partial (a cancel, a crash) is under its temporary name, never
// its final one (the engine renames a file only once it is whole and
// verified), so a final name of the right size is a whole file, and the
// transfer resumes the partial ones from their temporary files; exists or
// mtime would also do (no level skips a file of another size), but size
// says what is meant.
func FinishCommands(t Task) (cmds []string, more int) {
	if t.Type == TypeDelete && len(t.Items) > 0 {
		words := []string{"ferry", "rm"}
		if t.Items[0].Recursive {
			words = append(words, "-r")
		}
		if t.Options.IgnoreMissing {
			words = append(words, "--ignore-missing")
		}
		for _, it := range t.Items {
			words = append(words, shellQuote(t.SrcEndpoint+":"+it.Src))
		}
		return []string{strings.Join(words, " ")}, 0
	}
	if t.Type != TypeTransfer || len(t.Destinations) > 0 {
		return nil, 0
	}
	var opts []string
	add := func(on bool, flag ...string) {
		if on {
			opts = append(opts, flag...)
		}
	}
	o := t.Options
	add(true, "--sync-level", synclevel.Size.String())
	add(!o.VerifyChecksum, "--no-verify-checksum")
	add(o.ChecksumAlgorithm != "", "--checksum-algorithm", o.ChecksumAlgorithm)
	add(o.EncryptData, "--encrypt-data")
	add(o.PreserveTimestamp, "--preserve-timestamp")
	add(o.Tar != "", "--tar", o.Tar)
	add(o.Compress, "--compress")
	add(o.DeleteDestinationExtra, "--delete-destination-extra")
	add(o.SkipSourceErrors, "--skip-source-errors")
	add(o.FailOnQuotaErrors, "--fail-on-quota-errors")
	for _, f := range o.FilterRules {
		add(true, "--"+f.Method, shellQuote(f.Name))
	}
	for i, it := range t.Items {
		if i == finishShown {
			return cmds, len(t.Items) - finishShown
		}
		words := []string{"ferry", "transfer", shellQuote(t.SrcEndpoint + ":" + it.Src), shellQuote(t.DstEndpoint + ":" + it.Dst)}
		if it.Recursive {
			words = append(words, "-r")
		}
		cmds = append(cmds, strings.Join(append(words, opts...), " "))
	}
	return cmds, 0
}

// FinishAdvice says, for a transfer task that is over, what finishes the
// job (FinishCommands); "" when there is no such command.
func FinishAdvice(t Task) string {
	cmds, more := FinishCommands(t)
	if len(cmds) == 0 {
		return ""
	}
	s := "to finish the job, run: " + strings.Join(cmds, "; ")
	if more > 0 {
		s += fmt.Sprintf("; and the same for its %d more items (or submit them all with --batch and --sync-level %s)", more, synclevel.Size)
	}
	return s
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@%+=,#", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
