package e2e

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// The widths every view of the storefront must fit: a desktop's and a
// phone's.
var shopperWidths = []struct {
	width, height int
	mobile        bool
}{{1280, 900, false}, {390, 844, true}}

// overflowJS lists what sticks out of a viewport w px wide sideways: the
// page itself (scrollWidth) and every drawn element whose right edge lies
// past it; "" when nothing does. The width is the one asked for, not
// innerWidth: a phone zooms out to show a page wider than itself, and
// innerWidth then grows with the page.
const overflowJS = `((w) => {
	const out = [];
	if (document.documentElement.scrollWidth > w) out.push('page ' + document.documentElement.scrollWidth + ' px');
	for (const e of document.querySelectorAll('body *')) {
		if (e.getClientRects().length === 0) continue;
		const r = e.getBoundingClientRect();
		if (r.width > 0 && r.right > w + 0.5) out.push(e.tagName + '#' + e.id + '.' + e.className + ' right ' + Math.round(r.right));
	}
	return out.slice(0, 8).join(', ');
})(%d)`

// fits saves the page at 1280 and 390 px (name-1280.png, name-390.png)
// and fails t when, at either width, anything overflows sideways.
func fits(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	for _, w := range shopperWidths {
		opts := []chromedp.EmulateViewportOption{}
		if w.mobile {
			opts = append(opts, chromedp.EmulateMobile)
		}
		do(t, ctx, fmt.Sprintf("%d px wide", w.width), chromedp.EmulateViewport(int64(w.width), int64(w.height), opts...))
		// Two frames: the layout at the new width is drawn.
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
			`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, chromedp.EvalAwaitPromise)); err != nil {
			t.Fatal(err)
		}
		wide, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(overflowJS, w.width)))
		if err != nil {
			t.Fatal(err)
		}
		if wide != "" {
			t.Errorf("%s at %d px overflows sideways: %s", name, w.width, wide)
		}
		screenshot(t, ctx, fmt.Sprintf("%s-%d.png", name, w.width))
	}
	do(t, ctx, "resize back", chromedp.ResetViewport())
}

// netLog records every request the tab sends and every answer of 400 or
// more; check fails t for each such answer that was not expected.
type netLog struct {
	mu       sync.Mutex
	methods  map[network.RequestID]string
	sent     []string // "GET /api/v1/..." in order
	failed   []failure
	expected []string // "GET /api/v1/... 404", each allowed once
}

// failure is an answer of 400 or more. Its method is looked up when
// checked: the two event streams are read apart, so an answer may be
// heard before its request.
type failure struct {
	id     network.RequestID
	path   string
	status int64
}

func watchNetwork(t *testing.T, ctx context.Context, origin string) *netLog {
	t.Helper()
	n := &netLog{methods: map[network.RequestID]string{}}
	path := func(u string) string { return strings.TrimPrefix(u, origin) }
	go func() {
		for ev, err := range chromedp.Events(ctx, network.RequestWillBeSent) {
			if err != nil {
				return
			}
			n.mu.Lock()
			n.methods[ev.RequestID] = ev.Request.Method
			n.sent = append(n.sent, ev.Request.Method+" "+path(ev.Request.URL))
			n.mu.Unlock()
		}
	}()
	go func() {
		for ev, err := range chromedp.Events(ctx, network.ResponseReceived) {
			if err != nil {
				return
			}
			if ev.Response == nil || ev.Response.Status < 400 {
				continue
			}
			n.mu.Lock()
			n.failed = append(n.failed, failure{ev.RequestID, path(ev.Response.URL), ev.Response.Status})
			n.mu.Unlock()
		}
	}()
	return n
}

// expect allows one failed answer, as "METHOD /path status".
func (n *netLog) expect(answer string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.expected = append(n.expected, answer)
}

// requests lists the requests sent so far whose "METHOD /path" contains
// part.
func (n *netLog) requests(part string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, r := range n.sent {
		if strings.Contains(r, part) {
			out = append(out, r)
		}
	}
	return out
}

func (n *netLog) check(t *testing.T) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.sent) == 0 {
		t.Errorf("no request of the page was seen: the network log watched nothing")
	}
	left := append([]string(nil), n.expected...)
	for _, fail := range n.failed {
		f := fmt.Sprintf("%s %s %d", n.methods[fail.id], fail.path, fail.status)
		i := indexOf(left, f)
		if i < 0 {
			t.Errorf("the page made a request that failed unexpectedly: %s", f)
			continue
		}
		left = append(left[:i], left[i+1:]...)
	}
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// productPNG draws a small picture of one colour with a band of another.
func productPNG(t *testing.T, bg, band color.NRGBA) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 120, 120))
	for y := range 120 {
		for x := range 120 {
			c := bg
			if y > 45 && y < 75 {
				c = band
			}
			img.SetNRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// shopperProduct is one product of the shopper's test catalog.
type shopperProduct struct {
	sku, name, category, description string
	image                            *[2]color.NRGBA // nil: no picture
	seed                             map[string]any  // nil: not on sale
}

func (s *shop) shopperProduct(t *testing.T, p shopperProduct) {
	t.Helper()
	admin := []string{"Authorization", "Bearer " + s.admin}
	if r := call(t, http.MethodPost, s.api+"/admin/products", map[string]any{
		"sku": p.sku, "name": p.name, "category": p.category, "description": p.description, "price_cents": 2400,
	}, admin...); r.Status != http.StatusCreated {
		t.Fatalf("create %s: %d %s", p.sku, r.Status, r.Body)
	}
	if p.image != nil {
		body := productPNG(t, p.image[0], p.image[1])
		if r := bulk(t, http.MethodPut, s.api+"/admin/products/"+p.sku+"/image", body,
			append(admin, "Content-Type", "image/png")...); r.Status != http.StatusOK {
			t.Fatalf("image of %s: %d %s", p.sku, r.Status, r.Body)
		}
	}
	if p.seed != nil {
		if r := call(t, http.MethodPut, s.api+"/admin/products/"+p.sku+"/stock", p.seed, admin...); r.Status != http.StatusOK {
			t.Fatalf("seed %s: %d %s", p.sku, r.Status, r.Body)
		}
		s.watch.sample(t, p.sku)
	}
}

var shopperCatalog = []shopperProduct{
	{"cam-a", "Instant camera", "photo", "A pocket instant camera that prints credit-card-sized photos in seconds.",
		&[2]color.NRGBA{{200, 60, 60, 255}, {250, 220, 90, 255}}, map[string]any{"quantity": 20, "per_user_limit": 0}},
	{"cam-b", "Film camera, 35 mm", "photo", "A refurbished 35 mm film camera with a 50 mm lens.",
		&[2]color.NRGBA{{40, 90, 160, 255}, {230, 230, 230, 255}}, nil},
	{"tee-c", "Organic cotton T-shirt with a very long name that wraps on a phone", "apparel", "A heavyweight tee.",
		&[2]color.NRGBA{{30, 30, 30, 255}, {120, 200, 120, 255}},
		map[string]any{"quantity": 5, "starts_at": time.Now().Add(3 * time.Hour).UTC().Format(time.RFC3339)}},
	{"drop-d", "Limited sneaker drop", "apparel", "Two hundred pairs, one per shopper, through the queue.",
		&[2]color.NRGBA{{240, 240, 240, 255}, {220, 40, 120, 255}},
		map[string]any{"quantity": 50, "per_user_limit": 1, "waiting_room": map[string]any{"admit_per_second": 50}}},
	{"mug-e", "Stoneware mug", "kitchen", "A 350 ml mug, dishwasher safe.", nil, map[string]any{"quantity": 200, "per_user_limit": 0}},
	{"pin-f", "Enamel pin", "misc", "A hard enamel pin with a butterfly clasp.",
		&[2]color.NRGBA{{250, 200, 40, 255}, {20, 20, 120, 255}}, map[string]any{"quantity": 8, "per_user_limit": 0}},
}

// The storefront as a shopper meets it (issue 51), each view at 1280 and
// 390 px without sideways overflow, without script or console errors,
// and without a failed request the page did not expect: the catalog
// shows each product's picture (alt: its name), a category filter, a
// Queue hint on the roomed sale and, on a phone, two compact columns; a
// typed URL focuses the view without a ring; the product page shows the
// picture and the description, a product not on sale says so once; an
// unknown product has a not-found page; the waiting room is asked for
// only once joined; the buy message, the cart (Remove in view on a
// phone) and the orders use short order numbers and a shopper's words
// for the status and the time left to pay.
func TestBrowserShopper(t *testing.T) {
	t.Parallel()
	s := newShop(t, liveEnv(t))
	for _, p := range shopperCatalog {
		s.shopperProduct(t, p)
	}
	ctx, noScriptErrors := browser(t)
	defer noScriptErrors()
	defer stayOnOrigin(t, ctx, s.URL)()
	net := watchNetwork(t, ctx, s.URL)
	defer net.check(t)

	signUp(t, ctx, s, "shopper@shop.test", "shopper-password")
	shopperCatalogView(t, ctx, s, net)
	shopperProductViews(t, ctx, s, net)
	shopperQueue(t, ctx, s, net)
	shopperCartAndOrders(t, ctx, s)
}

func shopperCatalogView(t *testing.T, ctx context.Context, s *shop, net *netLog) {
	t.Helper()
	do(t, ctx, "open the catalog", chromedp.Navigate(s.URL+"/#/"))
	until(t, ctx, "six cards with their sale state", `document.querySelectorAll('#catalog li[data-sale]').length === 6`)
	until(t, ctx, "each picture loaded, with the product's name as alt text", `[...document.querySelectorAll('#catalog li')].every(li => {
		const img = li.querySelector('img.card-image');
		if (li.dataset.sku === 'mug-e') return img.hidden;
		return !img.hidden && img.complete && img.naturalWidth > 0 && img.alt === li.querySelector('.card-name').textContent;
	})`)
	until(t, ctx, "distinct pictures", `new Set([...document.querySelectorAll('#catalog img.card-image:not([hidden])')].map(i => i.src)).size === 5`)
	until(t, ctx, "a Queue hint on the roomed sale only", `[...document.querySelectorAll('#catalog .card-queue')]
		.filter(e => e.getClientRects().length > 0).map(e => e.closest('li').dataset.sku).join() === 'drop-d'`+
		` && [...document.querySelectorAll('#catalog .card-draw')].every(e => e.getClientRects().length === 0)`)
	until(t, ctx, "not on sale, said once", `document.querySelector('#catalog li[data-sku="cam-b"] .card-state').innerText.trim().toLowerCase() === 'not on sale'`)
	until(t, ctx, "the category filter", `[...document.querySelectorAll('#categories a')].map(a => a.textContent).join() === 'All,Apparel,Kitchen,Misc,Photo'`+
		` && document.querySelector('#categories a[aria-current="page"]').textContent === 'All'`)
	fits(t, ctx, "shopper-catalog")
	do(t, ctx, "phone width", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	height, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollHeight`))
	columns, err2 := chromedp.Run(ctx, chromedp.Evaluate[int](
		`new Set([...document.querySelectorAll('#catalog li')].map(li => Math.round(li.getBoundingClientRect().left))).size`))
	if err != nil || err2 != nil || height > 1600 || columns != 2 {
		t.Errorf("six products on a phone: %d px tall in %d columns (%v %v), want two compact columns under 1600 px", height, columns, err, err2)
	}
	t.Logf("six products on a 390 px phone: %d px tall", height)
	do(t, ctx, "resize back", chromedp.ResetViewport())

	do(t, ctx, "filter by category", chromedp.Click(chromedp.CSS(`#categories a[href="#/c/apparel"]`)))
	until(t, ctx, "only apparel", `[...document.querySelectorAll('#catalog li')].map(li => li.dataset.sku).join() === 'drop-d,tee-c'`+
		` && document.querySelector('#categories a[aria-current="page"]').textContent === 'Apparel'`)
	if len(net.requests("category=apparel")) == 0 {
		t.Errorf("the filter did not ask the API for the category (requests: %v)", net.requests("/products?"))
	}
	fits(t, ctx, "shopper-catalog-apparel")
}

func shopperProductViews(t *testing.T, ctx context.Context, s *shop, net *netLog) {
	t.Helper()
	// A typed URL (the keyboard used last, as in the address bar): main
	// takes the focus, with no ring around the page.
	do(t, ctx, "a key pressed", chromedp.KeyEvent("\t"))
	do(t, ctx, "type a product's URL", chromedp.Navigate(s.URL+"/#/p/cam-a"))
	until(t, ctx, "the product with its picture and description", text("product-name", "Instant camera")+
		` && !document.getElementById('product-image').hidden && document.getElementById('product-image').naturalWidth > 0`+
		` && document.getElementById('product-image').alt === 'Instant camera'`+
		` && document.getElementById('product-description').textContent.startsWith('A pocket instant camera')`)
	until(t, ctx, "live stock shown, no system words", text("live-available", "20")+` && `+text("live-status", ""))
	until(t, ctx, "main is focused without a ring", `document.activeElement.id === 'main' && getComputedStyle(document.activeElement).outlineStyle === 'none'`)
	do(t, ctx, "tab to the first link", chromedp.KeyEvent("\t"))
	until(t, ctx, "a keyboard focus still shows its ring", `document.activeElement.tagName === 'A' && getComputedStyle(document.activeElement).outlineStyle === 'solid'`)
	fits(t, ctx, "shopper-product")

	do(t, ctx, "a product not on sale", chromedp.Navigate(s.URL+"/#/p/cam-b"))
	until(t, ctx, "not on sale, said once, no buy form", text("live-sale", "not on sale")+
		` && (document.getElementById('view-product').innerText.match(/not on sale/gi) || []).length === 1`+
		` && document.getElementById('buy-area').getClientRects().length === 0`)
	fits(t, ctx, "shopper-product-none")

	net.expect("GET /api/v1/products/no-such-thing 404")
	do(t, ctx, "an unknown product", chromedp.Navigate(s.URL+"/#/p/no-such-thing"))
	until(t, ctx, "a not-found page with a way back", `document.getElementById('view-notfound').getClientRects().length > 0`+
		` && document.getElementById('view-product').hidden && document.getElementById('message').hidden`+
		` && document.querySelector('#view-notfound h1').textContent.length > 0`+
		` && document.querySelector('#view-notfound a[href="#/"]') !== null && document.title.startsWith('Product not found')`)
	fits(t, ctx, "shopper-notfound")
	do(t, ctx, "back to the catalog", chromedp.Click(chromedp.CSS(`#view-notfound a[href="#/"]`)))
	until(t, ctx, "the catalog", `document.getElementById('view-catalog').getClientRects().length > 0`)
}

// shopperQueue: the roomed product asks nothing of the queue until the
// shopper joins; then the ticket, the wait in words, and a purchase
// whose message names the order by its short number.
func shopperQueue(t *testing.T, ctx context.Context, s *shop, net *netLog) {
	t.Helper()
	do(t, ctx, "the roomed product", chromedp.Navigate(s.URL+"/#/p/drop-d"))
	until(t, ctx, "join the queue instead of buy", `document.getElementById('queue-join').getClientRects().length > 0`+
		` && document.getElementById('buy-form').getClientRects().length === 0`)
	time.Sleep(time.Second) // anything the page would ask has been asked
	if asked := append(net.requests("/queue"), net.requests("/fairness")...); len(asked) != 0 {
		t.Errorf("before joining, the page asked the queue: %v", asked)
	}
	do(t, ctx, "join", chromedp.Click(chromedp.ID("queue-join")))
	until(t, ctx, "admitted, the buy form is back", `document.getElementById('queue').dataset.state === 'admitted'`+
		` && document.getElementById('buy-form').getClientRects().length > 0`)
	until(t, ctx, "the pass's time in words", `/^Your pass is good for about \d+ (seconds|minutes)\.$|^Your pass is good for about a minute\.$/.test(document.getElementById('queue-eta').textContent)`)
	until(t, ctx, "no solve time shown", `document.getElementById('queue-work').getClientRects().length === 0`)
	fits(t, ctx, "shopper-product-queue")
	do(t, ctx, "buy", chromedp.Click(chromedp.ID("buy-now")))
	until(t, ctx, "the order is placed, named by its short number",
		`/^Order #[0-9A-F]{8} placed\./.test(document.getElementById('message').textContent)`)
}

func shopperCartAndOrders(t *testing.T, ctx context.Context, s *shop) {
	t.Helper()
	// A line of 100 mugs: a wide line total beside a long word.
	for sku, quantity := range map[string]string{"tee-c": "1", "mug-e": "100"} {
		do(t, ctx, "open "+sku, chromedp.Navigate(s.URL+"/#/p/"+sku))
		until(t, ctx, sku+": add to cart is on", `!document.getElementById('live').classList.contains('loading') && !document.getElementById('add-to-cart').disabled`)
		// The last add's message is put away first: it would say "Added"
		// before this one is answered.
		do(t, ctx, "add "+sku, script(`document.getElementById('message').hidden = true`),
			chromedp.SetValue(chromedp.ID("buy-quantity"), quantity), chromedp.Click(chromedp.ID("add-to-cart")))
		until(t, ctx, "added", `!document.getElementById('message').hidden && document.getElementById('message').textContent.includes('Added')`)
	}
	do(t, ctx, "open the cart", chromedp.Navigate(s.URL+"/#/cart"))
	until(t, ctx, "two lines, each with Remove", `document.querySelectorAll('#cart-lines button').length === 2`)
	fits(t, ctx, "shopper-cart")
	do(t, ctx, "remove the shirt", chromedp.Click(chromedp.CSS(`#cart-lines button[aria-label^="Remove Organic"]`)))
	until(t, ctx, "one line left", `document.querySelectorAll('#cart-lines tr').length === 1`)
	do(t, ctx, "check out", chromedp.Click(chromedp.ID("checkout")))
	until(t, ctx, "the orders, the checkout named by its short number", `location.hash === '#/orders'`+
		` && /^Order #[0-9A-F]{8} placed\./.test(document.getElementById('message').textContent)`)
	status := `[...document.querySelectorAll('#orders .order-status')].map(e => e.textContent).join()`
	until(t, ctx, "both orders await payment, in words", status+` === 'Awaiting payment,Awaiting payment'`+
		` && document.querySelectorAll('#orders button[data-action="pay"]').length === 2`)
	until(t, ctx, "the time to pay in words", `[...document.querySelectorAll('#orders .order-expiry')].every(e => /^Pay within about 1[45] minutes$/.test(e.textContent))`)
	until(t, ctx, "no system words", `!/confirmed|pending|recorded/i.test(document.getElementById('view-orders').innerText)`)
	fits(t, ctx, "shopper-orders-awaiting")
	// Clicked in the page, found and clicked at once: the list is drawn
	// again after each answer, and a node found before a redraw is gone.
	do(t, ctx, "pay the newest", script(`document.querySelector('#orders li:first-child button[data-action="pay"]').click()`))
	until(t, ctx, "paid", `document.querySelector('#orders li:first-child .order-status').textContent === 'Paid'`)
	do(t, ctx, "cancel the other", script(`document.querySelector('#orders li:nth-child(2) button[data-action="cancel"]').click()`))
	until(t, ctx, "cancelled", status+` === 'Paid,Cancelled'`)
	fits(t, ctx, "shopper-orders")
}
