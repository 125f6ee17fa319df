package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// views saves the console's page at both widths (screenshots named
// admin-<name>-1280.png and -390.png), failing on anything that does not
// fit either width or a chart label too small to read, then goes on at a
// desktop's.
func views(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	for _, w := range []int64{1280, 390} {
		if w == 390 {
			do(t, ctx, "phone width", chromedp.EmulateViewport(w, 844, chromedp.EmulateMobile))
		} else {
			do(t, ctx, "desktop width", chromedp.EmulateViewport(w, 900))
		}
		adminFits(t, ctx, fmt.Sprintf("%s at %d px", name, w))
		screenshot(t, ctx, fmt.Sprintf("admin-%s-%d.png", name, w))
	}
	do(t, ctx, "desktop width again", chromedp.EmulateViewport(1280, 900))
}

// adminOverflowJS names what does not fit the viewport's width: the page
// scrolling sideways, or a visible element whose right edge is past the
// viewport's.
const adminOverflowJS = `(() => {
	const w = window.innerWidth, out = [];
	if (document.documentElement.scrollWidth > w) out.push('the page is ' + document.documentElement.scrollWidth + ' px wide');
	for (const e of document.querySelectorAll('body *')) {
		if (!e.getClientRects().length || getComputedStyle(e).visibility === 'hidden') continue;
		const r = e.getBoundingClientRect();
		if (r.width > 0 && r.height > 0 && r.right > w + 0.5) out.push(e.tagName + '#' + e.id + '.' + e.className + ' ends at ' + Math.round(r.right));
	}
	return out.slice(0, 8).join('; ');
})()`

// adminSmallLabelsJS names the chart labels drawn under 11 px on screen.
const adminSmallLabelsJS = `[...document.querySelectorAll('svg text')].filter(e => e.getClientRects().length).map(e =>
	[e.textContent, parseFloat(getComputedStyle(e).fontSize) * e.ownerSVGElement.getScreenCTM().a]).filter(([, px]) => px < 11)
	.map(([text, px]) => text + ' ' + px.toFixed(1) + ' px').slice(0, 8).join('; ')`

// adminFits fails t when something does not fit the viewport's width (waiting a
// moment for a redraw at a new width) or a chart label is under 11 px.
func adminFits(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	var wide, small string
	for range 20 {
		var err error
		if wide, err = chromedp.Run(ctx, chromedp.Evaluate[string](adminOverflowJS)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if small, err = chromedp.Run(ctx, chromedp.Evaluate[string](adminSmallLabelsJS)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if wide == "" && small == "" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	if wide != "" {
		t.Errorf("%s: wider than the screen: %s", what, wide)
	}
	if small != "" {
		t.Errorf("%s: chart labels under 11 px: %s", what, small)
	}
}

func typeInto(id, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := chromedp.Evaluate[bool](fmt.Sprintf(`(document.getElementById(%q).value = "", true)`, id))(ctx, tg); err != nil {
			return err
		}
		_, err := chromedp.SendKeys(chromedp.ID(id), text)(ctx, tg)
		return err
	})
}

func isHidden(id string) string {
	return fmt.Sprintf("document.getElementById(%q).hidden", id)
}

// The admin console in a real browser against a running `shop serve`,
// through a whole sale: a shopper is refused at log-in; the admin logs in,
// sees the API's validation errors beside their fields, creates and edits
// a product, seeds a round, and watches the live view follow the test's
// own shoppers buying (available falls, a rate above zero); best sellers,
// visitors and a pickup store; a round with a waiting room shows its
// waiting and admitted; the audit runs clean. Every view is saved at 1280
// and 390 px; no request leaves the origin and nothing is logged as an
// error.
func TestBrowserAdmin(t *testing.T) {
	t.Parallel()
	const sku = "admin-demo"
	s := newShop(t, liveEnv(t))
	buyers := s.shoppers(t, 3, "admin-browser")
	ctx, noScriptErrors := browser(t)
	defer noScriptErrors()
	defer stayOnOrigin(t, ctx, s.URL)()
	net := watchNetwork(t, ctx, s.URL)
	defer net.check(t)
	// The fields the API refuses on purpose below.
	net.expect("POST /api/v1/admin/products 400")
	net.expect("PUT /api/v1/admin/products/" + sku + "/stock 400")
	net.expect("PUT /api/v1/admin/stores/paris-1 400")
	do(t, ctx, "desktop width", chromedp.EmulateViewport(1280, 900))

	adminRefusesShopper(t, ctx, s)
	adminLogIn(t, ctx, s)
	adminProducts(t, ctx, s, sku)
	adminSeed(t, ctx, s, sku, false)
	adminLive(t, ctx, s, sku, buyers)
	adminBestSellers(t, ctx, s, sku)
	adminVisitors(t, ctx, s, sku)
	adminStores(t, ctx, s)
	adminRoom(t, ctx, s, sku, buyers)
	adminAudit(t, ctx, s)
}

func adminRefusesShopper(t *testing.T, ctx context.Context, s *shop) {
	t.Helper()
	do(t, ctx, "open the console",
		chromedp.Navigate(s.URL+"/admin"),
		chromedp.WaitVisible(chromedp.ID("login-email")),
		typeInto("login-email", "admin-browser-0@shop.test"),
		typeInto("login-password", "shopper-password"),
		chromedp.Click(chromedp.ID("login-submit")),
	)
	until(t, ctx, "a shopper is told it is not an admin", `document.getElementById('message').textContent.includes('not an admin')`)
	until(t, ctx, "and is not let in", `!document.getElementById('view-login').hidden && `+isHidden("nav")+
		` && !sessionStorage.getItem('admin.access')`)
	views(t, ctx, "login")
}

func adminLogIn(t *testing.T, ctx context.Context, s *shop) {
	t.Helper()
	// By keyboard: Enter in the password field submits.
	do(t, ctx, "log in as the admin",
		typeInto("login-email", "admin@shop.test"),
		typeInto("login-password", "admin-password\r"),
	)
	until(t, ctx, "the overview opens", `!document.getElementById('view-overview').hidden && !`+isHidden("nav"))
}

func adminProducts(t *testing.T, ctx context.Context, s *shop, sku string) {
	t.Helper()
	do(t, ctx, "a product with bad fields",
		chromedp.Navigate(s.URL+"/admin#/products"),
		chromedp.WaitVisible(chromedp.ID("product-new")),
		chromedp.Click(chromedp.ID("product-new")),
		chromedp.WaitVisible(chromedp.ID("product-sku")),
		typeInto("product-sku", sku),
		typeInto("product-category", "bad category!"),
		typeInto("product-price", "1234567.89"),
		chromedp.Click(chromedp.ID("product-save")),
	)
	until(t, ctx, "the API's field errors are shown beside their fields",
		`['product-name-error', 'product-category-error', 'product-price-error'].every(id => document.getElementById(id).textContent.trim() !== '')`+
			` && document.getElementById('product-price').getAttribute('aria-invalid') === 'true'`+
			` && document.getElementById('product-sku-error').textContent === ''`)
	views(t, ctx, "product-errors")
	do(t, ctx, "fix and create",
		typeInto("product-name", "Demo kettle"),
		typeInto("product-description", "A kettle for the admin console's test."),
		typeInto("product-category", "kitchen"),
		typeInto("product-price", "25.99"),
		chromedp.Click(chromedp.ID("product-save")),
	)
	row := `document.querySelector('#products tr[data-sku="` + sku + `"]')`
	until(t, ctx, "the new product is listed", row+` && `+row+`.textContent.includes('$25.99')`)
	do(t, ctx, "edit it",
		chromedp.Navigate(s.URL+"/admin#/product/"+sku),
		chromedp.WaitVisible(chromedp.ID("product-name")),
	)
	until(t, ctx, "the form holds the product", `document.getElementById('product-name').value === 'Demo kettle' && document.getElementById('product-sku').readOnly`)
	do(t, ctx, "rename it", typeInto("product-name", "Demo kettle, steel"), chromedp.Click(chromedp.ID("product-save")))
	until(t, ctx, "the new name is listed", row+` && `+row+`.textContent.includes('Demo kettle, steel')`)
	views(t, ctx, "products")
}

func adminSeed(t *testing.T, ctx context.Context, s *shop, sku string, room bool) {
	t.Helper()
	do(t, ctx, "open the sale round", chromedp.Navigate(s.URL+"/admin#/sale/"+sku))
	until(t, ctx, "the form holds the current round", `!document.getElementById('sale-seed').disabled`)
	steps := []chromedp.Action[chromedp.Void]{
		typeInto("sale-quantity", "40"),
		typeInto("sale-limit", "0"),
	}
	if room {
		// The round before has sales: a new one is opened only once the
		// admin confirms.
		steps = append(steps, chromedp.Click(chromedp.ID("sale-room")), chromedp.WaitVisible(chromedp.ID("sale-admit")),
			typeInto("sale-admit", "100000000"), chromedp.Click(chromedp.ID("sale-seed")),
			chromedp.WaitVisible(chromedp.ID("confirm-yes")), chromedp.Click(chromedp.ID("confirm-yes")))
	} else {
		steps = append(steps, chromedp.Click(chromedp.ID("sale-seed")))
	}
	do(t, ctx, "seed a round", steps...)
	if room {
		until(t, ctx, "a rate out of range is shown beside its field", `document.getElementById('sale-admit-error').textContent.trim() !== ''`)
		do(t, ctx, "a sound rate", typeInto("sale-admit", "1"), chromedp.Click(chromedp.ID("sale-seed")),
			chromedp.WaitVisible(chromedp.ID("confirm-yes")), chromedp.Click(chromedp.ID("confirm-yes")))
		until(t, ctx, "the report shows the room", `document.querySelector('#report dd[data-key="waiting_room"]').textContent.startsWith('1/s')`)
		return
	}
	until(t, ctx, "the stock report shows the round",
		`(() => { const q = document.querySelector('#report dd[data-key="quantity"]'), a = document.querySelector('#report dd[data-key="available"]');
			return !!q && q.textContent === '40' && a.textContent === '40'; })()`)
	views(t, ctx, "sale")
}

func adminLive(t *testing.T, ctx context.Context, s *shop, sku string, buyers []string) {
	t.Helper()
	do(t, ctx, "open the live view", chromedp.Navigate(s.URL+"/admin#/live/"+sku))
	until(t, ctx, "available from the stream", text("live-available", "40"))
	until(t, ctx, "the sale is open", text("live-state", "open"))
	// Ten units over about three seconds, by the test's own shoppers.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10 {
			if o := s.purchase(t, buyers[i%len(buyers)], sku, 1, fmt.Sprintf("admin-live-%d", i)); o.status != http.StatusAccepted {
				t.Errorf("purchase %d: %+v", i, o)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}()
	until(t, ctx, "the rate shows orders being accepted", `parseFloat(document.getElementById('live-rate').textContent) > 0`)
	<-done
	until(t, ctx, "available follows the purchases", text("live-available", "30"))
	until(t, ctx, "sold follows them", text("live-sold", "10"))
	until(t, ctx, "the chart is drawn", `document.querySelector('#live-chart path.line').getAttribute('d').length > 10`)
	views(t, ctx, "live")
	until(t, ctx, "the rate settles back to zero", text("live-rate", "0"))
}

func adminBestSellers(t *testing.T, ctx context.Context, s *shop, sku string) {
	t.Helper()
	s.waitConfirmed(t, sku, 10)
	do(t, ctx, "open the best sellers", chromedp.Navigate(s.URL+"/admin#/best"))
	row := `document.querySelector('#best tr[data-sku="` + sku + `"]')`
	ok, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const r = `+row+`; if (r) return r.textContent.includes('10');
		document.querySelector('#best-form button').click(); return false; })()`,
		chromedp.WithPollingInterval(500*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil || !ok {
		t.Fatalf("the product is a best seller with 10 units: %v", err)
	}
	views(t, ctx, "best-sellers")
}

func adminVisitors(t *testing.T, ctx context.Context, s *shop, sku string) {
	t.Helper()
	for range 3 {
		if r := call(t, http.MethodGet, s.api+"/products/"+sku, nil); r.Status != http.StatusOK {
			t.Fatalf("view %s: %d", sku, r.Status)
		}
	}
	do(t, ctx, "open the visitors", chromedp.Navigate(s.URL+"/admin#/visitors"), chromedp.WaitVisible(chromedp.ID("visitors-sku")))
	ok, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { if (Number(document.getElementById('visitors-views').textContent) >= 3) return true;
		document.querySelector('#visitors-form button').click(); return false; })()`,
		chromedp.WithPollingInterval(500*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil || !ok {
		t.Fatalf("the views are counted: %v", err)
	}
	until(t, ctx, "the chart has a bar per day and kind", `document.querySelectorAll('#visitors-chart rect.views').length === 14 && document.querySelectorAll('#visitors-chart rect.unique').length === 14`)
	views(t, ctx, "visitors")
}

func adminStores(t *testing.T, ctx context.Context, s *shop) {
	t.Helper()
	do(t, ctx, "add a pickup store",
		chromedp.Navigate(s.URL+"/admin#/stores"),
		chromedp.WaitVisible(chromedp.ID("store-id")),
		typeInto("store-id", "paris-1"),
		typeInto("store-name", "Paris Rivoli"),
		typeInto("store-address", "1 rue de Rivoli"),
		typeInto("store-lng", "200"),
		typeInto("store-lat", "48.8566"),
		chromedp.Click(chromedp.ID("store-save")),
	)
	until(t, ctx, "an out-of-range longitude is shown beside its field", `document.getElementById('store-lng-error').textContent.trim() !== ''`)
	do(t, ctx, "a sound longitude", typeInto("store-lng", "2.3522"), chromedp.Click(chromedp.ID("store-save")))
	until(t, ctx, "the store is listed", `!!document.querySelector('#stores li[data-id="paris-1"]')`)
	views(t, ctx, "stores")
}

// adminRoom seeds a round with a waiting room through the console; the
// test's shoppers join it through the API, and the live view counts them
// as they wait and are admitted (one a second).
func adminRoom(t *testing.T, ctx context.Context, s *shop, sku string, buyers []string) {
	t.Helper()
	adminSeed(t, ctx, s, sku, true)
	for _, tok := range buyers {
		if r := call(t, http.MethodPost, s.api+"/products/"+sku+"/queue", map[string]any{}, "Authorization", "Bearer "+tok); r.Status != http.StatusCreated {
			t.Fatalf("join the room: %d %s", r.Status, r.Body)
		}
	}
	do(t, ctx, "open the live view", chromedp.Navigate(s.URL+"/admin#/live/"+sku))
	until(t, ctx, "the room's counters are shown", `!document.getElementById('live-room').hidden &&
		Number(document.getElementById('live-waiting').textContent) + Number(document.getElementById('live-admitted').textContent) === 3`)
	views(t, ctx, "live-room")
	until(t, ctx, "every joiner is admitted", text("live-admitted", "3"))
}

func adminAudit(t *testing.T, ctx context.Context, s *shop) {
	t.Helper()
	do(t, ctx, "run the audit",
		chromedp.Navigate(s.URL+"/admin#/audit"),
		chromedp.WaitVisible(chromedp.ID("audit-run")),
		chromedp.Click(chromedp.ID("audit-run")),
	)
	until(t, ctx, "the audit is clean", `document.getElementById('audit-result').classList.contains('ok') && document.getElementById('audit-problems').children.length === 0`+
		` && !!document.querySelector('#audit-rounds tr')`)
	views(t, ctx, "audit")
}
