//go:build interop

package interop

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"ferry/service/api"
	"ferry/service/domain"
	"ferry/service/sqlstore"
)

// TestWebTaskEventsPage: the task page of a task with a long history
// reads the end of it, not all of it. A transfer ends SUCCEEDED, 2,500
// more events are added to its history in the service's database, and
// the page, opened then, shows the latest ones and says of how many,
// having asked the API for two pages of events at most (one to learn the
// total), not the whole history.
func TestWebTaskEventsPage(t *testing.T) {
	chromium := needChromium(t)
	alpha := startFerryConfig(t, ferryConfig{Anonymous: true})
	beta := startFerryConfig(t, ferryConfig{Anonymous: true})
	writeRandomFile(t, alpha.Path("one.dat"), 1000)
	svc := startService(t, serviceConfig{})
	c := newServiceUser(t, svc, "")
	c.addEndpoint("alpha", alpha)
	c.addEndpoint("beta", beta)
	id := c.transfer("alice#alpha:/one.dat", "alice#beta:/one.dat", "--label", "long history")
	c.waitFor(id, "the transfer ends", 60*time.Second, func(t api.Task) bool { return t.Status == domain.StatusSucceeded })

	db, err := sqlstore.Open(context.Background(), filepath.Join(svc.cfg.Data, "ferry.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const more = 2500
	var evs []domain.Event
	for i := range more {
		evs = append(evs, domain.Event{TaskID: id, Code: domain.EventFault, IsError: true, Description: fmt.Sprintf("fault number %d", i)})
	}
	if err := db.AddEvents(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	_, total, err := db.Events(context.Background(), id, domain.Page{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}

	p := newPage(t, chromium, svc.URL())
	p.do("open the app", chromedp.Navigate(svc.URL()+"/"), chromedp.WaitVisible(chromedp.ID("signin-title")))
	p.do("sign in", chromedp.SendKeys(chromedp.CSS(`input[name=username]`), "alice"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), servicePassword), chromedp.Click(chromedp.CSS(`form.signin button`)),
		chromedp.WaitVisible(chromedp.CSS(leftPane)))
	p.do("task page", chromedp.Navigate(svc.URL()+"/#/task/"+id))
	p.waitText(`table.events`, fmt.Sprintf("fault number %d", more-1))
	p.waitText(`p.muted`, fmt.Sprintf("of %d events", total))
	asked := eval[[]string](p, `performance.getEntriesByType('resource').map(r => r.name).filter(n => n.includes('/event_list'))`)
	if len(asked) > 2 {
		t.Errorf("the task page asked for %d pages of events (%s); want 2 at most", len(asked), strings.Join(asked, ", "))
	}
	p.mu.Lock()
	if len(p.problems) > 0 {
		t.Errorf("the page reported:\n%s", strings.Join(p.problems, "\n"))
	}
	p.mu.Unlock()
}
