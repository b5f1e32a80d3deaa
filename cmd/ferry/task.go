package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"ferry/internal/plural"
	"ferry/service/api"
	"ferry/service/apiclient"
	"ferry/service/domain"
)

// waitOpts are the flags of the commands that wait for a task.
type waitOpts struct {
	timeout, interval string
	timeoutCode       int
	heartbeat         bool
}

func (o *waitOpts) register(f *pflag.FlagSet) {
	f.StringVar(&o.timeout, "timeout", "0", "give up after this long, in seconds or as a duration such as 2h (0: never)")
	f.StringVar(&o.interval, "polling-interval", "1", "once the task has run a while, ask the service this often (seconds, or a duration)")
	f.IntVar(&o.timeoutCode, "timeout-exit-code", exitTimeout, "exit status when --timeout ends the wait")
	f.BoolVarP(&o.heartbeat, "heartbeat", "H", false, "print a dot on standard error at each poll instead of the progress bar")
}

// waiter waits for tasks as the wait flags say.
type waiter struct {
	timeout, interval time.Duration
	timeoutCode       int
	heartbeat         bool
}

// parse checks the flags; commands that submit a task and wait for it call
// it before submitting.
func (o *waitOpts) parse() (waiter, error) {
	w := waiter{timeoutCode: o.timeoutCode, heartbeat: o.heartbeat}
	var err error
	if w.timeout, err = parseDuration("--timeout", o.timeout); err != nil {
		return w, err
	}
	if w.interval, err = parseDuration("--polling-interval", o.interval); err != nil {
		return w, err
	}
	if w.interval == 0 {
		return w, usagef("--polling-interval must be more than 0")
	}
	return w, nil
}

// firstPoll is the pause before the second look at a task. The pause
// doubles up to --polling-interval, so a short task is seen ending soon
// and a long one costs the service little.
const firstPoll = 5 * time.Millisecond

// wait waits for task id as w says, showing its progress on standard
// error (a bar on a terminal, or with -H dots), then prints the task. The
// error is nil only when the task SUCCEEDED.
func (c *cli) wait(cmd *cobra.Command, cl *apiclient.Client, id string, w waiter) error {
	errOut := cmd.ErrOrStderr()
	var (
		mu    sync.Mutex
		last  api.Task
		meter rateMeter
		dots  bool
	)
	b := startBar(errOut, !w.heartbeat && !c.json() && isTerminal(errOut, c.remote != nil && c.remote.tty), func() barState {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		return taskState(last, meter.rate(now), now)
	})
	t, err := w.poll(cmd.Context(), cl, id, func(t api.Task) {
		mu.Lock()
		last = t
		meter.observe(t.BytesTransferred, time.Now(), float64(t.EffectiveBytesPerSecond))
		mu.Unlock()
		if w.heartbeat && !domain.Done(t.Status) {
			fmt.Fprint(errOut, ".")
			dots = true
		}
	})
	b.stop()
	if dots {
		fmt.Fprintln(errOut)
	}
	if t.TaskID == "" {
		return err
	}
	if perr := c.print(cmd, t, func(w io.Writer) { fmt.Fprintln(w, summary(t)) }); perr != nil {
		return perr
	}
	if err == nil && t.Status != domain.StatusSucceeded {
		err = fmt.Errorf("task %s %s", id, t.Status) // why is in the summary, said once
	}
	return err
}

// poll asks for task id, passing each answer to seen, until the task ends
// or the timeout; it returns the last answer.
func (w waiter) poll(ctx context.Context, cl *apiclient.Client, id string, seen func(api.Task)) (api.Task, error) {
	start, pause := time.Now(), min(firstPoll, w.interval)
	for {
		t, err := cl.Task(ctx, id)
		if err != nil {
			return t, err
		}
		seen(t)
		if domain.Done(t.Status) {
			return t, nil
		}
		if w.timeout > 0 {
			left := w.timeout - time.Since(start)
			if left <= 0 {
				return t, &exitError{w.timeoutCode, fmt.Errorf("task %s is still %s after %v", id, status(t), w.timeout)}
			}
			pause = min(pause, left)
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return t, ctx.Err()
		}
		pause = min(2*pause, w.interval)
	}
}

// taskState is a task's progress for the bar, at rate (a rateMeter's).
func taskState(t api.Task, rate float64, now time.Time) barState {
	s := barState{
		Done:  t.SubtasksSucceeded + t.SubtasksFailed, // a delete task's paths, a transfer's files
		Files: t.SubtasksTotal, Moved: t.BytesTransferred, Bytes: t.BytesTotal, Rate: rate,
	}
	if !t.RequestTime.IsZero() {
		s.Elapsed = now.Sub(t.RequestTime)
	}
	return s
}

// status is a task's status with why: ACTIVE (Queued), FAILED
// (CANCELED: ...).
func status(t api.Task) string {
	switch {
	case t.FatalError != nil:
		return fmt.Sprintf("%s (%s: %s)", t.Status, t.FatalError.Code, t.FatalError.Description)
	case t.NiceStatus != "":
		return fmt.Sprintf("%s (%s)", t.Status, t.NiceStatus)
	}
	return t.Status
}

// summary is a task in one line: a delete task's paths, the files and
// directories it removed, the paths missing and failed; a transfer's
// files, bytes and rate.
func summary(t api.Task) string {
	if t.Type == domain.TypeDelete {
		c := domain.Counters{Files: t.Files, Directories: t.Directories, FilesTransferred: t.SubtasksSucceeded - t.FilesSkipped,
			FilesSkipped: t.FilesSkipped, FilesFailed: t.SubtasksFailed}
		return fmt.Sprintf("task %s %s: %s", t.TaskID, status(t), c.DeleteSummary())
	}
	return fmt.Sprintf("task %s %s: %s: %d transferred, %d skipped, %d failed; %s, %s/s; %s",
		t.TaskID, status(t), plural.Count(t.Files, "file"), t.FilesTransferred, t.FilesSkipped, t.SubtasksFailed,
		plural.Bytes(t.BytesTransferred), plural.Bytes(t.EffectiveBytesPerSecond), plural.Count(t.Faults, "fault"))
}

// taskRow is a task as a row of ferry task list.
func taskRow(w io.Writer, t api.Task) {
	dst := t.DestinationEndpointDisplayName
	if t.Type == domain.TypeDelete {
		dst = "-"
	}
	if n := len(t.Destinations); n > 1 {
		dst += fmt.Sprintf(" +%d", n-1)
	}
	row(w, t.TaskID, t.Status, t.Type, t.SourceEndpointDisplayName, dst,
		fmt.Sprintf("%d/%d", t.SubtasksSucceeded, t.SubtasksTotal), plural.Bytes(t.BytesTransferred), when(t.RequestTime), t.Label)
}

// newTaskListCmd is ferry task list, also known as ferry status.
func newTaskListCmd(c *cli, use string) *cobra.Command {
	var (
		q        api.TaskQuery
		statuses []string
		types    []string
	)
	cmd := &cobra.Command{
		Use:   use + " [TASK_ID...]",
		Short: "List your tasks, newest first, or the tasks named",
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			l := api.TaskList{DataType: "task_list"}
			if len(args) == 0 {
				q.Status, q.Type = statuses, types
				if l, err = cl.TaskList(cmd.Context(), q); err != nil {
					return err
				}
			}
			for _, id := range args {
				t, err := cl.Task(cmd.Context(), id)
				if err != nil {
					return err
				}
				l.Data = append(l.Data, t)
			}
			return c.table(cmd, l, []string{"TASK ID", "STATUS", "TYPE", "SOURCE", "DESTINATION", "FILES", "BYTES", "REQUESTED", "LABEL"}, func(w io.Writer) {
				for _, t := range l.Data {
					taskRow(w, t)
				}
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&statuses, "filter-status", nil, "only tasks in these states: ACTIVE, INACTIVE, SUCCEEDED, FAILED (comma-separated or repeated)")
	f.StringSliceVar(&types, "filter-type", nil, "only tasks of these types: TRANSFER, DELETE")
	f.StringVar(&q.Label, "filter-label", "", "only tasks whose label holds TEXT")
	f.IntVar(&q.Limit, "limit", 25, "at most this many (up to 1000)")
	f.IntVar(&q.Offset, "offset", 0, "skip this many first")
	return cmd
}

// newTaskShowCmd is ferry task show, also known as ferry details.
func newTaskShowCmd(c *cli, use string) *cobra.Command {
	var transfers, skipped, deleted, partial bool
	cmd := &cobra.Command{
		Use:   use + " TASK_ID [-t | --skipped-errors | --deleted | --partial]",
		Short: "Show a task in full, or (-t) the files it has transferred so far, the source paths it skipped for errors, the paths it deleted, or the files it left partial",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n := btoi(transfers) + btoi(skipped) + btoi(deleted) + btoi(partial); n > 1 {
				return usagef("-t, --skipped-errors, --deleted and --partial: give one")
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			switch {
			case transfers:
				return c.successfulTransfers(cmd, cl, args[0])
			case skipped:
				return c.skippedErrors(cmd, cl, args[0])
			case deleted:
				return c.deletedPaths(cmd, cl, args[0])
			case partial:
				return c.partialPaths(cmd, cl, args[0])
			}
			t, err := cl.Task(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			var used string
			if t.Type == domain.TypeTransfer && !c.json() {
				if used, err = startedAlgorithm(cmd.Context(), cl, t.TaskID); err != nil {
					return err
				}
			}
			return c.print(cmd, t, func(w io.Writer) {
				for _, f := range taskFields(t, used) {
					row(w, f[0]+":", f[1])
				}
			})
		},
	}
	cmd.Flags().BoolVarP(&transfers, "successful-transfers", "t", false, "list the files transferred so far, with their checksums")
	cmd.Flags().BoolVar(&skipped, "skipped-errors", false, "list the source paths skipped for errors (a task submitted with --skip-source-errors), and why")
	cmd.Flags().BoolVar(&deleted, "deleted", false, "list the paths deleted at the destination because the source lacks them (--delete-destination-extra), in order")
	cmd.Flags().BoolVar(&partial, "partial", false, "list the files the task started and did not finish, with the bytes known to be at the destination "+
		"(what a canceled or failed task left partial there)")
	return cmd
}

// btoi is 1 for true.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// startedAlgorithm is the checksum algorithm the task's latest start
// among its first events chose (its STARTED event's details); "" before
// it started.
func startedAlgorithm(ctx context.Context, cl *apiclient.Client, id string) (string, error) {
	l, err := cl.Events(ctx, id, api.Page{Limit: 100})
	if err != nil {
		return "", err
	}
	alg := ""
	for _, e := range l.Data {
		var d struct {
			Algorithm string `json:"checksum_algorithm"`
		}
		if e.Code == domain.EventStarted && json.Unmarshal([]byte(e.Details), &d) == nil {
			alg = cmp.Or(d.Algorithm, alg)
		}
	}
	return alg, nil
}

// checksumField is task show's Checksum Algorithm: the one the task asked
// for, else the one its start chose, else who will choose it.
func checksumField(requested, used string) string {
	const choice = "the fastest both endpoints offer"
	switch {
	case requested != "":
		return requested
	case used != "":
		return used + " (" + choice + ")"
	}
	return choice + " (chosen when the task starts)"
}

// taskFields is a task as ferry task show prints it; used is the checksum
// algorithm its start chose.
func taskFields(t api.Task, used string) [][2]string {
	n := func(v int64) string { return fmt.Sprint(v) }
	f := [][2]string{
		{"Task ID", t.TaskID},
		{"Label", t.Label},
		{"Type", t.Type},
		{"Status", status(t)},
		{"Cancel Requested", fmt.Sprint(t.CancelRequested)},
		{"Request Time", when(t.RequestTime)},
		{"Completion Time", when(t.CompletionTime)},
		{"Deadline", when(t.Deadline)},
		{"Source Endpoint", t.SourceEndpointDisplayName + " (" + t.SourceEndpointID + ")"},
	}
	switch {
	case len(t.Destinations) > 0:
		// Each destination's progress: files there (arrived + there
		// already) of the task's files, failures, bytes.
		for _, d := range t.Destinations {
			f = append(f, [2]string{"Destination Endpoint", fmt.Sprintf("%s (%s): %d/%s (%d transferred, %d skipped), %d failed, %s",
				d.EndpointDisplayName, d.EndpointID, d.FilesTransferred+d.FilesSkipped, plural.Count(t.Files, "file"), d.FilesTransferred, d.FilesSkipped,
				d.FilesFailed, plural.Bytes(d.BytesTransferred))})
		}
	case t.Type == domain.TypeTransfer:
		f = append(f, [2]string{"Destination Endpoint", t.DestinationEndpointDisplayName + " (" + t.DestinationEndpointID + ")"})
	}
	if t.Type == domain.TypeDelete { // its paths, and what deleting them removed
		return append(f, [][2]string{
			{"Paths", n(t.SubtasksTotal)},
			{"Paths Deleted", n(t.SubtasksSucceeded - t.FilesSkipped)},
			{"Paths Missing", n(t.FilesSkipped)},
			{"Paths Failed", n(t.SubtasksFailed)},
			{"Files Deleted", n(t.Files)},
			{"Directories Deleted", n(t.Directories)},
		}...)
	}
	f = append(f, [][2]string{
		{"Files", n(t.Files)},
		{"Directories", n(t.Directories)},
		{"Files Transferred", n(t.FilesTransferred)},
		{"Files Skipped", n(t.FilesSkipped)},
		{"Files Failed", n(t.SubtasksFailed)},
		{"Files Pending", n(t.SubtasksPending)},
		{"Bytes Transferred", n(t.BytesTransferred)},
		{"Bytes Total", n(t.BytesTotal)},
		{"Bytes Checksummed", n(t.BytesChecksummed)},
		{"Bytes Per Second", n(t.EffectiveBytesPerSecond)},
		{"Faults", n(t.Faults)},
	}...)
	if t.Type == domain.TypeTransfer {
		f = append(f, [][2]string{
			{"Sync Level", syncName(t.SyncLevel)},
			{"Verify Checksum", fmt.Sprint(t.VerifyChecksum)},
			{"Encrypt Data", fmt.Sprint(t.EncryptData)},
			{"Checksum Algorithm", checksumField(t.ChecksumAlgorithm, used)},
			{"Preserve Timestamp", fmt.Sprint(t.PreserveTimestamp)},
			{"Tar", cmp.Or(t.Tar, "auto")},
			{"Compress", fmt.Sprint(t.Compress)},
			{"Delete Destination Extra", fmt.Sprint(t.DeleteDestinationExtra)},
			{"Skip Source Errors", fmt.Sprint(t.SkipSourceErrors)},
			{"Fail On Quota Errors", fmt.Sprint(t.FailOnQuotaErrors)},
		}...)
		for _, r := range t.FilterRules {
			f = append(f, [2]string{"Filter", strings.TrimSpace(r.Method + " " + r.Name + " " + r.Type)})
		}
	}
	return f
}

// pages prints every page of a marker-paged list as it comes, holding
// one page at a time: get returns a page's entries and its next marker,
// row writes one entry as a table row (see row). With -F json it prints
// one document, the list's as the API gives one page of it (dataType,
// markers 0, every entry in DATA), its entries written one by one;
// without, the header (not with -F unix) and each page's rows, aligned
// page by page. An error mid-way leaves what was printed and is
// returned.
func pages[T any](c *cli, cmd *cobra.Command, dataType string, header []string, get func(api.MarkerQuery) ([]T, int64, error), row func(io.Writer, T)) error {
	out := bufio.NewWriter(cmd.OutOrStdout())
	defer out.Flush()
	var w io.Writer = out
	var tw *tabwriter.Writer
	switch c.format {
	case "json":
		dt, _ := json.Marshal(dataType)
		fmt.Fprintf(out, "{\n  \"DATA_TYPE\": %s,\n  \"marker\": 0,\n  \"next_marker\": 0,\n  \"DATA\": [", dt)
	case "text":
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		w = tw
		fallthrough
	default:
		if c.format != "unix" {
			fmt.Fprintln(w, strings.Join(header, "\t"))
		}
	}
	n := 0
	for q := (api.MarkerQuery{Limit: 1000}); ; {
		data, next, err := get(q)
		if err != nil {
			return err
		}
		for _, v := range data {
			if c.format != "json" {
				row(w, v)
				continue
			}
			b, err := json.MarshalIndent(v, "    ", "  ")
			if err != nil {
				return err
			}
			sep := ",\n    "
			if n == 0 {
				sep = "\n    "
			}
			out.WriteString(sep)
			out.Write(b)
			n++
		}
		if tw != nil {
			tw.Flush()
		}
		if err := out.Flush(); err != nil {
			return err
		}
		if next == 0 {
			break
		}
		q.Marker = next
	}
	if c.format == "json" {
		if n > 0 {
			out.WriteString("\n  ")
		}
		out.WriteString("]\n}\n")
	}
	return out.Flush()
}

// successfulTransfers prints every file task id has transferred so far.
func (c *cli) successfulTransfers(cmd *cobra.Command, cl *apiclient.Client, id string) error {
	return pages(c, cmd, "successful_transfers", []string{"SOURCE PATH", "DESTINATION PATH", "SIZE", "CHECKSUM"},
		func(q api.MarkerQuery) ([]api.SuccessfulTransfer, int64, error) {
			page, err := cl.SuccessfulTransfers(cmd.Context(), id, q)
			return page.Data, page.NextMarker, err
		}, func(w io.Writer, f api.SuccessfulTransfer) {
			sum := "-"
			if f.Checksum != "" {
				sum = f.ChecksumAlgorithm + ":" + f.Checksum
			}
			row(w, f.SourcePath, f.DestinationPath, f.Size, sum)
		})
}

// skippedErrors prints every source path task id skipped for an error
// (skip_source_errors), and why.
func (c *cli) skippedErrors(cmd *cobra.Command, cl *apiclient.Client, id string) error {
	return pages(c, cmd, "skipped_errors", []string{"SOURCE PATH", "DESTINATION PATH", "ERROR"},
		func(q api.MarkerQuery) ([]api.SkippedError, int64, error) {
			page, err := cl.SkippedErrors(cmd.Context(), id, q)
			return page.Data, page.NextMarker, err
		}, func(w io.Writer, f api.SkippedError) {
			row(w, f.SourcePath, f.DestinationPath, f.ErrorDetails)
		})
}

// deletedPaths prints every path task id deleted at its destinations
// because the source lacks it (delete_destination_extra), as
// ENDPOINT_ID:PATH in a transfer to several destinations.
func (c *cli) deletedPaths(cmd *cobra.Command, cl *apiclient.Client, id string) error {
	return pages(c, cmd, "deleted_paths", []string{"DELETED PATH", "TYPE", "SIZE"},
		func(q api.MarkerQuery) ([]api.DeletedPath, int64, error) {
			page, err := cl.DeletedPaths(cmd.Context(), id, q)
			return page.Data, page.NextMarker, err
		}, func(w io.Writer, d api.DeletedPath) {
			p := d.DestinationPath
			if d.DestinationEndpointID != "" {
				p = d.DestinationEndpointID + ":" + p
			}
			row(w, p, d.Type, d.Size)
		})
}

// partialPaths prints every file task id started and did not finish, and
// the bytes known to be at the destination.
func (c *cli) partialPaths(cmd *cobra.Command, cl *apiclient.Client, id string) error {
	return pages(c, cmd, "partial_paths", []string{"PARTIAL FILE", "SIZE", "AT DESTINATION"},
		func(q api.MarkerQuery) ([]api.PartialPath, int64, error) {
			page, err := cl.PartialPaths(cmd.Context(), id, q)
			return page.Data, page.NextMarker, err
		}, func(w io.Writer, p api.PartialPath) {
			row(w, p.SourcePath, p.Size, p.BytesAtDestination)
		})
}

// newTaskEventsCmd is ferry task events, also known as ferry events.
func newTaskEventsCmd(c *cli, use string) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   use + " TASK_ID",
		Short: "Show a task's history: starts, faults, retries, the end",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			all := api.EventList{DataType: "event_list"}
			for {
				want := 1000
				if limit > 0 {
					want = min(want, limit-len(all.Data))
				}
				page, err := cl.Events(cmd.Context(), args[0], api.Page{Limit: want, Offset: len(all.Data)})
				if err != nil {
					return err
				}
				all.Data = append(all.Data, page.Data...)
				all.Total = page.Total
				if len(page.Data) == 0 || len(all.Data) >= page.Total || len(all.Data) == limit {
					break
				}
			}
			all.Length = len(all.Data)
			if c.format == "text" {
				// The description last, unpadded; the details (JSON) are
				// for -F json and -F unix.
				// A description of several lines (STARTED's) goes on in
				// rows of its own, under the first.
				return c.table(cmd, all, []string{"TIME", "CODE", "ERROR", "DESCRIPTION"}, func(w io.Writer) {
					for _, e := range all.Data {
						first, rest, _ := strings.Cut(e.Description, "\n")
						row(w, when(e.Time), e.Code, e.IsError, first)
						for l := range strings.SplitSeq(rest, "\n") {
							if l != "" {
								row(w, "", "", "", "  "+l)
							}
						}
					}
				})
			}
			return c.table(cmd, all, []string{"TIME", "CODE", "ERROR", "DESCRIPTION", "DETAILS"}, func(w io.Writer) {
				for _, e := range all.Data {
					row(w, when(e.Time), e.Code, e.IsError, e.Description, e.Details)
				}
			})
		},
	}
	cmd.Aliases = []string{"event-list"}
	cmd.Flags().IntVar(&limit, "limit", 0, "only the first N events (0: all)")
	return cmd
}

// newTaskCancelCmd is ferry task cancel, also known as ferry cancel.
func newTaskCancelCmd(c *cli, use string) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   use + " TASK_ID [--path SOURCE_PATH]",
		Short: "Cancel a task, or (--path) only one of its files",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			var res api.Result
			if path != "" {
				res, err = cl.CancelFile(cmd.Context(), args[0], path)
			} else {
				res, err = cl.CancelTask(cmd.Context(), args[0])
			}
			return c.printResult(cmd, res, err)
		},
	}
	cmd.Flags().StringVar(&path, "path", "", "cancel only the file with this source path")
	return cmd
}

// newTaskResumeCmd is ferry task resume.
func newTaskResumeCmd(c *cli, use string) *cobra.Command {
	return &cobra.Command{
		Use:   use + " TASK_ID",
		Short: "Run an INACTIVE task again once what it waited for is mended (space freed at a full destination)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			res, err := cl.ResumeTask(cmd.Context(), args[0])
			return c.printResult(cmd, res, err)
		},
	}
}

// newTaskPauseInfoCmd is ferry task pause-info.
func newTaskPauseInfoCmd(c *cli, use string) *cobra.Command {
	return &cobra.Command{
		Use:   use + " TASK_ID",
		Short: "Say whether a task is paused (INACTIVE), why, and what to run to resume it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			pi, err := cl.PauseInfo(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return c.print(cmd, pi, func(w io.Writer) {
				row(w, "Task ID:", pi.TaskID)
				if !pi.IsPaused {
					row(w, "Paused:", "no")
					return
				}
				row(w, "Paused:", "yes ("+pi.NiceStatus+")")
				row(w, "Why:", cmp.Or(pi.Description, "-"))
				for _, pe := range pi.Endpoints {
					row(w, "Endpoint:", pe.DisplayName)
					row(w, "To resume:", resumeHow(pi.TaskID, pe))
				}
			})
		},
	}
}

// resumeHow is what to do to resume task id, paused by pe.
func resumeHow(id string, pe api.PausedEndpoint) string {
	switch pe.Resume {
	case api.ResumeActivate:
		return "ferry endpoint activate " + pe.DisplayName + " (the task resumes by itself)"
	case api.ResumeAgent:
		return "start its agent, ferry connect, where it serves from (the task resumes when it connects)"
	case api.ResumeFreeSpace:
		return "free space there, then ferry task resume " + id
	}
	return pe.Resume
}

// newTaskUpdateCmd is ferry task update, also known as ferry modify.
func newTaskUpdateCmd(c *cli, use string) *cobra.Command {
	var label, deadline string
	cmd := &cobra.Command{
		Use:   use + " TASK_ID [--label LABEL] [--deadline WHEN]",
		Short: "Change a running task's label or deadline",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var u api.TaskUpdate
			if cmd.Flags().Changed("label") {
				u.Label = &label
			}
			if cmd.Flags().Changed("deadline") {
				d, err := parseDeadline(deadline, time.Now())
				if err != nil {
					return usagef("--deadline %q: %v", deadline, err)
				}
				u.Deadline = &d
			}
			if u.Label == nil && u.Deadline == nil {
				return usagef("nothing to change: give --label or --deadline")
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			res, err := cl.UpdateTask(cmd.Context(), args[0], u)
			return c.printResult(cmd, res, err)
		},
	}
	cmd.Flags().StringVar(&label, "label", "", "the new label")
	cmd.Flags().StringVar(&deadline, "deadline", "", "the new deadline: a duration from now (2h) or an RFC 3339 time")
	return cmd
}

// newTaskWaitCmd is ferry task wait, also known as ferry wait.
func newTaskWaitCmd(c *cli, use string) *cobra.Command {
	var o waitOpts
	cmd := &cobra.Command{
		Use:   use + " TASK_ID [--timeout N] [--polling-interval S] [-H]",
		Short: "Wait for a task to end, with a progress bar; exit 0 only if it SUCCEEDED",
		Long: fmt.Sprintf(`Wait for a task to end. On a terminal a bar shows the files done, the bytes
moved, the rate (measured from the bytes each poll sees arrive, so it holds
between the worker's progress updates) and the time left. The task is printed
at the end. The exit status is 0 when it SUCCEEDED, %d when it FAILED,
--timeout-exit-code (%d) when --timeout ends the wait first, %d when the login
is no longer valid.`, exitFailure, exitTimeout, exitAuth),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := o.parse()
			if err != nil {
				return err
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			return c.wait(cmd, cl, args[0], w)
		},
	}
	o.register(cmd.Flags())
	return cmd
}

// newTaskCmd is ferry task and its subcommands.
func newTaskCmd(c *cli) *cobra.Command {
	return c.group("task", "List, show, follow, change and cancel tasks",
		newTaskListCmd(c, "list"), newTaskShowCmd(c, "show"), newTaskEventsCmd(c, "events"),
		newTaskCancelCmd(c, "cancel"), newTaskResumeCmd(c, "resume"), newTaskPauseInfoCmd(c, "pause-info"),
		newTaskUpdateCmd(c, "update"), newTaskWaitCmd(c, "wait"))
}

// taskAliases are the hosted CLI's top-level names for the task commands.
func taskAliases(c *cli) []*cobra.Command {
	var cmds []*cobra.Command
	for _, a := range []struct {
		name, of string
		new      func(*cli, string) *cobra.Command
	}{
		{"status", "list", newTaskListCmd}, {"details", "show", newTaskShowCmd}, {"events", "events", newTaskEventsCmd},
		{"cancel", "cancel", newTaskCancelCmd}, {"wait", "wait", newTaskWaitCmd}, {"modify", "update", newTaskUpdateCmd},
	} {
		cmd := c.flags(a.new(c, a.name))
		cmd.Short += " (ferry task " + a.of + ")"
		cmds = append(cmds, cmd)
	}
	return cmds
}
