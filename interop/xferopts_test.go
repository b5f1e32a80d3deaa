//go:build interop

package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"ferry/service/api"
	"ferry/service/domain"
)

// TestCLISkipSourceErrors submits, through the CLI to a ferry server,
// a batch between two ferry gridftp servers whose middle source file is
// missing. With --skip-source-errors the task succeeds with the others
// transferred, ferry task show --skipped-errors names the missing one and
// why, and the events say it; without it the missing file fails the
// submission, as before.
func TestCLISkipSourceErrors(t *testing.T) {
	root := t.TempDir()
	writeRandomFile(t, filepath.Join(root, "in", "a.dat"), 1000)
	writeRandomFile(t, filepath.Join(root, "in", "b.dat"), 2000)
	src := startFerryConfig(t, ferryConfig{Root: root, Anonymous: true})
	dst := startFerry(t)
	c := newServiceUser(t, startService(t, serviceConfig{}), "")
	c.addEndpoint("src", src)
	c.addEndpoint("dst", dst)
	batch := "a.dat a.dat\ngone.dat gone.dat\nb.dat b.dat\n"

	if r := c.run(batch, "transfer", "src:/in", "dst:/out", "--batch", "-"); r.code != 1 || !strings.Contains(r.stderr, "/in/gone.dat") {
		t.Fatalf("a batch with a missing source file, without --skip-source-errors: want it refused, naming the file:\n%s", r)
	}

	id := strings.TrimSpace(c.ok(batch, "transfer", "src:/in", "dst:/out", "--batch", "-", "--skip-source-errors"))
	task := c.succeeded(id, time.Minute)
	if task.FilesTransferred != 2 || task.FilesSkipped != 1 || !task.SkipSourceErrors || task.FailOnQuotaErrors {
		t.Errorf("task %+v: want 2 transferred, 1 skipped, skip_source_errors echoed", task)
	}
	for _, f := range []string{"a.dat", "b.dat"} {
		if err := compareFiles(filepath.Join(root, "in", f), dst.Path("out/"+f)); err != nil {
			t.Error(err)
		}
	}
	var skipped api.SkippedErrors
	c.decode(&skipped, "task", "show", id, "--skipped-errors")
	if len(skipped.Data) != 1 || skipped.Data[0].SourcePath != "/in/gone.dat" || skipped.Data[0].DestinationPath != "/out/gone.dat" ||
		!strings.Contains(skipped.Data[0].ErrorDetails, "No such file") {
		t.Errorf("task show --skipped-errors -F json: %+v", skipped)
	}
	if out := c.ok("", "task", "show", id, "--skipped-errors"); !regexp.MustCompile(`(?m)^/in/gone\.dat\s+/out/gone\.dat\s+source: .*No such file`).MatchString(out) {
		t.Errorf("task show --skipped-errors:\n%s", out)
	}
	if out := c.ok("", "task", "show", id); !regexp.MustCompile(`(?m)^Skip Source Errors:\s+true$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^Fail On Quota Errors:\s+false$`).MatchString(out) {
		t.Errorf("task show does not echo the options:\n%s", out)
	}
	if ev := c.events(id); !strings.Contains(ev, domain.EventSkippedError) || !strings.Contains(ev, "--skipped-errors") {
		t.Errorf("events do not tell of the skipped file:\n%s", ev)
	}
}

// TestCLIFailOnQuotaErrors transfers 5 MiB into a ferry gridftp server
// whose disk holds 2: with --fail-on-quota-errors the task fails at once,
// its fatal error (NO_SPACE) saying why; without it the task waits
// INACTIVE (NO_SPACE) for space, as before.
func TestCLIFailOnQuotaErrors(t *testing.T) {
	root := t.TempDir()
	writeRandomFile(t, filepath.Join(root, "big.dat"), 5<<20)
	src := startFerryConfig(t, ferryConfig{Root: root, Anonymous: true})
	dst := startFerryConfig(t, ferryConfig{Root: mountTiny(t, "2m"), Anonymous: true})
	c := newServiceUser(t, startService(t, serviceConfig{}), "")
	c.addEndpoint("src", src)
	c.addEndpoint("dst", dst)

	id := c.transfer("src:/big.dat", "dst:/big.dat", "--fail-on-quota-errors")
	start := time.Now()
	task := c.wait(id, time.Minute)
	if task.Status != domain.StatusFailed || task.FatalError == nil || task.FatalError.Code != domain.NiceNoSpace ||
		!strings.Contains(task.FatalError.Description, "full or over its quota") || !task.FailOnQuotaErrors {
		t.Fatalf("task %s (%s), want FAILED NO_SPACE naming the cause; events:\n%s", task.Status, fatalText(task), c.events(id))
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the task took %v to fail", took)
	}
	if _, err := os.Stat(dst.Path("big.dat")); err == nil {
		t.Errorf("a partial big.dat is left at the destination")
	}

	id = c.transfer("src:/big.dat", "dst:/big.dat")
	c.waitFor(id, "INACTIVE NO_SPACE", time.Minute, func(t api.Task) bool {
		return t.Status == domain.StatusInactive && t.NiceStatus == domain.NiceNoSpace
	})
	c.ok("", "task", "cancel", id)
}

// TestCopySkipSourceErrors runs ferry copy -r between two ferry gridftp
// servers over a tree holding a named pipe, which the source server lists
// as a file and refuses to open: with --skip-source-errors the rest
// arrives, the pipe is reported skipped and the copy exits 0; without it
// the copy fails, naming it.
func TestCopySkipSourceErrors(t *testing.T) {
	root := t.TempDir()
	writeRandomFile(t, filepath.Join(root, "in", "a.dat"), 1000)
	if err := syscall.Mkfifo(filepath.Join(root, "in", "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := startFerryConfig(t, ferryConfig{Root: root, Anonymous: true})
	for _, tc := range []struct {
		flags []string
		code  int
		want  string
	}{
		{nil, 1, "FAILED /in/pipe"},
		{[]string{"--skip-source-errors"}, 0, "SKIPPED /in/pipe"},
		{[]string{"--tar", "always"}, 1, "FAILED /in/pipe"},
		{[]string{"--skip-source-errors", "--tar", "always"}, 0, "SKIPPED /in/pipe"},
	} {
		t.Run(strings.Join(append([]string{"flags"}, tc.flags...), " "), func(t *testing.T) {
			dst := startFerry(t)
			r := ferryCopy(t, append(tc.flags, "-r", "-q", src.URL("in"), dst.URL("in"))...)
			if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.want) {
				t.Fatalf("want exit %d and %q:\n%s", tc.code, tc.want, r)
			}
			if err := compareFiles(filepath.Join(root, "in", "a.dat"), dst.Path("in/a.dat")); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestWebTransferOptions submits a transfer from the web app's dialog
// with skip source errors and fail on quota errors ticked and two of the
// three notifications unticked: the task document has those options.
func TestWebTransferOptions(t *testing.T) {
	chromium := needChromium(t)
	alpha := startFerryConfig(t, ferryConfig{Anonymous: true})
	beta := startFerryConfig(t, ferryConfig{Anonymous: true})
	writeRandomFile(t, alpha.Path("run1/f.dat"), 3000)
	svc := startService(t, serviceConfig{})
	c := newServiceUser(t, svc, "")
	c.addEndpoint("alpha", alpha)
	c.addEndpoint("beta", beta)
	p := newPage(t, chromium, svc.URL())
	p.transferRun1(svc)
	for _, name := range []string{"skip_source_errors", "fail_on_quota_errors", "notify_on_succeeded", "notify_on_inactive"} {
		p.do("toggle "+name, chromedp.Click(chromedp.CSS(fmt.Sprintf(`dialog[open] input[name=%q]`, name))))
	}
	p.shot("transfer-dialog-options")
	p.dialogSubmit("transfer run1", "label", "with options")
	p.wait("the dialog closes", `!document.querySelector('dialog[open]')`, 10*time.Second)
	var tasks api.TaskList
	c.decode(&tasks, "task", "list")
	if len(tasks.Data) != 1 || tasks.Data[0].Label != "with options" {
		t.Fatalf("tasks %+v, want the one submitted", tasks.Data)
	}
	task := c.succeeded(tasks.Data[0].TaskID, time.Minute)
	if !task.SkipSourceErrors || !task.FailOnQuotaErrors || task.NotifyOnSucceeded || !task.NotifyOnFailed || task.NotifyOnInactive {
		t.Errorf("task %+v: want skip_source_errors and fail_on_quota_errors on, notify only on failed", task)
	}
	p.mu.Lock()
	if len(p.problems) > 0 {
		t.Errorf("the page reported:\n%s", strings.Join(p.problems, "\n"))
	}
	p.mu.Unlock()
}

// transferRun1 signs alice in to svc's web app, opens alice#alpha, whose
// root holds run1, in the left pane and the empty alice#beta in the
// right, selects run1 and opens the transfer dialog.
func (p *page) transferRun1(svc *ferryService) {
	p.do("open the app", chromedp.Navigate(svc.URL()+"/"), chromedp.WaitVisible(chromedp.ID("signin-title")))
	p.do("sign in", chromedp.SendKeys(chromedp.CSS(`input[name=username]`), "alice"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), servicePassword), chromedp.Click(chromedp.CSS(`form.signin button`)),
		chromedp.WaitVisible(chromedp.CSS(leftPane)))
	p.do("files page", chromedp.Click(chromedp.CSS(`#nav a[href="#/files"]`)), chromedp.WaitVisible(chromedp.CSS(leftPane)))
	p.do("open alpha", chromedp.SendKeys(chromedp.CSS(leftPane+` input[name=endpoint]`), "alice#alpha\r"))
	p.waitText(leftPane+` tbody`, "run1")
	p.do("open beta", chromedp.SendKeys(chromedp.CSS(rightPane+` input[name=endpoint]`), "alice#beta\r"))
	p.waitText(rightPane+` tbody`, "This directory is empty")
	p.do("select run1", chromedp.Click(row(leftPane, "run1")+`/td[3]`))
	p.do("transfer it", chromedp.Click(chromedp.CSS(leftPane+` button[aria-label^="Transfer the selection"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open]`)))
}
