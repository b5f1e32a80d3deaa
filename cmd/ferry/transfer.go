package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"ferry/internal/synclevel"
	"ferry/service/api"
)

// syncName names a task's sync level, given by its API number.
func syncName(n *int) string {
	l, err := synclevel.FromAPI(n)
	switch {
	case err != nil:
		return strconv.Itoa(*n)
	case l == synclevel.None:
		return "none (always copy)"
	}
	return l.String()
}

// filterFlag is --include or --exclude: each use adds a rule, in the order
// given on the command line.
type filterFlag struct {
	rules  *[]api.FilterRule
	method string
}

func (f filterFlag) String() string { return "" }
func (f filterFlag) Type() string   { return "GLOB" }
func (f filterFlag) Set(glob string) error {
	*f.rules = append(*f.rules, api.FilterRule{Method: f.method, Name: glob})
	return nil
}

// transferOpts are the flags of ferry transfer.
type transferOpts struct {
	recursive, verify, noVerify, preserve, deleteExtra, dryRun, encrypt, compress bool
	skipSourceErrors, failOnQuota                                                 bool

	syncLevel, batch, label, deadline, algorithm, submissionID, notify, tar string
	filters                                                                 []api.FilterRule
}

// request builds the transfer document of SRC_EP[:PATH] DST_EP[:PATH]...
// and the flags; batch is --batch's input (nil without --batch). Several
// destinations make a transfer to each (the document's destinations).
func (o *transferOpts) request(src string, dsts []string, batch io.Reader, now time.Time) (api.Transfer, error) {
	s, err := parseEPPath(src, batch == nil)
	if err != nil {
		return api.Transfer{}, err
	}
	var ds []epPath
	for _, dst := range dsts {
		d, err := parseEPPath(dst, batch == nil)
		if err != nil {
			return api.Transfer{}, err
		}
		ds = append(ds, d)
	}
	d := ds[0]
	t := api.Transfer{
		DataType: "transfer", SubmissionID: o.submissionID, Label: o.label,
		SourceEndpoint: s.ep, DestinationEndpoint: d.ep,
		VerifyChecksum: o.verify && !o.noVerify, ChecksumAlgorithm: o.algorithm, PreserveTimestamp: o.preserve, EncryptData: o.encrypt,
		DeleteDestinationExtra: o.deleteExtra, FilterRules: o.filters, Tar: o.tar, Compress: o.compress,
		SkipSourceErrors: o.skipSourceErrors, FailOnQuotaErrors: o.failOnQuota,
	}
	level, err := synclevel.Parse(o.syncLevel)
	if err != nil {
		return t, usagef("%v", err)
	}
	t.SyncLevel = level.API()
	if o.deadline != "" {
		if t.Deadline, err = parseDeadline(o.deadline, now); err != nil {
			return t, usagef("--deadline %q: %v", o.deadline, err)
		}
	}
	switch o.notify {
	case "", "on":
	case "off":
		off := false
		t.NotifyOnSucceeded, t.NotifyOnFailed, t.NotifyOnInactive = &off, &off, &off
	default:
		return t, usagef("--notify %q: want on or off", o.notify)
	}
	if batch == nil {
		t.Data = []api.TransferItem{{DataType: "transfer_item", SourcePath: s.path, DestinationPath: d.path, Recursive: o.recursive}}
	} else {
		if o.recursive {
			return t, usagef("-r does not go with --batch: put --recursive on the batch lines that need it")
		}
		if t.Data, err = parseBatch(batch, s.path, ""); err != nil {
			return t, err
		}
	}
	if len(ds) > 1 {
		t.DestinationEndpoint = ""
	}
	raw := make([]string, len(t.Data))
	for i := range t.Data {
		raw[i] = t.Data[i].DestinationPath
		if batch != nil {
			t.Data[i].DestinationPath = underBase(d.path, raw[i])
		}
	}
	for k, dk := range ds {
		if len(ds) == 1 {
			break
		}
		td := api.TransferDestination{DataType: "transfer_destination", Endpoint: dk.ep}
		if k > 0 {
			for _, p := range raw {
				if batch == nil {
					p = dk.path
				} else {
					p = underBase(dk.path, p)
				}
				td.DestinationPaths = append(td.DestinationPaths, p)
			}
		}
		t.Destinations = append(t.Destinations, td)
	}
	return t, nil
}

// parseBatch reads --batch input: a line per item, "[--recursive|-r] SRC
// DST", words split as a shell would, # starting a comment. Relative paths
// are relative to srcBase and dstBase when those are given, as in
// globus-cli.
func parseBatch(r io.Reader, srcBase, dstBase string) ([]api.TransferItem, error) {
	var items []api.TransferItem
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		words, err := shellWords(sc.Text())
		if err != nil {
			return nil, usagef("--batch line %d: %v", n, err)
		}
		if len(words) == 0 {
			continue
		}
		it := api.TransferItem{DataType: "transfer_item"}
		var paths []string
		for _, w := range words {
			switch {
			case w == "-r" || w == "--recursive":
				it.Recursive = true
			case strings.HasPrefix(w, "-") && len(w) > 1:
				return nil, usagef("--batch line %d: unknown option %q (want --recursive or -r)", n, w)
			default:
				paths = append(paths, w)
			}
		}
		if len(paths) != 2 {
			return nil, usagef("--batch line %d: want SOURCE_PATH DEST_PATH, got %d paths", n, len(paths))
		}
		it.SourcePath, it.DestinationPath = underBase(srcBase, paths[0]), underBase(dstBase, paths[1])
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--batch: %w", err)
	}
	if len(items) == 0 {
		return nil, usagef("--batch: no items")
	}
	return items, nil
}

// underBase puts a relative path under base, keeping a trailing slash.
func underBase(base, p string) string {
	if base == "" || path.IsAbs(p) {
		return p
	}
	return strings.TrimSuffix(base, "/") + "/" + p
}

// shellWords splits a line into words as a POSIX shell would: blanks
// (and a CR, for files from Windows) separate, '...' and "..." quote, a backslash escapes (in "..." only " and
// itself), # at the start of a word comments out the rest.
func shellWords(line string) ([]string, error) {
	var (
		words []string
		w     strings.Builder
		in    bool // inside a word
		quote rune
	)
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == '\'':
			w.WriteRune(r)
		case quote == '"' && r == '\\' && i+1 < len(rs) && (rs[i+1] == '"' || rs[i+1] == '\\'):
			i++
			w.WriteRune(rs[i])
		case quote == '"':
			w.WriteRune(r)
		case r == '\\':
			if i+1 == len(rs) {
				return nil, fmt.Errorf("a backslash ends the line")
			}
			i++
			w.WriteRune(rs[i])
			in = true
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t' || r == '\r':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		case r == '#' && !in:
			return words, nil
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}

// printDryRun shows what ferry transfer --dry-run would submit.
func (c *cli) printDryRun(cmd *cobra.Command, t api.Transfer) error {
	return c.print(cmd, t, func(w io.Writer) {
		to := t.DestinationEndpoint
		for i, d := range t.Destinations {
			if i > 0 {
				to += ", "
			}
			to += d.Endpoint
		}
		fmt.Fprintf(w, "would transfer from %s to %s:\n", t.SourceEndpoint, to)
		for i, it := range t.Data {
			r := ""
			if it.Recursive {
				r = "(recursive)"
			}
			row(w, "  "+it.SourcePath, "->", it.DestinationPath, r)
			for _, d := range t.Destinations[min(1, len(t.Destinations)):] {
				row(w, "", "->", d.Endpoint+":"+d.DestinationPaths[i], "")
			}
		}
		var opts []string
		add := func(on bool, format string, args ...any) {
			if on {
				opts = append(opts, fmt.Sprintf(format, args...))
			}
		}
		add(t.Label != "", "label %q", t.Label)
		add(t.SyncLevel != nil, "sync level %s", syncName(t.SyncLevel))
		add(t.VerifyChecksum, "verify checksums")
		add(t.EncryptData, "encrypt data")
		add(t.ChecksumAlgorithm != "", "checksum algorithm %s", t.ChecksumAlgorithm)
		add(t.PreserveTimestamp, "preserve timestamps")
		add(t.Tar != "", "tar %s", t.Tar)
		add(t.Compress, "compress")
		add(t.DeleteDestinationExtra, "delete destination extras")
		add(!t.Deadline.IsZero(), "deadline %s", when(t.Deadline))
		for _, f := range t.FilterRules {
			add(true, "%s %s", f.Method, f.Name)
		}
		add(t.NotifyOnSucceeded != nil, "no notifications")
		add(t.SubmissionID != "", "submission ID %s", t.SubmissionID)
		if len(opts) > 0 {
			fmt.Fprintf(w, "with: %s\n", strings.Join(opts, ", "))
		}
	})
}

func newTransferCmd(c *cli) *cobra.Command {
	var o transferOpts
	cmd := &cobra.Command{
		Use:   "transfer SRC_ENDPOINT:PATH DST_ENDPOINT:PATH [DST_ENDPOINT:PATH...] [flags]",
		Short: "Submit a transfer task to the service and print its task ID",
		Long: `Submit a transfer between two endpoints. The service runs it whether or not you
stay: follow it with ferry task wait, show, events. An endpoint is its UUID,
owner#name or the name of one of yours. Directories need -r.

With --batch FILE (- for standard input) each line is one item,
"[--recursive] SRC_PATH DST_PATH", # starting a comment; the paths on the
command line may then be left out, and relative batch paths are under them.

With several destinations, one task copies the items to each: the source
sends every file once, through a tree of the destinations' ferry servers
where they forward (ferry gridftp --multicast), and the service repairs what
the tree missed; ferry task show lists each destination's progress.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var batch io.Reader
			switch o.batch {
			case "":
			case "-":
				// All of it first: over SSH, a read past the gateway's
				// limit is told as such, not as a cut line.
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("--batch -: %w", err)
				}
				batch = bytes.NewReader(b)
			default:
				if c.remote != nil {
					return usagef("--batch %s: over SSH, give --batch - and send the items on standard input", o.batch)
				}
				f, err := os.Open(o.batch)
				if err != nil {
					return usagef("--batch: %v", err)
				}
				defer f.Close()
				batch = f
			}
			t, err := o.request(args[0], args[1:], batch, time.Now())
			if err != nil {
				return err
			}
			if o.dryRun {
				return c.printDryRun(cmd, t)
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			res, err := cl.Transfer(cmd.Context(), t)
			if err != nil {
				return err
			}
			return c.print(cmd, res, func(w io.Writer) { fmt.Fprintln(w, res.TaskID) })
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.recursive, "recursive", "r", false, "transfer a directory and everything under it")
	f.StringVarP(&o.syncLevel, "sync-level", "s", "", synclevel.Usage)
	f.StringVar(&o.batch, "batch", "", "read the items from FILE, - for standard input")
	f.StringVar(&o.label, "label", "", "a label for the task")
	f.StringVar(&o.deadline, "deadline", "", "give up then: a duration from now (2h) or an RFC 3339 time (default: the service's)")
	f.BoolVar(&o.verify, "verify-checksum", true, "compare checksums at both ends")
	f.BoolVar(&o.noVerify, "no-verify-checksum", false, "do not compare checksums")
	f.BoolVar(&o.encrypt, "encrypt-data", false, "encrypt the data channels (both endpoints must be ferry servers; theirs are always authenticated)")
	f.StringVar(&o.algorithm, "checksum-algorithm", "", "MD5, ADLER32, SHA1, SHA256, SHA512, CRC32C or XXH128 (default: the fastest both ends have)")
	f.BoolVar(&o.preserve, "preserve-timestamp", false, "give copies the source's modification time")
	f.BoolVar(&o.compress, "compress", false, "compress data in flight (zstd; both endpoints must be ferry servers); worth it only when the link, not the CPU, is the limit")
	f.StringVar(&o.tar, "tar", "", "move trees of small files as tar streams: auto (default: when the file mix favours it), always or never")
	f.BoolVar(&o.deleteExtra, "delete-destination-extra", false, "delete destination files the source does not have (with -r)")
	f.BoolVar(&o.skipSourceErrors, "skip-source-errors", false, "skip source files and directories that are missing or not readable when the task reaches them, "+
		"instead of failing the task (ferry task show --skipped-errors lists them); default off")
	f.BoolVar(&o.failOnQuota, "fail-on-quota-errors", false, "fail the task at once when the destination is full or over quota; "+
		"default off: the task waits INACTIVE (NO_SPACE) until space is freed and it is resumed")
	f.Var(filterFlag{&o.filters, "include"}, "include", "with -r, transfer only names matching GLOB (repeatable; rules apply in order)")
	f.Var(filterFlag{&o.filters, "exclude"}, "exclude", "with -r, skip names matching GLOB (repeatable; rules apply in order)")
	f.StringVar(&o.submissionID, "submission-id", "", "an ID that makes a re-submission run the task only once")
	f.StringVar(&o.notify, "notify", "on", "notify (e-mail, webhook) when the task ends or stalls: on or off")
	f.BoolVar(&o.dryRun, "dry-run", false, "print what would be submitted and submit nothing")
	return c.flags(cmd)
}

func newScpCmd(c *cli) *cobra.Command {
	var (
		o    transferOpts
		wait waitOpts
	)
	cmd := &cobra.Command{
		Use:   "scp [-r] [-s SYNC_LEVEL] SRC_ENDPOINT:PATH DST_ENDPOINT:PATH",
		Short: "Copy between endpoints scp-style: submit, then wait with a progress bar",
		Long: `Copy as scp does, through the service: a DST ending in / receives SRC under its
own name. ferry scp submits a transfer task and waits for it, with a progress
bar on a terminal; its exit status is that of ferry task wait.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := wait.parse()
			if err != nil {
				return err
			}
			o.verify = true
			t, err := o.request(args[0], args[1:2], nil, time.Now())
			if err != nil {
				return err
			}
			if it := &t.Data[0]; strings.HasSuffix(it.DestinationPath, "/") {
				it.DestinationPath += path.Base(it.SourcePath)
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			res, err := cl.Transfer(cmd.Context(), t)
			if err != nil {
				return err
			}
			return c.wait(cmd, cl, res.TaskID, w)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.recursive, "recursive", "r", false, "copy a directory and everything under it")
	f.StringVarP(&o.syncLevel, "sync-level", "s", "", synclevel.Usage)
	f.StringVar(&o.label, "label", "", "a label for the task")
	wait.register(f)
	return c.flags(cmd)
}
