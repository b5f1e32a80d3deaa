//go:build interop

package interop

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestWebAppResearcher: what makes the app pleasant to use. The panes
// list the user's endpoints before anything is typed (typing filters);
// hidden files show only when asked; toasts go by themselves; errors
// are the API's sentences; the activity list names a task by its label
// or its paths and filters by status, type and label; the task page
// says where the files went and pages through the transferred and the
// failed files, 50 at a time; events say bytes in human units.
func TestWebAppResearcher(t *testing.T) {
	chromium := needChromium(t)
	alpha := startFerryConfig(t, ferryConfig{Anonymous: true})
	beta := startFerryConfig(t, ferryConfig{Anonymous: true})
	archive := startFerryConfig(t, ferryConfig{Args: []string{"--anonymous"}}) // read-only: every file fails
	for i := range 120 {
		writeRandomFile(t, alpha.Path(fmt.Sprintf("many/f%03d.dat", i)), 1000)
	}
	for i := range 60 {
		writeRandomFile(t, alpha.Path(fmt.Sprintf("some/f%02d.dat", i)), 100)
	}
	writeRandomFile(t, alpha.Path("readme.txt"), 1200)
	writeRandomFile(t, archive.Path("some/f99.dat"), 10) // /some is there: its files fail, not the directory
	writeRandomFile(t, alpha.Path(".secret"), 10)
	svc := startService(t, serviceConfig{})
	c := newServiceUser(t, svc, "")
	c.addEndpoint("alpha", alpha, "--description", "the instrument's disk")
	c.addEndpoint("beta", beta, "--description", "the group's archive")
	c.addEndpoint("archive", archive)
	failing := c.wait(c.transfer("alpha:/some", "archive:/some", "-r", "--label", "into the read-only archive"), time.Minute)
	if failing.SubtasksFailed != 60 {
		t.Fatalf("the transfer into a read-only endpoint: %d of %d files failed, want 60", failing.SubtasksFailed, failing.Files)
	}

	p := newPage(t, chromium, svc.URL())
	p.do("open the app", chromedp.Navigate(svc.URL()+"/"), chromedp.WaitVisible(chromedp.ID("signin-title")))
	p.do("sign in", chromedp.SendKeys(chromedp.CSS(`input[name=username]`), "alice"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), servicePassword), chromedp.Click(chromedp.CSS(`form.signin button`)),
		chromedp.WaitVisible(chromedp.CSS(leftPane)))

	// The endpoint box lists the endpoints once focused; typing filters.
	options := func(pane string) string {
		return eval[string](p, fmt.Sprintf(`[...document.querySelectorAll(%q)].map(o => o.firstChild.textContent).join(' ')`, pane+` [role=listbox]:not([hidden]) [role=option]`))
	}
	p.do("focus the left endpoint box", chromedp.Focus(chromedp.CSS(leftPane+` input[name=endpoint]`)))
	p.wait("the endpoint list", `document.querySelectorAll('`+leftPane+` [role=listbox]:not([hidden]) [role=option]').length === 3`, 10*time.Second)
	if got := options(leftPane); !strings.Contains(got, "alice#alpha") || !strings.Contains(got, "alice#beta") ||
		eval[string](p, `document.querySelector('`+leftPane+` input[name=endpoint]').getAttribute('aria-expanded')`) != "true" {
		t.Errorf("endpoint list before typing: %q", got)
	}
	p.snap("files-endpoints")
	p.do("pick alpha", chromedp.Click(`//section[@aria-labelledby="left-title"]//li[@role="option"][span[text()="alice#alpha"]]`))
	p.waitText(leftPane+` tbody`, "readme.txt")
	p.do("type in the right box", chromedp.SendKeys(chromedp.CSS(rightPane+` input[name=endpoint]`), "bet"))
	p.wait("the list filtered", `[...document.querySelectorAll('`+rightPane+` [role=listbox]:not([hidden]) [role=option]')].map(o => o.firstChild.textContent).join() === 'alice#beta'`, 10*time.Second)
	p.do("choose it with the keyboard", chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.Enter))
	p.waitText(rightPane+` tbody`, "This directory is empty")
	p.waitText(rightPane+` h2`, "alice#beta")

	// Hidden files: hidden until asked for.
	names := func(pane string) string {
		return eval[string](p, fmt.Sprintf(`[...document.querySelectorAll(%q)].map(e => e.textContent).join(' ')`, pane+` tbody td.name`))
	}
	if got := names(leftPane); got != "many some readme.txt" {
		t.Errorf("alpha's root: %q, want no .secret", got)
	}
	p.do("show hidden files", chromedp.Click(chromedp.CSS(leftPane+` input[name=show_hidden]`)))
	p.wait(".secret shown", `document.querySelector('`+leftPane+` tbody').textContent.includes('.secret')`, 10*time.Second)
	p.do("hide them again", chromedp.Click(chromedp.CSS(leftPane+` input[name=show_hidden]`)))
	p.wait(".secret hidden", `!document.querySelector('`+leftPane+` tbody').textContent.includes('.secret')`, 10*time.Second)

	// An error is the API's message, without its code.
	p.do("go to a missing directory", chromedp.SetValue(chromedp.CSS(leftPane+` input[name=path]`), "/no/such/dir"),
		chromedp.Click(`//section[@aria-labelledby="left-title"]//button[text()="Go"]`))
	p.waitText(leftPane+` .status`, "list /no/such/dir on alice#alpha: ")
	api := eval[map[string]any](p, `fetch('/api/v0.10/operation/endpoint/' + encodeURIComponent('alice#alpha') + '/ls?path=/no/such/dir').then(r => r.json())`)
	if got, want := eval[string](p, `document.querySelector('`+leftPane+` .status').textContent`), fmt.Sprint(api["message"]); got != want {
		t.Errorf("the pane says %q, want %q", got, want)
	}
	for _, tc := range []struct{ err, want string }{
		{`{status: 404, message: 'Path /x does not exist.', code: 'ClientError.NotFound', requestId: 'r1'}`, "Path /x does not exist."},
		{`{status: 500, message: 'The store failed.', code: 'ServiceError', requestId: 'r2'}`, "The store failed. (request ID r2)"},
	} {
		if got := eval[string](p, `import('/assets/ui.js').then(m => m.errorText(`+tc.err+`))`); got != tc.want {
			t.Errorf("errorText(%s) = %q, want %q", tc.err, got, tc.want)
		}
	}

	// Transfer many, unlabeled, and readme.txt with a label.
	p.do("select many", chromedp.Click(row(leftPane, "many")+`/td[3]`))
	p.do("transfer it", chromedp.Click(chromedp.CSS(leftPane+` button[aria-label^="Transfer the selection"]`)))
	p.dialogSubmit("transfer many")
	p.waitText(`#toasts .toast[role=status]`, "Transfer submitted")
	p.wait("the toast goes by itself", `![...document.querySelectorAll('#toasts .toast')].some(t => t.textContent.includes('Transfer submitted'))`, 10*time.Second)
	p.do("select readme.txt", chromedp.Click(row(leftPane, "many")+`/td[3]`), chromedp.Click(row(leftPane, "readme.txt")+`/td[3]`))
	p.do("transfer readme.txt", chromedp.Click(chromedp.CSS(leftPane+` button[aria-label^="Transfer the selection"]`)))
	p.dialogSubmit("transfer readme.txt", "label", "readme copy")
	p.toast("Transfer submitted")

	// Activity: names, then filters.
	p.do("activity page", chromedp.Click(chromedp.CSS(`#nav a[href="#/activity"]`)))
	manyName := "alice#alpha:/many/ → alice#beta:/many/"
	p.wait("both transfers succeed", taskStatus("readme copy")+` === 'SUCCEEDED' && `+taskStatus(manyName)+` === 'SUCCEEDED'`, 60*time.Second)
	p.toast("“readme copy” succeeded")
	rows := func() string {
		return eval[string](p, `[...document.querySelectorAll('tr[data-task] a')].map(a => a.textContent).join('|')`)
	}
	if got, want := rows(), "readme copy|"+manyName+"|into the read-only archive"; got != want {
		t.Errorf("activity: %q, want %q", got, want)
	}
	filter := func(what, sel, value, want string) {
		t.Helper()
		event := map[bool]string{true: "input", false: "change"}[sel == "label"]
		p.do(what, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(e => { e.value = %q; e.dispatchEvent(new Event(%q)); })(document.querySelector('form.filters [name=%s]'))`, value, event, sel)))
		p.wait(what, fmt.Sprintf(`[...document.querySelectorAll('tr[data-task] a')].map(a => a.textContent).join('|') === %q`, want), 10*time.Second)
	}
	filter("failed tasks", "status", "FAILED", "into the read-only archive")
	filter("succeeded tasks", "status", "SUCCEEDED", "readme copy|"+manyName)
	filter("succeeded, label readme", "label", "READ", "readme copy")
	p.shot("activity-filters")
	filter("no label", "label", "", "readme copy|"+manyName)
	filter("deletes", "type", "DELETE", "")
	p.waitText(`tbody`, "No task matches these filters.")
	filter("transfers", "type", "TRANSFER", "readme copy|"+manyName)
	filter("any status", "status", "", "readme copy|"+manyName+"|into the read-only archive")

	// The task page: where, and the files 50 at a time; events in units.
	p.do("task page", chromedp.Click(fmt.Sprintf(`//a[text()=%q]`, manyName)))
	p.waitText(`h1`, manyName)
	p.waitText(`.counters`, "alice#alpha:/many/")
	p.waitText(`.counters`, "alice#beta:/many/")
	p.waitText(`section[aria-labelledby=done-title] h2`, "Transferred files (120)")
	onPage := func(want string, rows int) {
		t.Helper()
		p.wait("page "+want, fmt.Sprintf(`document.querySelector('section[aria-labelledby=done-title] .pager span').textContent === %q && `+
			`document.querySelectorAll('section[aria-labelledby=done-title] tbody tr').length === %d`, want, rows), 10*time.Second)
	}
	next := `//section[@aria-labelledby="done-title"]//button[starts-with(text(),"Next")]`
	prev := `//section[@aria-labelledby="done-title"]//button[starts-with(text(),"Previous")]`
	// The files come in the order they arrived (tar batches race), so
	// every name must be on one of the three pages, none twice.
	const rowsText = `document.querySelector('section[aria-labelledby=done-title] tbody').innerText`
	var shown strings.Builder
	onPage("1–50", 50)
	shown.WriteString(eval[string](p, rowsText))
	p.do("next page", chromedp.Click(next))
	onPage("51–100", 50)
	shown.WriteString(eval[string](p, rowsText))
	p.do("last page", chromedp.Click(next))
	onPage("101–120", 20)
	shown.WriteString(eval[string](p, rowsText))
	for i := range 120 {
		// One row each: the name as the file and as where it went.
		if n := strings.Count(shown.String(), fmt.Sprintf("/many/f%03d.dat", i)); n != 2 {
			t.Errorf("/many/f%03d.dat is in %d cells of the three pages, want 2 (one row)", i, n)
		}
	}
	if !eval[bool](p, `document.evaluate('`+next+`', document, null, 9).singleNodeValue.disabled`) {
		t.Error("Next is enabled on the last page")
	}
	p.do("previous page", chromedp.Click(prev))
	onPage("51–100", 50)
	p.waitText(`.events`, "117.2 KiB")
	if ev := eval[string](p, `document.querySelector('.events').textContent`); strings.Contains(ev, " bytes") {
		t.Errorf("events with bytes in them: %s", ev)
	}
	p.shot("task-files")

	// The failed task: its 60 failed files, 50 and then 10, and why.
	p.do("activity page again", chromedp.Click(chromedp.CSS(`#nav a[href="#/activity"]`)))
	p.do("the failed task", chromedp.Click(`//a[text()="into the read-only archive"]`))
	p.waitText(`section[aria-labelledby=failed-title] h2`, "Failed files (60)")
	p.wait("50 failed files", `document.querySelectorAll('section[aria-labelledby=failed-title] tbody tr').length === 50`, 10*time.Second)
	p.do("next failed page", chromedp.Click(`//section[@aria-labelledby="failed-title"]//button[starts-with(text(),"Next")]`))
	p.wait("10 failed files", `document.querySelectorAll('section[aria-labelledby=failed-title] tbody tr').length === 10`, 10*time.Second)
	if fatal := eval[string](p, `document.querySelector('.summary .error')?.textContent ?? ''`); failing.FatalError != nil && strings.Contains(fatal, failing.FatalError.Code+":") {
		t.Errorf("the task's error shows its code: %q", fatal)
	}
	p.mu.Lock()
	if len(p.problems) > 0 {
		t.Errorf("the page reported:\n%s", strings.Join(p.problems, "\n"))
	}
	p.mu.Unlock()
}
