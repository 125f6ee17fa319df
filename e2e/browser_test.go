package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/bits"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// artifactsDir holds what the browser tests leave for people to look at
// (git-ignored).
const artifactsDir = "artifacts"

// chromium finds Debian's chromium. Without it a laptop skips the browser
// tests; CI (CI set) fails, so it can never pass having tested nothing.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (apt-get install chromium); CI must run the browser tests")
	}
	t.Skip("chromium is not installed (apt-get install chromium): browser tests skipped")
	return ""
}

// browser starts a headless Chromium with a fresh profile and returns a
// tab's context and a check that fails t for every script error the page
// threw. The flags keep it off the network: on a closed machine it would
// otherwise hang on background connections.
func browser(t *testing.T) (context.Context, func()) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(412, 915), // a phone's width
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	var mu sync.Mutex
	var thrown []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() {
				mu.Lock()
				thrown = append(thrown, m.String())
				mu.Unlock()
			}
		}
	}()
	return ctx, func() {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, e := range thrown {
			t.Errorf("script error on the page: %s", e)
		}
	}
}

// until waits for a JavaScript condition on the page.
func until(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	ok, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil || !ok {
		msg, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('message').textContent`))
		t.Fatalf("%s: %v (page message %q)", what, err, msg)
	}
}

func text(id, want string) string {
	return fmt.Sprintf("document.getElementById(%q).textContent.trim() === %q", id, want)
}

// The storefront page in a real browser against a running `shop serve`:
// sign up, log out and in again, watch the live counter move when another
// client buys, buy with a double click (one order), see the order turn
// confirmed with the countdown to its expires_at, buy a second, pay the
// first (paid) and cancel the second (cancelled, and the live stock goes
// back up). A screenshot of the orders is saved under e2e/artifacts.
func TestBrowserStorefront(t *testing.T) {
	t.Parallel()
	s := newShop(t, liveEnv(t))
	s.product(t, "demo-browser", 1299, map[string]any{"quantity": 50, "per_user_limit": 0})
	other := s.shoppers(t, 1, "browser-other")[0]
	ctx, noScriptErrors := browser(t)
	defer noScriptErrors()
	id := func(s string) chromedp.ID { return chromedp.ID(s) }

	// Sign up (which logs in), log out, log in.
	do(t, ctx, "sign up",
		chromedp.Navigate(s.URL+"/#/register"),
		chromedp.WaitVisible(id("register-email")),
		chromedp.SendKeys(id("register-email"), "browser@shop.test"),
		chromedp.SendKeys(id("register-password"), "browser-password"),
		chromedp.Click(id("register-submit")),
		chromedp.WaitVisible(id("nav-logout")),
		chromedp.Click(id("nav-logout")),
		chromedp.WaitVisible(id("nav-login")),
	)
	do(t, ctx, "log in",
		chromedp.Navigate(s.URL+"/#/login"),
		chromedp.WaitVisible(id("login-email")),
		chromedp.SendKeys(id("login-email"), "browser@shop.test"),
		chromedp.SendKeys(id("login-password"), "browser-password"),
		chromedp.Click(id("login-submit")),
		chromedp.WaitVisible(id("nav-logout")),
	)
	until(t, ctx, "the catalog lists the product", `!!document.querySelector('#catalog li[data-sku="demo-browser"]')`)

	// The live counter follows another client's purchase.
	do(t, ctx, "open the product", chromedp.Navigate(s.URL+"/#/p/demo-browser"))
	until(t, ctx, "live stock shown", text("live-available", "50"))
	if o := s.purchase(t, other, "demo-browser", 3, "browser-other-1"); o.status != http.StatusAccepted {
		t.Fatalf("the other client's purchase: %+v", o)
	}
	until(t, ctx, "the counter moved with the other client's purchase", text("live-available", "47"))

	// A double click buys once.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
		`(() => { const b = document.getElementById('buy-now'); b.click(); b.click(); return true; })()`)); err != nil {
		t.Fatalf("buy now, twice in a row: %v", err)
	}
	until(t, ctx, "the order is placed", `document.getElementById('message').textContent.includes('placed')`)
	until(t, ctx, "the counter shows the purchase", text("live-available", "46"))

	// The order turns confirmed once the writer has recorded it.
	do(t, ctx, "open the orders", chromedp.Navigate(s.URL+"/#/orders"))
	until(t, ctx, "the order is confirmed",
		`[...document.querySelectorAll('#orders .order-status')].map(e => e.textContent).join() === 'confirmed'`)
	buttons, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#orders .order-actions button').length`))
	if err != nil || buttons != 2 {
		t.Errorf("a confirmed order shows %d buttons (%v), want pay and cancel", buttons, err)
	}
	if rep := s.stock(t, "demo-browser"); rep.Available != 46 {
		t.Errorf("available %d after 3 + 1 units sold, want 46 (a double click must buy once)", rep.Available)
	}
	// The server's payment window is the default 15 minutes: the countdown
	// starts near 00:15:00 and ticks.
	countdown := `document.querySelector('#orders .order-expiry').textContent`
	until(t, ctx, "the countdown to expires_at is shown", `/^Pay within 00:1[45]:\d\d$/.test(`+countdown+`)`)
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](countdown))
	if err != nil {
		t.Fatal(err)
	}
	until(t, ctx, "the countdown ticks", fmt.Sprintf(`/^Pay within 00:1[45]:\d\d$/.test(%s) && %s !== %q`, countdown, countdown, shown))
	payAndCancel(t, ctx, s)
	screenshot(t, ctx, "storefront-orders.png")
}

// payAndCancel buys a second unit on the product page, then pays the
// first order and cancels the second from the orders page: each turns
// paid and cancelled, and the cancelled unit is back in the live stock.
func payAndCancel(t *testing.T, ctx context.Context, s *shop) {
	t.Helper()
	do(t, ctx, "open the product again", chromedp.Navigate(s.URL+"/#/p/demo-browser"))
	until(t, ctx, "live stock shown", text("live-available", "46"))
	do(t, ctx, "buy a second unit", chromedp.Click(chromedp.ID("buy-now")))
	until(t, ctx, "the counter shows the second purchase", text("live-available", "45"))
	do(t, ctx, "open the orders", chromedp.Navigate(s.URL+"/#/orders"))
	statuses := `[...document.querySelectorAll('#orders .order-status')].map(e => e.textContent).join()`
	until(t, ctx, "both orders confirmed", statuses+` === 'confirmed,confirmed'`)
	// Newest first: the second purchase is on top.
	ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#orders li')].map(li => li.dataset.orderId)`))
	if err != nil || len(ids) != 2 {
		t.Fatalf("orders on the page: %v %v", ids, err)
	}
	second, first := ids[0], ids[1]
	click := func(what, label, id string) {
		t.Helper()
		js := fmt.Sprintf(`document.querySelector('#orders li[data-order-id=%q] button[aria-label=%q]').click(), true`, id, label+" order "+id)
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	statusOf := func(id string) string {
		return fmt.Sprintf(`document.querySelector('#orders li[data-order-id=%q] .order-status').textContent`, id)
	}
	buttonsOf := func(id string) string {
		return fmt.Sprintf(`document.querySelectorAll('#orders li[data-order-id=%q] .order-actions button').length`, id)
	}
	click("pay the first order", "Pay", first)
	until(t, ctx, "the first order is paid", statusOf(first)+` === 'paid' && `+buttonsOf(first)+` === 0`)
	until(t, ctx, "the payment is confirmed on the page", `document.getElementById('message').textContent.includes('paid')`)
	click("cancel the second order", "Cancel", second)
	until(t, ctx, "the second order is cancelled", statusOf(second)+` === 'cancelled' && `+buttonsOf(second)+` === 0`)
	until(t, ctx, "the first is still paid", statusOf(first)+` === 'paid'`)
	do(t, ctx, "back to the product", chromedp.Navigate(s.URL+"/#/p/demo-browser"))
	until(t, ctx, "the cancelled unit is back in the live stock", text("live-available", "46"))
	do(t, ctx, "the orders once more", chromedp.Navigate(s.URL+"/#/orders"))
	until(t, ctx, "paid and cancelled", statuses+` === 'cancelled,paid'`)
}

func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// screenshot saves the page under artifactsDir and logs the path.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(artifactsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	path, _ := filepath.Abs(filepath.Join(artifactsDir, name))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	fmt.Fprintln(os.Stderr, "browser test screenshot:", path)
}

// The storefront's waiting room in a real browser: an admin seeds a
// roomed round (a 16-bit challenge, one admission a second) and a few
// shoppers join through the API just before the browser's shopper, so it
// has a place in line. The page shows "Join the queue" instead of buy,
// solves the challenge in its Web Worker, joins, follows the ticket's
// stream as the position falls, is admitted, and buys with its pass in
// X-Queue-Pass (also at checkout of a cart holding the SKU); the orders
// appear. The worker's solve time, measured in the page, is logged.
func TestBrowserWaitingRoom(t *testing.T) {
	t.Parallel()
	const sku = "room-browser"
	s := newShop(t, liveEnv(t))
	admin := []string{"Authorization", "Bearer " + s.admin}
	if r := bulk(t, http.MethodPost, s.api+"/admin/products", map[string]any{
		"sku": sku, "name": "Product " + sku, "category": "e2e", "price_cents": 2500,
	}, admin...); r.Status != http.StatusCreated {
		t.Fatalf("create %s: %d %s", sku, r.Status, r.Body)
	}
	if r := bulk(t, http.MethodPut, s.api+"/admin/products/"+sku+"/stock", map[string]any{
		"quantity": 50, "per_user_limit": 2,
		"waiting_room": map[string]any{"admit_per_second": 1, "challenge_bits": 16},
	}, admin...); r.Status != http.StatusOK {
		t.Fatalf("seed %s: %d %s", sku, r.Status, r.Body)
	}
	s.watch.sample(t, sku)
	ahead := s.shoppers(t, 8, "room-ahead")
	ctx, noScriptErrors := browser(t)
	defer noScriptErrors()
	id := func(s string) chromedp.ID { return chromedp.ID(s) }

	do(t, ctx, "sign up",
		chromedp.Navigate(s.URL+"/#/register"),
		chromedp.WaitVisible(id("register-email")),
		chromedp.SendKeys(id("register-email"), "room@shop.test"),
		chromedp.SendKeys(id("register-password"), "room-password"),
		chromedp.Click(id("register-submit")),
		chromedp.WaitVisible(id("nav-logout")),
	)
	do(t, ctx, "open the product", chromedp.Navigate(s.URL+"/#/p/"+sku))
	// Shown or not as drawn, not as the hidden attribute says.
	visible := func(id string) string {
		return fmt.Sprintf("document.getElementById(%q).getClientRects().length > 0", id)
	}
	hidden := func(id string) string { return "!(" + visible(id) + ")" }
	until(t, ctx, `"Join the queue" instead of buy`,
		visible("queue")+" && "+visible("queue-join")+" && "+hidden("buy-form"))

	// The others join (their challenges solved here) just before the
	// browser, so it waits behind them at one admission a second.
	proofs := make([][2]string, len(ahead))
	for i, tok := range ahead {
		proofs[i] = solveChallenge(t, s.api, sku, tok)
	}
	for i, tok := range ahead {
		r := bulk(t, http.MethodPost, s.api+"/products/"+sku+"/queue",
			map[string]string{"challenge": proofs[i][0], "nonce": proofs[i][1]}, "Authorization", "Bearer "+tok)
		if r.Status != http.StatusCreated {
			t.Fatalf("shopper %d joins: %d %s", i, r.Status, r.Body)
		}
	}
	do(t, ctx, "join the queue", chromedp.Click(id("queue-join")))

	// The ticket: waiting with a place in line that falls, then admitted.
	state := `document.getElementById('queue').dataset.state`
	position := `Number(document.getElementById('queue-place').dataset.position)`
	until(t, ctx, "the ticket shows a place in line", state+` === 'waiting' && `+position+` > 0`)
	first, err := chromedp.Run(ctx, chromedp.Evaluate[int](position))
	if err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "storefront-waiting-room-queue.png")
	if first > 1 {
		until(t, ctx, "the place in line moves up",
			fmt.Sprintf(`(%s === 'waiting' && %s > 0 && %s < %d) || %s === 'admitted'`, state, position, position, first, state))
	}
	eta, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('queue-eta').textContent`))
	until(t, ctx, "admitted, the buy form is back", state+` === 'admitted' && `+visible("buy-form")+" && "+hidden("queue-join"))
	solve, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[document.getElementById('queue').dataset.solveMs || '', document.getElementById('queue').dataset.solveTries || '']`))
	if err != nil || len(solve) != 2 || solve[0] == "" {
		t.Fatalf("the page measured no challenge solve (%q, %v)", solve, err)
	}
	// Reported, not asserted: the issue asks that 16 bits solve within a
	// second, and the figure varies with the machine and the luck of the
	// draw (65,536 tries expected).
	t.Logf("16-bit challenge solved in the browser's worker in %s ms, %s tries (first place in line %d, %q)",
		solve[0], solve[1], first, eta)

	// The pass the server gave this shopper is the one the page sends.
	access, err := chromedp.Run(ctx, chromedp.Evaluate[string](`localStorage.getItem('shop.access')`))
	if err != nil {
		t.Fatal(err)
	}
	var ticket struct {
		State string  `json:"state"`
		Pass  *string `json:"pass"`
	}
	bulk(t, http.MethodGet, s.api+"/products/"+sku+"/queue", nil, "Authorization", "Bearer "+access).JSON(t, &ticket)
	if ticket.State != "admitted" || ticket.Pass == nil || *ticket.Pass == "" {
		t.Fatalf("the shopper's ticket: %+v", ticket)
	}
	// Record the headers of the page's purchases and checkouts.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		window.sentPasses = [];
		const f = window.fetch;
		window.fetch = (url, opts) => {
			if (/\/(purchase|checkout)$/.test(String(url))) window.sentPasses.push([String(url), ((opts && opts.headers) || {})['X-Queue-Pass'] || '']);
			return f(url, opts);
		};
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "buy with the pass", chromedp.Click(id("buy-now")))
	until(t, ctx, "the order is placed", `document.getElementById('message').textContent.includes('placed')`)
	do(t, ctx, "add one to the cart", chromedp.Click(id("add-to-cart")))
	until(t, ctx, "added to the cart", `document.getElementById('message').textContent.includes('Added')`)
	do(t, ctx, "open the cart", chromedp.Navigate(s.URL+"/#/cart"))
	do(t, ctx, "check out", chromedp.WaitVisible(id("checkout")), chromedp.Click(id("checkout")))
	until(t, ctx, "the checkout's order is placed", `location.hash === '#/orders'`)
	sent, err := chromedp.Run(ctx, chromedp.Evaluate[[][]string](`window.sentPasses || []`))
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 {
		t.Fatalf("the page sent %d purchases and checkouts, want 2: %q", len(sent), sent)
	}
	for _, req := range sent {
		if req[1] != *ticket.Pass {
			t.Errorf("%s sent X-Queue-Pass %q, want the shopper's pass", req[0], req[1])
		}
	}
	lines := `[...document.querySelectorAll('#orders .order-lines')].map(e => e.textContent).join()`
	until(t, ctx, "both orders are listed", fmt.Sprintf(`%s === '1 × %s,1 × %s'`, lines, sku, sku))
	until(t, ctx, "both orders are confirmed",
		`[...document.querySelectorAll('#orders .order-status')].map(e => e.textContent).join() === 'confirmed,confirmed'`)
	if rep := s.waitConfirmed(t, sku, 2); rep.Sold != 2 {
		t.Errorf("sold %d, want the browser's 2", rep.Sold)
	}
	screenshot(t, ctx, "storefront-waiting-room.png")

	// A new round without a room: the last room's fairness answer is still
	// public, so the page offers the queue until the join finds none; then
	// it sells directly.
	if r := bulk(t, http.MethodPut, s.api+"/admin/products/"+sku+"/stock",
		map[string]any{"quantity": 5}, admin...); r.Status != http.StatusOK {
		t.Fatalf("reseed %s without a room: %d %s", sku, r.Status, r.Body)
	}
	do(t, ctx, "open the product again", chromedp.Navigate(s.URL+"/#/p/"+sku))
	until(t, ctx, "live stock of the new round", text("live-available", "5"))
	until(t, ctx, "the page looked for a room", `!!document.getElementById('queue').dataset.room`)
	if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](visible("queue-join"))); ok {
		t.Logf("the page offers the last round's room; joining finds none")
		do(t, ctx, "join a room that is over", chromedp.Click(id("queue-join")))
	}
	until(t, ctx, "no room: the buy form", hidden("queue")+" && "+visible("buy-form"))
	do(t, ctx, "buy without a room", chromedp.Click(id("buy-now")))
	until(t, ctx, "the order is placed", `document.getElementById('message').textContent.includes('placed')`)
}

// solveChallenge gets a challenge for the shopper and finds its nonce.
func solveChallenge(t *testing.T, api, sku, token string) [2]string {
	t.Helper()
	var ch struct {
		Challenge string `json:"challenge"`
		Bits      int    `json:"bits"`
	}
	r := bulk(t, http.MethodGet, api+"/products/"+sku+"/queue/challenge", nil, "Authorization", "Bearer "+token)
	if r.Status != http.StatusOK {
		t.Fatalf("challenge: %d %s", r.Status, r.Body)
	}
	r.JSON(t, &ch)
	for n := 0; ; n++ {
		nonce := strconv.Itoa(n)
		sum := sha256.Sum256([]byte(ch.Challenge + ":" + nonce))
		if leadingZeroBits(sum[:]) >= ch.Bits {
			return [2]string{ch.Challenge, nonce}
		}
	}
}

func leadingZeroBits(b []byte) int {
	n := 0
	for _, c := range b {
		if c != 0 {
			return n + bits.LeadingZeros8(c)
		}
		n += 8
	}
	return n
}
