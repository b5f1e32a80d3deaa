//go:build interop

package interop

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"ferry/service/domain"
)

// TestWebTaskETA: the task page of a running task of one 16 GiB file (a
// synthetic source into a sink) shows a time left no longer than ten
// times what the task's average rate so far says, plus a few seconds
// (never "53 min" for a task near its end), and none once it is done.
// Its STARTED event shows in lines. The app's rate is a moving average: fed, in the browser, the polls of a
// task whose counter moves in batches, one of them small, it does not
// take that batch for the rate.
func TestWebTaskETA(t *testing.T) {
	chromium := needChromium(t)
	c, svc, _ := syntheticService(t, hugeFileSpec, serviceConfig{})
	p := newPage(t, chromium, svc.URL())
	p.do("open the app", chromedp.Navigate(svc.URL()+"/"), chromedp.WaitVisible(chromedp.ID("signin-title")))
	p.do("sign in", chromedp.SendKeys(chromedp.CSS(`input[name=username]`), "alice"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), servicePassword), chromedp.Click(chromedp.CSS(`form.signin button`)),
		chromedp.WaitVisible(chromedp.CSS(`#nav`)))

	// A task that moves about 1 GB each 1.5-s poll, then one small batch
	// and a poll that sees no change, near its end.
	steps := [][2]float64{{0, 0}, {1.5, 1e9}, {3, 2e9}, {4.5, 3e9}, {6, 4e9}, {7.5, 5e9}, {9, 6e9},
		{10.5, 7e9}, {12, 8e9}, {13.5, 8.01e9}, {15, 8.01e9}}
	js, _ := json.Marshal(steps)
	var fed [][3]any
	if err := json.Unmarshal([]byte(eval[string](p, fmt.Sprintf(`(async () => {
		const tasks = await import('/assets/tasks.js');
		const real = Date.now, out = [];
		try {
			for (const [sec, bytes] of %s) {
				Date.now = () => 1e12 + sec * 1000;
				const t = { task_id: 'fed', status: 'ACTIVE', files: 1, subtasks_succeeded: 0, subtasks_failed: 0,
					bytes_total: 8.6e9, bytes_transferred: bytes, effective_bytes_per_second: 0 };
				tasks.sample(t);
				out.push([sec, bytes, tasks.progress(t).text]);
			}
		} finally {
			Date.now = real;
		}
		return JSON.stringify(out);
	})()`, js))), &fed); err != nil {
		t.Fatal(err)
	}
	for _, f := range fed {
		sec, moved, text := f[0].(float64), f[1].(float64), f[2].(string)
		left, ok := shownETA(text)
		if !ok || moved == 0 {
			continue
		}
		if most := 3 * time.Duration(sec*(8.6e9-moved)/moved*float64(time.Second)); left > most+time.Second {
			t.Errorf("fed %.0f B after %.1f s of 8.6e9: %q; want a time left of at most %v", moved, sec, text, most+time.Second)
		}
	}

	id := c.transfer("--no-verify-checksum", "-r", "src:/", "dst:/out/")
	p.do("task page", chromedp.Navigate(svc.URL()+"/#/task/"+id))
	p.waitText(`h1`, "src")
	summary := `document.querySelector('.summary')?.innerText ?? ''`
	start := time.Now()
	var shown []string
	for {
		task := c.task(id)
		text := eval[string](p, summary)
		if domain.Done(task.Status) {
			break
		}
		shown = append(shown, text)
		el := time.Since(start)
		if left, ok := shownETA(text); ok {
			moved, total := shownBytesOf(text)
			if moved > total/20 {
				if most := 10*time.Duration(float64(el)*float64(total-moved)/float64(moved)) + 5*time.Second; left > most {
					t.Errorf("after %v, %q: want a time left of at most %v", el.Round(time.Second), text, most)
				}
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	if task := c.wait(id, 5*time.Minute); task.Status != domain.StatusSucceeded {
		t.Fatalf("task %s", task.Status)
	}
	p.wait("the page shows the task done", `document.body.innerText.includes('SUCCEEDED')`, 15*time.Second)
	if text := eval[string](p, summary); strings.Contains(text, "ETA") {
		t.Errorf("the task is done, and its page still shows a time left: %q", text)
	}
	t.Logf("the task page showed, polled every 300 ms:\n%s", strings.Join(shown, "\n"))
	p.waitText(`.events`, "STARTED")
	started := eval[string](p, `[...document.querySelectorAll('.events tr')].find(r => r.textContent.includes('STARTED'))?.lastElementChild?.innerText ?? ''`)
	if !strings.Contains(strings.TrimSpace(started), "\n") {
		t.Errorf("the STARTED event shows in one line, want its lines:\n%s", started)
	}
}

// etaRE is a time left as the web app says it: 9.5 s, 40 s, 3 min 2 s,
// 1 h 5 min.
var etaRE = regexp.MustCompile(`ETA (?:(\d+) h )?(?:(\d+) min ?)?(?:([0-9.]+) s)?`)

// shownETA is the time left a progress text shows, if any.
func shownETA(text string) (time.Duration, bool) {
	m := etaRE.FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	h, _ := strconv.Atoi(m[1])
	mins, _ := strconv.Atoi(m[2])
	s, _ := strconv.ParseFloat(m[3], 64)
	return time.Duration(h)*time.Hour + time.Duration(mins)*time.Minute + time.Duration(s*float64(time.Second)), true
}

// shownBytesOf is the "MOVED of TOTAL" of a progress text.
func shownBytesOf(text string) (moved, total int64) {
	m := regexp.MustCompile(`([0-9.]+ [KMGTPE]?i?B) of ([0-9.]+ [KMGTPE]?i?B)`).FindStringSubmatch(text)
	if m == nil {
		return 0, 0
	}
	return parseShownBytes(m[1]), parseShownBytes(m[2])
}
