//go:build interop

package interop

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestWebGSI: in a real browser, a user adds two gsi endpoints, ferry's
// GSI server naming a real myproxy-server and GCT's naming none, and
// activates them: GCT's with the grid proxy file grid-proxy-init wrote
// (chosen in the dialog), ferry's with the MyProxy username and pass
// phrase. Each card then says it is active, and the file manager lists
// the activated endpoint.
func TestWebGSI(t *testing.T) {
	chromium := needChromium(t)
	needGSITools(t, "myproxy-server", "myproxy-init")
	u := newGSIUser(t, "ca1", "alice")
	mp := startMyProxy(t, u.CA.Dir, u.HostCert, u.HostKey)
	const pass = "web MyProxy pass phrase 7"
	myproxyInit(t, mp, u.CA.Dir, u.Cert, u.Key, "alice-mp", pass)
	fgsi := startFerryGSI(t, u, map[string]string{u.DN: "alice"})
	gct := startGCTGSI(t, u.CA.Dir, u.HostCert, u.HostKey, map[string]string{u.DN: ""})
	writeRandomFile(t, fgsi.Path("grid-results/run7.dat"), 4096)
	svc := startService(t, serviceConfig{Args: []string{"--gsi-ca-dir", u.CA.Dir}})
	newServiceUser(t, svc, "")

	p := newPage(t, chromium, svc.URL())
	p.do("open the app", chromedp.Navigate(svc.URL()+"/"), chromedp.WaitVisible(chromedp.ID("signin-title")))
	p.do("sign in", chromedp.SendKeys(chromedp.CSS(`input[name=username]`), "alice"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), servicePassword), chromedp.Click(chromedp.CSS(`form.signin button`)),
		chromedp.WaitVisible(chromedp.CSS(leftPane)))
	p.do("endpoints page", chromedp.Click(chromedp.CSS(`#nav a[href="#/endpoints"]`)), chromedp.WaitVisible(chromedp.CSS(`.heading button.primary`)))
	p.do("add grid", chromedp.Click(chromedp.CSS(`.heading button.primary`)))
	p.dialogSubmit("add grid", "name", "grid", "servers", "gsiftp://"+fgsi.addr, "auth_method", "gsi", "myproxy_server", mp)
	p.waitText(`article.endpoint`, "gsi, MyProxy server "+mp)
	p.do("add gct", chromedp.Click(chromedp.CSS(`.heading button.primary`)))
	p.dialogSubmit("add gct", "name", "gct", "servers", "gsiftp://"+gct.addr, "auth_method", "gsi")
	p.waitText(`article.endpoint h2`, "alice#gct")

	card := func(name string) string { return fmt.Sprintf(`//article[.//h2[text()=%q]]`, name) }
	p.do("activate gct", chromedp.Click(card("alice#gct")+`//button[text()="Activate"]`), chromedp.WaitVisible(chromedp.CSS(`dialog[open] [name=proxy_file]`)))
	p.shot("activate-gsi")
	p.do("choose the proxy file", chromedp.SetUploadFiles(chromedp.CSS(`dialog[open] [name=proxy_file]`), []string{u.Proxy}))
	p.do("submit", chromedp.Click(chromedp.CSS(`dialog[open] button[type=submit]`)))
	p.toast("alice#gct is activated")

	p.do("activate grid", chromedp.Click(card("alice#grid")+`//button[text()="Activate"]`), chromedp.WaitVisible(chromedp.CSS(`dialog[open] [name=myproxy_username]`)))
	myproxyTurn(t, mp, func() {
		p.dialogSubmit("activate grid", "myproxy_username", "alice-mp", "myproxy_passphrase", pass)
	})
	p.toast("MyProxy server " + mp)
	p.wait("both active", `[...document.querySelectorAll('article.endpoint')].filter(a => a.textContent.includes('active, ')).length === 2`, 15*time.Second)

	p.do("files page", chromedp.Click(chromedp.CSS(`#nav a[href="#/files"]`)), chromedp.WaitVisible(chromedp.CSS(leftPane)))
	p.do("open grid", chromedp.SendKeys(chromedp.CSS(leftPane+` input[name=endpoint]`), "alice#grid\r"))
	p.waitText(leftPane+` tbody`, "grid-results")
	p.mu.Lock()
	if len(p.problems) > 0 {
		t.Errorf("the page reported:\n%s", strings.Join(p.problems, "\n"))
	}
	p.mu.Unlock()
}
