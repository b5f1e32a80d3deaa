//go:build interop

package interop

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestWebPanePages: a file pane of a directory of 2,500 entries shows
// its first 1,000 and a button for the next page until it holds them
// all; it never asks the service for more than a page.
func TestWebPanePages(t *testing.T) {
	chromium := needChromium(t)
	alpha := startFerryConfig(t, ferryConfig{Anonymous: true})
	const many = 2500
	if err := os.Mkdir(alpha.Path("big"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range many {
		if err := os.WriteFile(alpha.Path(fmt.Sprintf("big/f%04d", i)), nil, 0o644); err != nil {
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
	p.waitText(leftPane+` tbody`, "big")
	p.do("open big", chromedp.Click(row(leftPane, "big")+`//button`))
	rows := func(n int) string {
		return fmt.Sprintf(`document.querySelectorAll('%s tbody tr[data-i]').length === %d`, leftPane, n)
	}
	more := `//section[@aria-labelledby="left-title"]//p[contains(@class,"note")]//button`
	for _, n := range []int{1000, 2000} {
		p.wait(fmt.Sprintf("%d rows", n), rows(n), 30*time.Second)
		p.waitText(leftPane+` .note`, fmt.Sprintf("Showing %d of %d entries", n, many))
		p.do("show more", chromedp.Click(more))
	}
	p.wait("every row", rows(many), 30*time.Second)
	p.waitText(leftPane+` .note`, fmt.Sprintf("%d entries", many))
	if eval[bool](p, `!!document.querySelector('`+leftPane+` .note button')`) {
		t.Errorf("a button for more when the pane holds every entry")
	}
	if n := eval[int](p, fmt.Sprintf(`new Set([...document.querySelectorAll('%s tbody tr[data-i] td.name')].map(td => td.textContent)).size`, leftPane)); n != many {
		t.Errorf("%d names shown, want %d", n, many)
	}
	asked := eval[[]string](p, `performance.getEntriesByType('resource').map(e => e.name).filter(n => n.includes('/ls?') && n.includes('big'))`)
	for _, u := range asked {
		if !strings.Contains(u, "limit=1000") {
			t.Errorf("the pane asked for %s, not one page", u)
		}
	}
	if len(asked) != 3 {
		t.Errorf("the pane asked %d times for the listing of big, want 3: %q", len(asked), asked)
	}
	p.mu.Lock()
	if len(p.problems) > 0 {
		t.Errorf("the page reported:\n%s", strings.Join(p.problems, "\n"))
	}
	p.mu.Unlock()
}
