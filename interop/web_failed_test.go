//go:build interop

package interop

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"ferry/internal/passwd"
	"ferry/service/api"
	"ferry/service/domain"
)

// TestWebFailedTask: a task that failed with nothing more to say than
// FAILED shows one FAILED in its badge, and a progress bar that shows
// what it did (nothing), not a full one. The delete of a directory
// without -r waits for the endpoint's activation (so that the service
// does not refuse it at once), then fails.
func TestWebFailedTask(t *testing.T) {
	chromium := needChromium(t)
	pwfile := filepath.Join(t.TempDir(), "passwd")
	if err := passwd.Set(pwfile, "carol", "carol-secret", bcrypt.MinCost); err != nil {
		t.Fatal(err)
	}
	beta := startFerryConfig(t, ferryConfig{Args: []string{"--password-file", pwfile}})
	writeRandomFile(t, beta.Path("d/x.dat"), 100)
	svc := startService(t, serviceConfig{})
	c := newServiceUser(t, svc, "")
	c.addEndpoint("beta", beta, "--auth", "password")
	id := strings.TrimSpace(c.ok("", "rm", "--no-wait", "--label", "a failed delete", "alice#beta:/d"))
	c.ok("carol-secret\n", "endpoint", "activate", "beta", "--username", "carol")
	task := c.waitFor(id, "the delete fails", time.Minute, func(t api.Task) bool { return domain.Done(t.Status) })
	if task.Status != domain.StatusFailed || task.FatalError == nil || task.FatalError.Code != "FAILED" {
		t.Fatalf("the delete of a directory without -r: %+v, want FAILED with the code FAILED", task)
	}

	p := newPage(t, chromium, svc.URL())
	p.do("open the app", chromedp.Navigate(svc.URL()+"/"), chromedp.WaitVisible(chromedp.ID("signin-title")))
	p.do("sign in", chromedp.SendKeys(chromedp.CSS(`input[name=username]`), "alice"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), servicePassword), chromedp.Click(chromedp.CSS(`form.signin button`)),
		chromedp.WaitVisible(chromedp.CSS(leftPane)))
	p.do("task page", chromedp.Navigate(svc.URL()+"/#/task/"+id))
	p.waitText(`.summary .badge`, "FAILED")
	if got := eval[string](p, `document.querySelector('.summary .badge').textContent`); got != "FAILED" {
		t.Errorf("the badge of a FAILED task with the code FAILED says %q", got)
	}
	if got := eval[float64](p, `document.querySelector('.summary progress').value`); got != 0 {
		t.Errorf("the progress bar of a delete that did nothing is at %v, want 0", got)
	}

	// A delete of a tree says what it removed: its path, and the files and
	// directory under it (a delete task's files count what it removed).
	for i := range 3 {
		writeRandomFile(t, beta.Path(fmt.Sprintf("tree/f%d.dat", i)), 100)
	}
	done := strings.TrimSpace(c.ok("", "rm", "-r", "--no-wait", "alice#beta:/tree"))
	c.waitFor(done, "the delete of a tree ends", time.Minute, func(t api.Task) bool { return domain.Done(t.Status) })
	p.do("the delete's page", chromedp.Navigate(svc.URL()+"/#/task/"+done))
	p.waitText(`.summary`, "1/1 path deleted")
	if got := eval[string](p, `document.querySelector('.summary').textContent`); !strings.Contains(got, "3 files and 1 directory removed") {
		t.Errorf("the summary of a delete of 3 files in a directory says %q", got)
	}
}
