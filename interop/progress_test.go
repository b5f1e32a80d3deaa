//go:build interop

package interop

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ferry/service/api"
)

// bigFileSpec is a synthetic tree of one 4 GiB file: a single large file
// whose progress must show while it moves, not only once it ends.
const bigFileSpec = "files=1,size=4294967296"

// hugeFileSpec is one 16 GiB file: a task that lasts several seconds
// even on a fast machine.
const hugeFileSpec = "files=1,size=17179869184"

// syntheticService starts a service of cfg, logs alice in, and adds her
// endpoints src, a ferry gridftp serving the synthetic tree of spec, and
// dst, one with a sink for root (returned).
func syntheticService(t *testing.T, spec string, cfg serviceConfig) (*serviceCLI, *ferryService, *ferryServer) {
	t.Helper()
	src := startFerryConfig(t, ferryConfig{Root: "synthetic:" + spec, Anonymous: true})
	dst := startFerryConfig(t, ferryConfig{Root: "sink:", Anonymous: true})
	svc := startService(t, cfg)
	c := newServiceUser(t, svc, "")
	c.addEndpoint("src", src)
	c.addEndpoint("dst", dst)
	return c, svc, dst
}

// TestServiceWaitShowsBytesAsTheyMove: ferry task wait, on a terminal
// (script(1) gives it one), for a task of one 4 GiB file from a synthetic
// source into a sink, shows bytes moved before the file is done, with the
// total from the start, and the count never goes back (when no fault made
// the task send anything again); before the file is done, it shows a time
// left. ferry task show says the total too.
func TestServiceWaitShowsBytesAsTheyMove(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("no script(1) to give ferry task wait a terminal")
	}
	c, _, _ := syntheticService(t, bigFileSpec, serviceConfig{})
	// Not verified: the sink cannot sum the ranges of a file sent in chunks.
	id := c.transfer("--no-verify-checksum", "-r", "src:/", "dst:/out/")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "-qefc", shellQuote(ferryBin, "task", "wait", id, "--polling-interval", "0.5"), "/dev/null")
	cmd.Env = c.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ferry task wait on a terminal: %v\n%q\nevents:\n%s", err, out, c.events(id))
	}
	task := c.task(id)
	if task.FilesTransferred != 1 {
		t.Fatalf("task: %d files transferred, want 1\nevents:\n%s", task.FilesTransferred, c.events(id))
	}
	if m := regexp.MustCompile(`(?m)^Bytes Total:\s+(\d+)$`).FindStringSubmatch(c.ok("", "task", "show", id)); m == nil || m[1] != strconv.FormatInt(task.BytesTotal, 10) {
		t.Errorf("ferry task show: Bytes Total %v, want %d", m, task.BytesTotal)
	}
	bars := barLines(string(out))
	t.Logf("bars:\n%s", strings.Join(rawBars(bars), "\n"))
	var before []barLine // drawn before the file was done
	for _, b := range bars {
		if b.done == 0 {
			before = append(before, b)
		}
	}
	moving, total, eta := false, false, false
	for _, b := range before {
		moving = moving || b.moved > 0
		total = total || (b.total > 0 && abs(b.total-task.BytesTotal) <= task.BytesTotal/100) // as rounded
		eta = eta || (b.moved > 0 && b.eta != "--")
	}
	if !moving || !total || !eta {
		t.Errorf("before the file was done, the bar showed bytes moved: %v, the total (%d B): %v, a time left: %v; bars:\n%s",
			moving, task.BytesTotal, total, eta, strings.Join(rawBars(bars), "\n"))
	}
	if task.Faults == 0 {
		for i := 1; i < len(bars); i++ {
			if bars[i].moved < bars[i-1].moved {
				t.Errorf("bytes moved went back, from %q to %q", bars[i-1].raw, bars[i].raw)
			}
		}
	}
}

// barLine is one drawing of the progress bar.
type barLine struct {
	raw          string
	done, files  int
	moved, total int64 // total 0: not shown
	eta          string
}

// barRE is the bar's line: files D/N  MOVED[/TOTAL]  RATE/s  ETA LEFT.
var barRE = regexp.MustCompile(`^files (\d+)/(\d+)  ([0-9.]+ [KMGTPE]?i?B)(?:/([0-9.]+ [KMGTPE]?i?B))?  \S+ \S+/s  ETA (\S+)`)

// barLines reads the bar's drawings from a terminal's output.
func barLines(out string) []barLine {
	var bars []barLine
	for _, s := range strings.Split(out, "\r\x1b[K") {
		m := barRE.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		b := barLine{raw: strings.TrimSpace(m[0]), moved: parseShownBytes(m[3]), total: parseShownBytes(m[4]), eta: m[5]}
		b.done, _ = strconv.Atoi(m[1])
		b.files, _ = strconv.Atoi(m[2])
		bars = append(bars, b)
	}
	return bars
}

func rawBars(bs []barLine) []string {
	var s []string
	for _, b := range bs {
		s = append(s, b.raw)
	}
	return s
}

// parseShownBytes reads a byte count as plural.Bytes shows it ("1.5 GiB"),
// to within its rounding; 0 for "".
func parseShownBytes(s string) int64 {
	if s == "" {
		return 0
	}
	num, unit, _ := strings.Cut(s, " ")
	v, _ := strconv.ParseFloat(num, 64)
	if i := strings.IndexByte("KMGTPE", unit[0]); unit != "B" && i >= 0 {
		v *= float64(int64(1) << (10 * (i + 1)))
	}
	return int64(v)
}

func abs(n int64) int64 { return max(n, -n) }

// shellQuote is a command line for sh -c.
func shellQuote(args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// TestServiceEventsTellResumeAndBytes: a task of one 16 GiB file whose
// service is killed (SIGKILL) once bytes moved and started again: its
// history's STARTED events are short lines, the one after the restart
// says the task resumed and what was done already, and its events
// (PROGRESS, SUCCEEDED) count bytes in human units (1.5 GiB), not raw
// numbers; ferry
// task events prints the lines of a description under each other. The
// bytes of chunks in flight at the kill count once: the task ends with
// the file's size transferred, not more.
func TestServiceEventsTellResumeAndBytes(t *testing.T) {
	c, svc, _ := syntheticService(t, hugeFileSpec, serviceConfig{Lease: time.Minute})
	id := c.transfer("--no-verify-checksum", "-r", "src:/", "dst:/out/")
	c.waitFor(id, "bytes moved", time.Minute, func(t api.Task) bool { return t.BytesTransferred > 0 })
	svc.kill9()
	svc.restart()
	got := c.succeeded(id, 5*time.Minute)
	// The chunks in flight at the kill, counted as their markers came,
	// go again: they count once.
	if size := int64(16 << 30); got.BytesTransferred != size || got.BytesTotal != size {
		t.Errorf("%d bytes transferred of %d in total, want %d of %d (the file's size)", got.BytesTransferred, got.BytesTotal, size, size)
	}

	var evs api.EventList
	c.decode(&evs, "task", "events", id)
	var started, progress []string
	for _, e := range evs.Data {
		switch e.Code {
		case "STARTED":
			started = append(started, e.Description)
		case "PROGRESS":
			progress = append(progress, e.Description)
		}
	}
	resumed := false
	for _, d := range started {
		lines := strings.Split(d, "\n")
		resumed = resumed || strings.HasPrefix(lines[0], "resumed where an earlier run stopped: ")
		if len(lines) < 2 {
			t.Errorf("STARTED in one line, want short lines:\n%s", d)
		}
		for _, l := range lines {
			if len(l) > 160 {
				t.Errorf("STARTED has a line of %d characters, want short lines:\n%s", len(l), l)
			}
		}
	}
	if !resumed {
		t.Errorf("no STARTED event says the task resumed:\n%s", strings.Join(started, "\n\n"))
	}
	// ferry task events prints a description's lines under its first,
	// in its column.
	text := c.events(id)
	t.Logf("ferry task events:\n%s", text)
	lines := strings.Split(text, "\n")
	col := strings.Index(lines[0], "DESCRIPTION")
	for i, l := range lines {
		if !strings.Contains(l, "resumed where an earlier run stopped") {
			continue
		}
		if next := lines[min(i+1, len(lines)-1)]; len(next) <= col || strings.TrimSpace(next[:col]) != "" || !strings.HasPrefix(strings.TrimSpace(next), "concurrency ") {
			t.Errorf("ferry task events: the line after %q is %q, want the settings under the description", l, next)
		}
	}
	raw := regexp.MustCompile(`\d bytes`)
	if len(progress) == 0 {
		t.Errorf("no PROGRESS event in a task of 16 GiB; events:\n%s", c.events(id))
	}
	for _, d := range progress {
		if !strings.Contains(d, "iB transferred") {
			t.Errorf("PROGRESS %q: want human byte counts", d)
		}
	}
	for _, e := range evs.Data {
		if raw.MatchString(e.Description) && !e.IsError {
			t.Errorf("%s %q: want human byte counts", e.Code, e.Description)
		}
	}
}
