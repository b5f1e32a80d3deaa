//go:build interop

package interop

// The web app end to end: a real headless chromium drives the app that a
// real `ferry server` serves, against two real `ferry gridftp` endpoints.
// FERRY_SCREENSHOTS=DIR (relative to the repository root) saves PNGs of
// the main pages there, for the docs.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"golang.org/x/crypto/bcrypt"

	"ferry/internal/interoptest"
	"ferry/internal/passwd"
)

// Panes of the file manager.
const (
	leftPane  = `section[aria-labelledby=left-title]`
	rightPane = `section[aria-labelledby=right-title]`
)

// needChromium returns the browser's path; it skips the test without one
// (fails it under FERRY_INTEROP=required).
func needChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH: the web app tests need a headless browser (Debian: chromium; `bash .ci/run` installs it)"
	interoptest.Missing(t, msg)
	return ""
}

// page is one browser tab on the app.
type page struct {
	t        *testing.T
	ctx      context.Context
	base     string
	shots    string // where screenshots go; "" for none
	mu       sync.Mutex
	problems []string // uncaught exceptions and CSP violations
}

func newPage(t *testing.T, chromium, base string) *page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 860), chromedp.Flag("disable-gpu", true), chromedp.Flag("lang", "en-US"))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	p := &page{t: t, ctx: ctx, base: base}
	if dir := os.Getenv("FERRY_SCREENSHOTS"); dir != "" {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join("..", dir)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p.shots = dir
	}
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	console := chromedp.Console(ctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
				p.mu.Lock()
				p.problems = append(p.problems, m.String())
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// do runs actions; a failure ends the test with the page's text.
func (p *page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v\npage:\n%s", what, err, p.text())
	}
}

// wait waits until the JavaScript expression cond is true. A document
// that goes away during the wait (a reload) is waited on again.
func (p *page) wait(what, cond string, within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithDeadline(p.ctx, deadline.Add(time.Second))
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(time.Until(deadline)), chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		switch {
		case err == nil:
			return
		case strings.Contains(err.Error(), "context with specified id") && time.Now().Before(deadline):
			time.Sleep(50 * time.Millisecond)
		default:
			p.t.Fatalf("waiting for %s: %v\npage:\n%s", what, err, p.text())
		}
	}
}

// waitText waits until the element sel holds text.
func (p *page) waitText(sel, text string) {
	p.t.Helper()
	p.wait(fmt.Sprintf("%q in %s", text, sel), fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.textContent.includes(%q))`, sel, text), 15*time.Second)
}

// eval evaluates a JavaScript expression, awaiting a promise.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// timing says when, after the navigation began, the document was
// parsed and the app's last API answer arrived (the page is usable then).
func (p *page) timing() string {
	p.t.Helper()
	return eval[string](p, `(() => {
		const nav = performance.getEntriesByType('navigation')[0];
		const api = performance.getEntriesByType('resource').filter(r => r.name.includes('/api/'));
		return 'DOMContentLoaded ' + nav.domContentLoadedEventEnd.toFixed(0) + ' ms, last of ' + api.length +
			' API answers ' + Math.max(...api.map(r => r.responseEnd)).toFixed(0) + ' ms';
	})()`)
}

// text is what the page shows, for failure messages.
func (p *page) text() string {
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		return err.Error()
	}
	return s
}

// shot saves a screenshot of the whole page as NAME.png when asked to.
func (p *page) shot(name string) {
	p.t.Helper()
	if p.shots == "" {
		return
	}
	// Hide the text cursor.
	p.do("blur", chromedp.Evaluate[chromedp.Void](`document.activeElement?.blur()`))
	p.snap(name)
}

// snap saves a screenshot as shot does, but leaves the focus where it is
// (a list open on a focused box stays open).
func (p *page) snap(name string) {
	p.t.Helper()
	if p.shots == "" {
		return
	}
	// Let toasts and focus rings settle.
	time.Sleep(300 * time.Millisecond)
	b, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(p.shots, name+".png"), b, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// row is an XPath to the row of the file name in a pane's listing.
func row(pane, name string) string {
	id := strings.TrimSuffix(strings.TrimPrefix(pane, `section[aria-labelledby=`), `]`)
	return fmt.Sprintf(`//section[@aria-labelledby=%q]//tbody/tr[.//td[contains(@class,"name")][normalize-space()=%q]]`, id, name)
}

// toast waits for a toast that says text, then dismisses it, as it
// covers what is under it.
func (p *page) toast(text string) {
	p.t.Helper()
	p.waitText(`#toasts .toast`, text)
	p.do("dismiss the toast", chromedp.Evaluate[chromedp.Void](fmt.Sprintf( // unless it went by itself
		`[...document.querySelectorAll('#toasts .toast')].find(t => t.textContent.includes(%q))?.querySelector('button').click()`, text)))
}

// dialogSubmit fills the open dialog's fields (name, value pairs) and
// submits it.
func (p *page) dialogSubmit(what string, fields ...string) {
	p.t.Helper()
	p.do(what+": dialog", chromedp.WaitVisible(chromedp.CSS(`dialog[open]`)))
	for i := 0; i+1 < len(fields); i += 2 {
		p.do(what+": "+fields[i], chromedp.SetValue(chromedp.CSS(fmt.Sprintf(`dialog[open] [name=%q]`, fields[i])), fields[i+1]))
	}
	p.do(what+": submit", chromedp.Click(chromedp.CSS(`dialog[open] button[type=submit]`)))
	p.wait(what+": dialog closed", `!document.querySelector('dialog[open]')`, 15*time.Second)
}

// taskStatus is the JavaScript expression of the status badge of the
// activity row whose task link reads label.
func taskStatus(label string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('tr[data-task]')].find(r => r.querySelector('a').textContent === %q)?.querySelector('.badge')?.textContent`, label)
}

// TestWebApp signs in with a real browser, adds endpoints, browses both
// panes, submits a transfer between two real endpoints and watches it
// succeed, cancels a task that waits for an activation, sees the error of
// a bad path, makes, renames and deletes a folder, checks the servers of a
// striped endpoint (its movers up, then one down), edits, deactivates and
// removes endpoints, adds one reached through another, and signs out.
func TestWebApp(t *testing.T) {
	chromium := needChromium(t)
	start := time.Now()

	// Two endpoints: alpha is anonymous, beta wants carol's password.
	alpha := startFerryConfig(t, ferryConfig{Anonymous: true})
	pwfile := filepath.Join(t.TempDir(), "passwd")
	if err := passwd.Set(pwfile, "carol", "carol-secret", bcrypt.MinCost); err != nil {
		t.Fatal(err)
	}
	beta := startFerryConfig(t, ferryConfig{Args: []string{"--password-file", pwfile}})
	for i := range 20 {
		writeRandomFile(t, alpha.Path(fmt.Sprintf("run1/small/f%02d.dat", i)), 20000)
	}
	writeRandomFile(t, alpha.Path("run1/big.dat"), 8<<20)
	writeRandomFile(t, alpha.Path("run1/notes.txt"), 300)
	writeRandomFile(t, alpha.Path("readme.txt"), 1200)

	svc := startService(t, serviceConfig{})
	svc.addUser("alice", "alice-pw", "")
	p := newPage(t, chromium, svc.URL())

	// Sign in: the page is usable at once; a wrong password is refused.
	p.do("open the app", chromedp.Navigate(svc.URL()+"/"), chromedp.WaitVisible(chromedp.ID("signin-title")))
	t.Logf("sign-in page: %s", p.timing())
	p.shot("signin")
	if r, err := http.Get(svc.URL() + "/api/v0.10/task_list"); err != nil || r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("API without a session: %v, %v", r, err)
	}
	p.do("wrong password", chromedp.SendKeys(chromedp.CSS(`input[name=username]`), "alice"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "nope"), chromedp.Click(chromedp.CSS(`form.signin button`)))
	p.waitText(`form.signin [role=alert]`, "Wrong user name or password")
	p.do("sign in", chromedp.SetValue(chromedp.CSS(`input[name=password]`), "alice-pw"), chromedp.Click(chromedp.CSS(`form.signin button`)),
		chromedp.WaitVisible(chromedp.CSS(leftPane)))
	p.waitText(`#user`, "alice")

	// Endpoints: add both; beta wants activating and runs two tasks at once.
	p.do("endpoints page", chromedp.Click(chromedp.CSS(`#nav a[href="#/endpoints"]`)), chromedp.WaitVisible(chromedp.CSS(`.heading button.primary`)))
	p.do("add alpha", chromedp.Click(chromedp.CSS(`.heading button.primary`)))
	p.dialogSubmit("add alpha", "name", "alpha", "description", "the instrument's disk", "servers", alpha.URL(""))
	p.waitText(`article.endpoint h2`, "alice#alpha")
	p.do("add beta", chromedp.Click(chromedp.CSS(`.heading button.primary`)))
	p.dialogSubmit("add beta", "name", "beta", "description", "the group's archive", "servers", beta.URL(""),
		"auth_method", "password", "max_concurrent", "2")
	p.waitText(`article.endpoint`, "2 tasks at once")
	p.waitText(`article.endpoint`, "not activated")

	// Browse the left pane: directories, sorting, the keyboard.
	p.do("files page", chromedp.Click(chromedp.CSS(`#nav a[href="#/files"]`)), chromedp.WaitVisible(chromedp.CSS(leftPane)))
	p.do("open alpha", chromedp.SendKeys(chromedp.CSS(leftPane+` input[name=endpoint]`), "alice#alpha\r"))
	p.waitText(leftPane+` tbody`, "readme.txt")
	p.do("into run1", chromedp.Click(row(leftPane, "run1")+`//button[@data-open]`))
	p.waitText(leftPane+` .crumbs [aria-current]`, "run1")
	names := func(pane string) string {
		return eval[string](p, fmt.Sprintf(`[...document.querySelectorAll(%q)].map(e => e.textContent).join(' ')`, pane+` tbody td.name`))
	}
	if got := names(leftPane); got != "small big.dat notes.txt" {
		t.Errorf("run1 by name: %q", got)
	}
	p.do("sort by size", chromedp.Click(chromedp.CSS(leftPane+` th[data-key=size] button`)))
	if got := names(leftPane); got != "small notes.txt big.dat" {
		t.Errorf("run1 by size: %q", got)
	}
	p.do("sort by size, down", chromedp.Click(chromedp.CSS(leftPane+` th[data-key=size] button`)))
	if got := names(leftPane); got != "small big.dat notes.txt" || eval[string](p, `document.querySelector('`+leftPane+` th[data-key=size]').getAttribute('aria-sort')`) != "descending" {
		t.Errorf("run1 by size, descending: %q", got)
	}
	p.do("sort by date", chromedp.Click(chromedp.CSS(leftPane+` th[data-key=date] button`)))
	if got := eval[string](p, `document.querySelector('`+leftPane+` th[data-key=date]').getAttribute('aria-sort')`); got != "ascending" || !strings.HasPrefix(names(leftPane), "small ") {
		t.Errorf("by date: aria-sort %q, %q", got, names(leftPane))
	}
	p.do("sort by name again", chromedp.Click(chromedp.CSS(leftPane+` th[data-key=name] button`)))
	p.do("keyboard: Enter opens small", chromedp.Focus(chromedp.CSS(leftPane+` tbody tr[tabindex="0"]`)), chromedp.KeyEvent(kb.Enter))
	p.waitText(leftPane+` .crumbs [aria-current]`, "small")
	p.wait("focus on the first row", `document.activeElement?.matches('`+leftPane+` tbody tr') && document.activeElement.textContent.includes('f00.dat')`, 5*time.Second)
	p.do("keyboard: End, Space selects", chromedp.KeyEvent(kb.End), chromedp.KeyEvent(" "))
	if sel := eval[string](p, `[...document.querySelectorAll('`+leftPane+` tr[aria-selected=true]')].map(r => r.textContent).join()`); !strings.Contains(sel, "f19.dat") {
		t.Errorf("selected after End, Space: %q", sel)
	}
	p.do("keyboard: Backspace goes up", chromedp.KeyEvent(kb.Backspace))
	p.waitText(leftPane+` .crumbs [aria-current]`, "run1")

	// A bad path is an error, and the pane stays where it was.
	p.do("go to a missing directory", chromedp.SetValue(chromedp.CSS(leftPane+` input[name=path]`), "/no/such/dir"),
		chromedp.Click(`//section[@aria-labelledby="left-title"]//button[text()="Go"]`))
	p.waitText(leftPane+` .status`, "list /no/such/dir on alice#alpha: ")
	p.waitText(leftPane+` .crumbs [aria-current]`, "run1")

	// The right pane: beta asks to be activated. Not yet.
	p.do("open beta", chromedp.SendKeys(chromedp.CSS(rightPane+` input[name=endpoint]`), "alice#beta\r"))
	p.waitText(`dialog[open] h2`, "Activate alice#beta")
	p.do("not now", chromedp.Click(`//dialog[@open]//button[text()="Cancel"]`))
	p.waitText(rightPane+` .status`, "Activate")

	// A transfer into beta waits for the activation; cancel it.
	p.do("select notes.txt", chromedp.Click(row(leftPane, "notes.txt")+`/td[3]`))
	p.do("transfer it", chromedp.Click(chromedp.CSS(leftPane+` button[aria-label^="Transfer the selection"]`)))
	p.dialogSubmit("transfer notes.txt", "label", "waits for beta")
	p.toast("Transfer submitted")
	p.do("activity page", chromedp.Click(chromedp.CSS(`#nav a[href="#/activity"]`)))
	p.wait("the task waits", taskStatus("waits for beta")+`?.startsWith('INACTIVE')`, 20*time.Second)
	p.toast("is waiting")
	p.do("cancel it", chromedp.Click(fmt.Sprintf(`//tr[.//a[text()=%q]]//button[text()="Cancel"]`, "waits for beta")))
	p.dialogSubmit("confirm the cancel")
	p.toast("the task is canceled")
	p.wait("the task is canceled", taskStatus("waits for beta")+`?.startsWith('FAILED')`, 10*time.Second)
	p.toast("failed")

	// Activate beta from the pane, then transfer run1 and watch it finish.
	p.do("files page again", chromedp.Click(chromedp.CSS(`#nav a[href="#/files"]`)))
	p.waitText(leftPane+` .crumbs [aria-current]`, "run1")
	p.do("activate beta", chromedp.Click(chromedp.CSS(rightPane+` .status button`)))
	p.dialogSubmit("activate beta", "username", "carol", "password", "carol-secret")
	p.toast("endpoint alice#beta is activated")
	p.waitText(rightPane+` tbody`, "This directory is empty")
	p.do("up to alpha's root", chromedp.Click(chromedp.CSS(leftPane+` .crumbs button`)))
	p.waitText(leftPane+` tbody`, "readme.txt")
	p.do("select run1 and readme.txt", chromedp.Click(row(leftPane, "run1")+`/td[3]`), chromedp.Click(row(leftPane, "readme.txt")+`/td[3]`))
	p.do("transfer them", chromedp.Click(chromedp.CSS(leftPane+` button[aria-label^="Transfer the selection"]`)))
	p.dialogSubmit("transfer run1", "label", "copy run1", "sync_level", "3", "tar", "always")
	p.toast("Transfer submitted")
	p.do("activity page", chromedp.Click(chromedp.CSS(`#nav a[href="#/activity"]`)))
	p.wait("the transfer succeeds", taskStatus("copy run1")+` === 'SUCCEEDED'`, 30*time.Second)
	p.toast("“copy run1” succeeded")
	p.waitText(`tr[data-task] td.progress`, "23/23 files")
	p.shot("activity")
	for _, rel := range []string{"run1/big.dat", "run1/notes.txt", "run1/small/f07.dat", "readme.txt"} {
		if err := compareFiles(alpha.Path(rel), beta.Path(rel)); err != nil {
			t.Error(err)
		}
	}

	// The task page: counters, chart, events.
	p.do("task page", chromedp.Click(`//a[text()="copy run1"]`))
	p.waitText(`h1`, "copy run1")
	p.waitText(`.summary .badge`, "SUCCEEDED")
	p.waitText(`.counters`, "23 found, 23 transferred, 0 skipped, 0 failed")
	p.waitText(`.counters`, "copy if the checksum differs, verify checksums")
	p.waitText(`.counters`, "tar always")
	p.waitText(`.events`, "they move as tar streams")
	p.waitText(`.events`, "SUCCEEDED")
	p.wait("the chart", `document.querySelector('svg.chart')?.getAttribute('aria-label').startsWith('Throughput over')`, 5*time.Second)
	p.shot("task")

	// Both panes show the copy; make, rename and delete a folder in beta.
	p.do("files page, third time", chromedp.Click(chromedp.CSS(`#nav a[href="#/files"]`)))
	p.waitText(rightPane+` tbody`, "run1")
	p.do("into run1 on beta", chromedp.Click(row(rightPane, "run1")+`//button[@data-open]`))
	p.waitText(rightPane+` tbody`, "notes.txt")
	p.do("select run1 for the picture", chromedp.Click(row(leftPane, "run1")+`/td[3]`))
	p.shot("files")
	p.do("new folder", chromedp.Click(`//section[@aria-labelledby="right-title"]//button[text()="New folder"]`))
	p.dialogSubmit("new folder", "name", "scratch")
	p.waitText(rightPane+` tbody`, "scratch")
	p.do("select scratch", chromedp.Click(row(rightPane, "scratch")+`/td[3]`),
		chromedp.Click(`//section[@aria-labelledby="right-title"]//button[text()="Rename"]`))
	p.dialogSubmit("rename", "name", "scratch2")
	p.waitText(rightPane+` tbody`, "scratch2")
	p.do("select scratch2", chromedp.Click(row(rightPane, "scratch2")+`/td[3]`),
		chromedp.Click(`//section[@aria-labelledby="right-title"]//button[text()="Delete"]`))
	p.dialogSubmit("delete")
	p.toast("Delete submitted")
	p.toast("“Delete scratch2” succeeded")
	p.wait("the pane refreshed", `!document.querySelector('`+rightPane+` tbody').textContent.includes('scratch2')`, 5*time.Second)
	if _, err := os.Stat(beta.Path("run1/scratch2")); !os.IsNotExist(err) {
		t.Errorf("run1/scratch2 on beta: %v", err)
	}

	// The endpoints page shows beta activated; edit alpha.
	p.do("endpoints page again", chromedp.Click(chromedp.CSS(`#nav a[href="#/endpoints"]`)))
	p.waitText(`article.endpoint`, "active, ")
	p.do("edit alpha", chromedp.Click(`//article[.//h2[text()="alice#alpha"]]//button[text()="Edit"]`))
	p.dialogSubmit("edit alpha", "description", "the instrument's fast disk")
	p.waitText(`article.endpoint`, "the instrument's fast disk")

	// A striped endpoint: checking its servers lists the front end's two
	// data movers up; once one is killed, checking again shows it down.
	striped := startFerryStriped(t, 2)
	p.do("add delta", chromedp.Click(chromedp.CSS(`.heading button.primary`)))
	p.dialogSubmit("add delta", "name", "delta", "description", "two data movers", "servers", striped.URL(""))
	p.waitText(`article.endpoint h2`, "alice#delta")
	delta := `[...document.querySelectorAll('article.endpoint')].find(a => a.querySelector('h2').textContent === 'alice#delta')`
	movers := delta + `?.querySelectorAll('ul.servers ul.movers > li') ?? []`
	p.do("check delta's servers", chromedp.Click(`//article[.//h2[text()="alice#delta"]]//button[text()="Check servers"]`))
	p.wait("delta's movers up", fmt.Sprintf(`%s?.querySelector('ul.servers').textContent.includes('up, striped front end: 2 stripes, 2 of 2 movers up') && `+
		`[...%s].map(li => li.textContent).join('|') === 'Mover 0 %s up|Mover 1 %s up'`, delta, movers, striped.addrs[0], striped.addrs[1]), 15*time.Second)
	p.shot("endpoints")
	striped.movers[1].kill9()
	p.do("check delta's servers again", chromedp.Click(`//article[.//h2[text()="alice#delta"]]//button[text()="Check servers"]`))
	p.wait("delta's mover 1 down", fmt.Sprintf(`%s?.querySelector('ul.servers').textContent.includes('1 of 2 movers up') && `+
		`[...%s][1]?.textContent.startsWith('Mover 1 %s down: ') && [...%s][1].querySelector('.down') !== null`, delta, movers, striped.addrs[1], movers), 15*time.Second)
	t.Logf("a killed mover on the endpoints page: %s", eval[string](p, `[...`+movers+`][1].textContent`))

	// A reload keeps the session, and the panes where they were.
	p.do("files page", chromedp.Click(chromedp.CSS(`#nav a[href="#/files"]`)))
	p.wait("the files page", `location.hash.startsWith('#/files')`, 5*time.Second) // before the reload, not after
	p.do("reload", chromedp.Reload())
	p.waitText(rightPane+` tbody`, "notes.txt")
	t.Logf("file manager after a reload: %s", p.timing())

	// A narrow window stacks the panes.
	p.do("narrow", chromedp.EmulateViewport(420, 900))
	if !eval[bool](p, `document.querySelector('`+leftPane+`').getBoundingClientRect().bottom <= document.querySelector('`+rightPane+`').getBoundingClientRect().top`) {
		t.Error("the panes do not stack in a narrow window")
	}
	p.shot("files-narrow")
	p.do("wide", chromedp.EmulateViewport(1280, 860))

	// Deactivate beta, remove alpha.
	p.do("endpoints page, last time", chromedp.Click(chromedp.CSS(`#nav a[href="#/endpoints"]`)),
		chromedp.Click(`//article[.//h2[text()="alice#beta"]]//button[text()="Deactivate"]`))
	p.toast("endpoint alice#beta is deactivated")
	p.wait("beta deactivated", `[...document.querySelectorAll('article.endpoint')].some(a => a.textContent.includes('alice#beta') && a.textContent.includes('not activated'))`, 5*time.Second)
	p.do("remove alpha", chromedp.Click(`//article[.//h2[text()="alice#alpha"]]//button[text()="Remove"]`))
	p.dialogSubmit("confirm the removal")
	p.wait("alpha removed", `![...document.querySelectorAll('article.endpoint h2')].some(h => h.textContent === 'alice#alpha')`, 5*time.Second)

	// An endpoint reached only through beta: the card says so; then it goes.
	p.do("add gamma", chromedp.Click(chromedp.CSS(`.heading button.primary`)))
	p.dialogSubmit("add gamma", "name", "gamma", "servers", "ftp://10.1.0.7:2811", "via", "alice#beta")
	p.wait("gamma reached through beta", `[...document.querySelectorAll('article.endpoint')].some(a => a.textContent.includes('alice#gamma') && a.textContent.includes('Reached through') && a.textContent.includes('alice#beta'))`, 5*time.Second)
	p.do("remove gamma", chromedp.Click(`//article[.//h2[text()="alice#gamma"]]//button[text()="Remove"]`))
	p.dialogSubmit("confirm the removal of gamma")
	p.wait("gamma removed", `![...document.querySelectorAll('article.endpoint h2')].some(h => h.textContent === 'alice#gamma')`, 5*time.Second)

	// Sign out: the session is gone for the API too.
	p.do("sign out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("signin-title")))
	if status := eval[int](p, `fetch('/api/v0.10/task_list').then(r => r.status)`); status != http.StatusUnauthorized {
		t.Errorf("API after sign-out: %d", status)
	}
	p.mu.Lock()
	if len(p.problems) > 0 {
		t.Errorf("the page reported:\n%s", strings.Join(p.problems, "\n"))
	}
	p.mu.Unlock()
	t.Logf("browser test took %v", time.Since(start).Round(time.Millisecond))
}

// TestWebAppDestinations: the transfer dialog adds a second destination,
// and the task page shows each destination's progress.
func TestWebAppDestinations(t *testing.T) {
	chromium := needChromium(t)
	alpha := startFerryConfig(t, ferryConfig{Anonymous: true})
	beta := startFerryConfig(t, ferryConfig{Anonymous: true, Args: []string{"--multicast"}})
	gamma := startFerryConfig(t, ferryConfig{Anonymous: true, Args: []string{"--multicast"}})
	for i := range 6 {
		writeRandomFile(t, alpha.Path(fmt.Sprintf("run1/f%02d.dat", i)), 30000)
	}
	svc := startService(t, serviceConfig{})
	c := newServiceUser(t, svc, "")
	c.addEndpoint("alpha", alpha)
	c.addEndpoint("beta", beta)
	c.addEndpoint("gamma", gamma)
	p := newPage(t, chromium, svc.URL())
	p.transferRun1(svc)
	p.do("add a destination", chromedp.WaitVisible(chromedp.CSS(`dialog[open]`)),
		chromedp.Click(`//dialog[@open]//button[text()="Add destination"]`), chromedp.WaitVisible(chromedp.CSS(`dialog[open] [name=more_endpoint]`)))
	p.dialogSubmit("transfer run1 to two", "label", "to two", "more_endpoint", "alice#gamma", "more_path", "/copies")
	p.toast("Transfer submitted")
	p.do("activity page", chromedp.Click(chromedp.CSS(`#nav a[href="#/activity"]`)))
	p.wait("the transfer succeeds", taskStatus("to two")+` === 'SUCCEEDED'`, 60*time.Second)
	p.waitText(`tr[data-task]`, "alice#alpha → alice#beta, alice#gamma")
	p.do("task page", chromedp.Click(`//a[text()="to two"]`))
	p.waitText(`h1`, "to two")
	p.waitText(`table.destinations`, "alice#gamma")
	p.wait("every destination has every file", `[...document.querySelectorAll('table.destinations tbody tr')].length === 2 && `+
		`[...document.querySelectorAll('table.destinations tbody tr')].every(r => r.textContent.includes('6/6 files'))`, 10*time.Second)
	p.shot("task-destinations")
	for i := range 6 {
		rel := fmt.Sprintf("run1/f%02d.dat", i)
		if err := compareFiles(alpha.Path(rel), beta.Path(rel)); err != nil {
			t.Error(err)
		}
		if err := compareFiles(alpha.Path(rel), gamma.Path("copies/"+rel)); err != nil {
			t.Error(err)
		}
	}
	p.mu.Lock()
	if len(p.problems) > 0 {
		t.Errorf("the page reported:\n%s", strings.Join(p.problems, "\n"))
	}
	p.mu.Unlock()
}

// TestWebRenameNoReplace: renaming a file onto a name that is taken
// leaves both files as they were and says so in the dialog, which stays
// open; ticking "Replace" then replaces it.
func TestWebRenameNoReplace(t *testing.T) {
	chromium := needChromium(t)
	alpha := startFerryConfig(t, ferryConfig{Anonymous: true})
	files := map[string]string{"a.txt": "A", "b.txt": "B"}
	for name, data := range files {
		if err := os.WriteFile(alpha.Path(name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	svc := startService(t, serviceConfig{})
	c := newServiceUser(t, svc, "")
	c.addEndpoint("alpha", alpha)
	p := newPage(t, chromium, svc.URL())
	p.do("open the app", chromedp.Navigate(svc.URL()+"/"), chromedp.WaitVisible(chromedp.ID("signin-title")))
	p.do("sign in", chromedp.SendKeys(chromedp.CSS(`input[name=username]`), "alice"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), servicePassword), chromedp.Click(chromedp.CSS(`form.signin button`)),
		chromedp.WaitVisible(chromedp.CSS(leftPane)))
	p.do("files page", chromedp.Click(chromedp.CSS(`#nav a[href="#/files"]`)), chromedp.WaitVisible(chromedp.CSS(leftPane)))
	p.do("open alpha", chromedp.SendKeys(chromedp.CSS(leftPane+` input[name=endpoint]`), "alice#alpha\r"))
	p.waitText(leftPane+` tbody`, "b.txt")
	p.do("rename a.txt to b.txt", chromedp.Click(row(leftPane, "a.txt")+`/td[3]`),
		chromedp.Click(`//section[@aria-labelledby="left-title"]//button[text()="Rename"]`),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open]`)),
		chromedp.SetValue(chromedp.CSS(`dialog[open] [name=name]`), "b.txt"),
		chromedp.Click(chromedp.CSS(`dialog[open] button[type=submit]`)))
	p.waitText(`dialog[open] .error`, "/b.txt already exists")
	wantFiles(t, alpha.Root(), files)
	p.snap("rename-taken")
	p.do("replace it", chromedp.Click(chromedp.CSS(`dialog[open] [name=overwrite]`)),
		chromedp.Click(chromedp.CSS(`dialog[open] button[type=submit]`)))
	p.wait("dialog closed", `!document.querySelector('dialog[open]')`, 15*time.Second)
	p.wait("the pane refreshed", `!document.querySelector('`+leftPane+` tbody').textContent.includes('a.txt')`, 15*time.Second)
	wantFiles(t, alpha.Root(), map[string]string{"b.txt": "A"})
	p.mu.Lock()
	if len(p.problems) > 0 {
		t.Errorf("the page reported:\n%s", strings.Join(p.problems, "\n"))
	}
	p.mu.Unlock()
}
