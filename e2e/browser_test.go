package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/bits"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/shop-oss/shop/internal/testenv"
	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"
)

// artifactsDir holds what the browser tests leave for people to look at
// (git-ignored).
const artifactsDir = "artifacts"

// e2eWebhookSecret is as long as shop serve asks outside SHOP_ENV=dev
// (config.MinWebhookSecretBytes).
const e2eWebhookSecret = "whsec_e2e_0123456789abcdefghijklmnop"

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
// threw, every console.error, and every browser log error (a file that
// failed to load, such as a missing favicon, or a policy violation). A
// failed API call (/api/v1/...) is the page's business, told to the
// shopper in words: its network log line is not counted. The flags keep
// it off the network: on a closed machine it would otherwise hang on
// background connections.
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
	return ctx, pageErrors(t, ctx)
}

// pageErrors watches a tab's console and returns a check that fails t for
// each error of the page (pageError).
func pageErrors(t *testing.T, ctx context.Context) func() {
	t.Helper()
	var mu sync.Mutex
	var thrown []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if pageError(m) {
				mu.Lock()
				thrown = append(thrown, m.String()+" "+m.URL)
				mu.Unlock()
			}
		}
	}()
	return func() {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, e := range thrown {
			t.Errorf("error on the page: %s", e)
		}
	}
}

// pageError tells whether a console message is an error of the page: an
// exception, a console.error, or a browser log error other than an API
// answer's status (a 404 or 409 the page handles).
func pageError(m chromedp.ConsoleMessage) bool {
	switch {
	case m.IsException():
		return true
	case m.Type != chromedp.ConsoleError:
		return false
	case m.Source == "network" && strings.Contains(m.URL, "/api/v1/"):
		return false
	}
	return true
}

// stayOnOrigin watches every request the tab sends and returns a check
// that fails t for each one to anywhere but origin (data: URLs excepted):
// the page loads nothing from elsewhere and talks to its own server only.
// Call it before the first navigation.
func stayOnOrigin(t *testing.T, ctx context.Context, origin string) func() {
	t.Helper()
	var mu sync.Mutex
	var away []string
	var seen int
	requests := chromedp.Events(ctx, network.RequestWillBeSent)
	go func() {
		for ev, err := range requests {
			if err != nil {
				return
			}
			if ev.Request == nil {
				continue
			}
			u := ev.Request.URL
			mu.Lock()
			seen++
			if u != origin && !strings.HasPrefix(u, origin+"/") && !strings.HasPrefix(u, "data:") {
				away = append(away, u)
			}
			mu.Unlock()
		}
	}()
	return func() {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if seen == 0 {
			t.Errorf("no request of the page was seen: the origin check watched nothing")
		}
		for _, u := range away {
			t.Errorf("the page sent a request off its origin %s: %s", origin, u)
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
	defer stayOnOrigin(t, ctx, s.URL)()
	id := func(s string) chromedp.ID { return chromedp.ID(s) }

	// Sign up (which logs in), log out, log in.
	signUp(t, ctx, s, "browser@shop.test", "browser-password")
	do(t, ctx, "log out", chromedp.Click(id("nav-logout")), chromedp.WaitVisible(id("nav-login")))
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

	// The order turns confirmed once the writer has recorded it; the
	// shopper reads that it awaits payment.
	do(t, ctx, "open the orders", chromedp.Navigate(s.URL+"/#/orders"))
	until(t, ctx, "the order is confirmed",
		`[...document.querySelectorAll('#orders li')].map(e => e.dataset.status).join() === 'confirmed'`+
			` && document.querySelector('#orders .order-status').textContent === 'Awaiting payment'`)
	// The test provider pays with one click: no card to type.
	until(t, ctx, "no card field with the test provider", `document.getElementById('pay-card').getClientRects().length === 0`)
	buttons, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#orders .order-actions button').length`))
	if err != nil || buttons != 2 {
		t.Errorf("a confirmed order shows %d buttons (%v), want pay and cancel", buttons, err)
	}
	if rep := s.stock(t, "demo-browser"); rep.Available != 46 {
		t.Errorf("available %d after 3 + 1 units sold, want 46 (a double click must buy once)", rep.Available)
	}
	// The server's payment window is the default 15 minutes: the time
	// left is said in words.
	countdown := `document.querySelector('#orders .order-expiry').textContent`
	until(t, ctx, "the time left to pay is shown", `/^Pay within about 1[45] minutes$/.test(`+countdown+`)`)
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
	statuses := `[...document.querySelectorAll('#orders li')].map(e => e.dataset.status).join()`
	until(t, ctx, "both orders confirmed", statuses+` === 'confirmed,confirmed'`)
	// Newest first: the second purchase is on top.
	ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#orders li')].map(li => li.dataset.orderId)`))
	if err != nil || len(ids) != 2 {
		t.Fatalf("orders on the page: %v %v", ids, err)
	}
	second, first := ids[0], ids[1]
	click := func(what, action, id string) {
		t.Helper()
		js := fmt.Sprintf(`document.querySelector('#orders li[data-order-id=%q] button[data-action=%q]').click(), true`, id, action)
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	statusOf := func(id string) string {
		return fmt.Sprintf(`document.querySelector('#orders li[data-order-id=%q]').dataset.status`, id)
	}
	buttonsOf := func(id string) string {
		return fmt.Sprintf(`document.querySelectorAll('#orders li[data-order-id=%q] .order-actions button').length`, id)
	}
	click("pay the first order", "pay", first)
	until(t, ctx, "the first order is paid", statusOf(first)+` === 'paid' && `+buttonsOf(first)+` === 0`+
		fmt.Sprintf(` && document.querySelector('#orders li[data-order-id=%q] .order-status').textContent === 'Paid'`, first))
	until(t, ctx, "the payment is confirmed on the page", `document.getElementById('message').textContent.includes('paid')`)
	click("cancel the second order", "cancel", second)
	until(t, ctx, "the second order is cancelled", statusOf(second)+` === 'cancelled' && `+buttonsOf(second)+` === 0`+
		fmt.Sprintf(` && document.querySelector('#orders li[data-order-id=%q] .order-status').textContent === 'Cancelled'`, second))
	until(t, ctx, "the first is still paid", statusOf(first)+` === 'paid'`)
	do(t, ctx, "back to the product", chromedp.Navigate(s.URL+"/#/p/demo-browser"))
	until(t, ctx, "the cancelled unit is back in the live stock", text("live-available", "46"))
	do(t, ctx, "the orders once more", chromedp.Navigate(s.URL+"/#/orders"))
	until(t, ctx, "paid and cancelled", statuses+` === 'cancelled,paid'`)
}

// The storefront with SHOP_PAYMENT_PROVIDER=stripe against stripe-mock:
// the orders page asks for the card (a PaymentMethod id), refuses to pay
// without one, and pays with pm_card_visa typed in. With the mock's
// bundled answer (requires_payment_method, a 202) the page says to try
// another card and the order stays confirmed with pay and cancel; with a
// mock answering succeeded the order shows paid; with one answering
// requires_action the page says the bank must confirm and follows the
// order until Stripe's webhook (signed here) pays it.
func TestBrowserStorefrontStripe(t *testing.T) {
	t.Parallel()
	const price = 1299
	for _, tc := range []struct {
		name string
		mock func(t *testing.T) string
		then func(t *testing.T, ctx context.Context, s *shop, order string)
	}{
		{"requires_payment_method", func(t *testing.T) string { return testenv.StripeMock(t) }, stripeTryAnother},
		{"succeeded", func(t *testing.T) string {
			return testenv.StripeMockWith(t, map[string]map[string]any{
				"payment_intent": {"status": "succeeded", "amount": price},
			})
		}, stripePaid},
		{"requires_action", func(t *testing.T) string {
			return testenv.StripeMockWith(t, map[string]map[string]any{
				"payment_intent": {"status": "requires_action", "amount": price},
			})
		}, stripeBankConfirms},
		{"refunded", func(t *testing.T) string {
			return testenv.StripeMockWith(t, map[string]map[string]any{
				"payment_intent": {"status": "requires_action", "amount": price},
			})
		}, stripeRefunded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := liveEnv(t)
			e["SHOP_PAYMENT_PROVIDER"] = "stripe"
			e["SHOP_STRIPE_SECRET_KEY"] = "sk_test_123"
			e["SHOP_STRIPE_WEBHOOK_SECRET"] = e2eWebhookSecret
			e["SHOP_STRIPE_API_URL"] = tc.mock(t)
			s := newShop(t, e)
			s.product(t, "stripe-browser", price, map[string]any{"quantity": 10, "per_user_limit": 0})
			ctx, noScriptErrors := browser(t)
			defer noScriptErrors()
			defer stayOnOrigin(t, ctx, s.URL)()
			order := stripeOrder(t, ctx, s)
			tc.then(t, ctx, s, order)
		})
	}
}

// stripeOrder signs up, buys one unit and opens the orders page with the
// order confirmed, the card field shown, and checks that Pay without a
// card asks for one; it returns the order's id.
func stripeOrder(t *testing.T, ctx context.Context, s *shop) string {
	t.Helper()
	id := func(s string) chromedp.ID { return chromedp.ID(s) }
	signUp(t, ctx, s, "stripe@shop.test", "stripe-password")
	do(t, ctx, "open the product", chromedp.Navigate(s.URL+"/#/p/stripe-browser"))
	until(t, ctx, "live stock shown", text("live-available", "10"))
	do(t, ctx, "buy", chromedp.Click(id("buy-now")))
	until(t, ctx, "the order is placed", `document.getElementById('message').textContent.includes('placed')`)
	do(t, ctx, "open the orders", chromedp.Navigate(s.URL+"/#/orders"))
	until(t, ctx, "the order is confirmed",
		`[...document.querySelectorAll('#orders li')].map(e => e.dataset.status).join() === 'confirmed'`)
	until(t, ctx, "the card field is shown, labelled",
		`document.getElementById('pay-card').getClientRects().length > 0 && `+
			`document.querySelector('label[for="pay-method"]').textContent.includes('Card')`)
	order, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#orders li').dataset.orderId`))
	if err != nil || order == "" {
		t.Fatalf("the order on the page: %q %v", order, err)
	}
	clickPay(t, ctx, order)
	until(t, ctx, "Pay without a card asks for one, in the card field",
		`document.getElementById('message').textContent.includes('Enter the card') && document.activeElement.id === 'pay-method'`)
	do(t, ctx, "type the card", chromedp.SendKeys(id("pay-method"), "pm_card_visa"))
	clickPay(t, ctx, order)
	return order
}

func clickPay(t *testing.T, ctx context.Context, order string) {
	t.Helper()
	js := fmt.Sprintf(`document.querySelector('#orders li[data-order-id=%q] button[data-action="pay"]').click(), true`, order)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
		t.Fatalf("pay: %v", err)
	}
}

// stripeTryAnother: stripe-mock's bundled intent is requires_payment_method,
// so pay answers 202 and the page says to try another card; the order is
// still confirmed, payable and cancellable, here and in the API.
func stripeTryAnother(t *testing.T, ctx context.Context, s *shop, order string) {
	t.Helper()
	li := fmt.Sprintf(`document.querySelector('#orders li[data-order-id=%q]')`, order)
	until(t, ctx, "the page says to try another card", li+`.dataset.payment === 'requires_payment_method' && `+
		li+`.querySelector('.order-payment').textContent.includes('try another card') && `+
		`document.getElementById('message').textContent.includes('try another card')`)
	until(t, ctx, "the order is still payable", li+`.dataset.status === 'confirmed' && `+
		`[...`+li+`.querySelectorAll('.order-actions button')].filter(b => !b.disabled).map(b => b.textContent).join() === 'Pay,Cancel'`)
	until(t, ctx, "the card is kept for another try", `document.getElementById('pay-method').value === 'pm_card_visa'`)
	access, err := chromedp.Run(ctx, chromedp.Evaluate[string](`localStorage.getItem('shop.access')`))
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Status  string `json:"status"`
		Payment *struct {
			Provider, Status string
		} `json:"payment"`
	}
	call(t, http.MethodGet, s.api+"/orders/"+order, nil, "Authorization", "Bearer "+access).JSON(t, &o)
	if o.Status != "confirmed" || o.Payment == nil || o.Payment.Provider != "stripe" || o.Payment.Status != "requires_payment_method" {
		t.Errorf("the order in the API: %+v (payment %+v)", o, o.Payment)
	}
	screenshot(t, ctx, "storefront-stripe-try-another.png")
}

// stripePaid: a mock answering succeeded pays the order at once.
func stripePaid(t *testing.T, ctx context.Context, s *shop, order string) {
	t.Helper()
	li := fmt.Sprintf(`document.querySelector('#orders li[data-order-id=%q]')`, order)
	until(t, ctx, "the order is paid", li+`.dataset.status === 'paid' && `+
		li+`.querySelectorAll('.order-actions button').length === 0 && `+li+`.dataset.payment === 'succeeded'`)
	until(t, ctx, "the payment is confirmed on the page", `document.getElementById('message').textContent.includes('paid')`)
	screenshot(t, ctx, "storefront-stripe-paid.png")
}

// stripeBankConfirms: the intent needs the shopper's bank (a 202 with
// requires_action); the page says so and follows the order, and when
// Stripe's webhook reports the intent succeeded the page shows it paid.
func stripeBankConfirms(t *testing.T, ctx context.Context, s *shop, order string) {
	t.Helper()
	li := fmt.Sprintf(`document.querySelector('#orders li[data-order-id=%q]')`, order)
	until(t, ctx, "the page says the bank must confirm", li+`.dataset.payment === 'requires_action' && `+
		li+`.querySelector('.order-payment').textContent.includes('bank needs to confirm') && `+
		`document.getElementById('message').textContent.includes('bank needs to confirm') && `+
		li+`.dataset.status === 'confirmed'`)
	screenshot(t, ctx, "storefront-stripe-requires-action.png")
	intentSucceeded(t, ctx, s, order)
	until(t, ctx, "the page followed the order until paid", li+`.dataset.status === 'paid' && `+
		`document.getElementById('message').textContent.includes('paid')`)
}

// stripeRefunded: the shopper cancels while the bank has yet to confirm;
// the intent then succeeds, the shop refunds it, and the order list shows
// the cancelled order's payment refunded.
func stripeRefunded(t *testing.T, ctx context.Context, s *shop, order string) {
	t.Helper()
	li := fmt.Sprintf(`document.querySelector('#orders li[data-order-id=%q]')`, order)
	until(t, ctx, "the page says the bank must confirm, cancel enabled", li+`.dataset.payment === 'requires_action' && `+
		fmt.Sprintf(`!%s.querySelector('button[data-action="cancel"]').disabled`, li))
	js := fmt.Sprintf(`document.querySelector('#orders li[data-order-id=%q] button[data-action="cancel"]').click(), true`, order)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	until(t, ctx, "the order is cancelled, its payment not completed", li+`.dataset.status === 'cancelled' && `+
		li+`.querySelector('.order-payment').textContent.includes('not completed')`)
	intentSucceeded(t, ctx, s, order)
	until(t, ctx, "the list shows the payment refunded", li+`.dataset.payment === 'refunded' && `+
		li+`.querySelector('.order-payment').textContent.includes('refunded: $12.99') && `+
		li+`.dataset.status === 'cancelled'`)
	screenshot(t, ctx, "storefront-stripe-refunded.png")
}

// intentSucceeded delivers Stripe's signed payment_intent.succeeded for
// the order's intent, as the page's shopper's bank would have it.
func intentSucceeded(t *testing.T, ctx context.Context, s *shop, order string) {
	t.Helper()
	access, err := chromedp.Run(ctx, chromedp.Evaluate[string](`localStorage.getItem('shop.access')`))
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Payment struct {
			ID string `json:"id"`
		} `json:"payment"`
	}
	call(t, http.MethodGet, s.api+"/orders/"+order, nil, "Authorization", "Bearer "+access).JSON(t, &o)
	if o.Payment.ID == "" {
		t.Fatalf("order %s has no payment to succeed", order)
	}
	body, _ := json.Marshal(map[string]any{"id": "evt_" + order, "object": "event", "type": "payment_intent.succeeded",
		"api_version": stripe.APIVersion, "created": time.Now().Unix(), "data": map[string]any{"object": map[string]any{
			"id": o.Payment.ID, "object": "payment_intent", "status": "succeeded", "amount": 1299, "currency": "usd",
			"metadata": map[string]string{"order_id": order}}}})
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: e2eWebhookSecret, Timestamp: time.Now()})
	if r := call(t, http.MethodPost, s.api+"/payments/stripe/webhook", json.RawMessage(body), "Stripe-Signature", signed.Header); r.Status != http.StatusOK {
		t.Fatalf("the webhook: %d %s", r.Status, r.Body)
	}
}

// signUp registers email on the storefront's form, which logs it in.
func signUp(t *testing.T, ctx context.Context, s *shop, email, password string) {
	t.Helper()
	do(t, ctx, "sign up",
		chromedp.Navigate(s.URL+"/#/register"),
		chromedp.WaitVisible(chromedp.ID("register-email")),
		chromedp.SendKeys(chromedp.ID("register-email"), email),
		chromedp.SendKeys(chromedp.ID("register-password"), password),
		chromedp.Click(chromedp.ID("register-submit")),
		chromedp.WaitVisible(chromedp.ID("nav-logout")),
	)
}

// stepDeadline turns a page that never shows what a step waits for (a
// script that failed to load, say) into that step's failure, named,
// instead of a hang until go test's timeout. Steps take seconds.
const stepDeadline = 2 * time.Minute

func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, stepDeadline)
	defer cancel()
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
	defer stayOnOrigin(t, ctx, s.URL)()
	id := func(s string) chromedp.ID { return chromedp.ID(s) }

	signUp(t, ctx, s, "room@shop.test", "room-password")
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
	until(t, ctx, "both orders are listed by the product's name", fmt.Sprintf(`%s === '1 × Product %s,1 × Product %s'`, lines, sku, sku))
	until(t, ctx, "both orders are confirmed",
		`[...document.querySelectorAll('#orders li')].map(e => e.dataset.status).join() === 'confirmed,confirmed'`)
	if rep := s.waitConfirmed(t, sku, 2); rep.Sold != 2 {
		t.Errorf("sold %d, want the browser's 2", rep.Sold)
	}
	screenshot(t, ctx, "storefront-waiting-room.png")

	// A new round without a room: its stock event says so, and the page
	// sells directly.
	if r := bulk(t, http.MethodPut, s.api+"/admin/products/"+sku+"/stock",
		map[string]any{"quantity": 5}, admin...); r.Status != http.StatusOK {
		t.Fatalf("reseed %s without a room: %d %s", sku, r.Status, r.Body)
	}
	do(t, ctx, "open the product again", chromedp.Navigate(s.URL+"/#/p/"+sku))
	until(t, ctx, "live stock of the new round", text("live-available", "5"))
	until(t, ctx, "no room: the buy form", `document.getElementById('queue').dataset.room === 'no' && `+hidden("queue")+" && "+visible("buy-form"))
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

// The storefront says each sale's state, in the catalog and on the
// product page, and Buy is on only when it can succeed: a product not on
// sale, a sale later today, one opening in a few seconds, an open one
// with a per-shopper limit of 1 (stated), a sold-out one and one that
// ends. The sale that opens does so on the page without a reload, Buy turning on
// within the second of starts_at; the second purchase past the limit
// disables Buy with the reason. The nav greets the shopper by name, and
// the orders name the product with a short reference. Every view is
// saved at 1280 and 390 px (store-*.png).
func TestBrowserSaleStates(t *testing.T) {
	t.Parallel()
	s := newShop(t, liveEnv(t))
	admin := []string{"Authorization", "Bearer " + s.admin}
	rfc := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }
	// A window must end in the future when seeded: this one ends before
	// the catalog is opened.
	s.product(t, "sale-ended", 3000, map[string]any{"quantity": 5, "ends_at": rfc(3 * time.Second)})
	if r := call(t, http.MethodPost, s.api+"/admin/products", map[string]any{
		"sku": "sale-none", "name": "Product sale-none", "category": "e2e", "price_cents": 900,
	}, admin...); r.Status != http.StatusCreated {
		t.Fatalf("create sale-none: %d %s", r.Status, r.Body)
	}
	s.product(t, "sale-later", 4900, map[string]any{"quantity": 5, "starts_at": rfc(3 * time.Hour), "ends_at": rfc(5 * time.Hour)})
	s.product(t, "sale-open", 1999, map[string]any{"quantity": 20, "per_user_limit": 1, "ends_at": rfc(2 * time.Hour)})
	s.product(t, "sale-sold", 2500, map[string]any{"quantity": 1, "per_user_limit": 1})
	other := s.shoppers(t, 1, "sale-other")[0]
	if o := s.purchase(t, other, "sale-sold", 1, "sale-sold-1"); o.status != http.StatusAccepted {
		t.Fatalf("sell out sale-sold: %+v", o)
	}
	ctx, noScriptErrors := browser(t)
	defer noScriptErrors()
	defer stayOnOrigin(t, ctx, s.URL)()
	id := func(s string) chromedp.ID { return chromedp.ID(s) }

	do(t, ctx, "log-in page", chromedp.Navigate(s.URL+"/#/login"), chromedp.WaitVisible(id("login-email")))
	fits(t, ctx, "store-login")
	do(t, ctx, "sign up with a name",
		chromedp.Navigate(s.URL+"/#/register"),
		chromedp.WaitVisible(id("register-email")),
		chromedp.SendKeys(id("register-name"), "Ada Lovelace"),
		chromedp.SendKeys(id("register-email"), "ada@shop.test"),
		chromedp.SendKeys(id("register-password"), "ada-password"),
		chromedp.Click(id("register-submit")),
		chromedp.WaitVisible(id("nav-logout")),
	)
	until(t, ctx, "the nav shows the name, not the email", text("nav-user", "Ada Lovelace"))

	// The catalog: each card with its sale's state.
	card := func(sku string) string { return fmt.Sprintf(`document.querySelector('#catalog li[data-sku=%q]')`, sku) }
	for sku, want := range map[string]string{
		"sale-none": "none", "sale-later": "upcoming", "sale-open": "open", "sale-sold": "sold_out", "sale-ended": "ended",
	} {
		until(t, ctx, sku+" card says "+want, fmt.Sprintf(`!!%s && %s.dataset.sale === %q`, card(sku), card(sku), want))
	}
	until(t, ctx, "the upcoming card shows its start", card("sale-later")+`.querySelector('.card-available').textContent.startsWith('Starts ')`)
	until(t, ctx, "not on sale and sold out read differently",
		card("sale-none")+`.querySelector('.card-state').textContent !== `+card("sale-sold")+`.querySelector('.card-state').textContent`)
	fits(t, ctx, "store-catalog")

	// A product page: its state, Buy on or off with the reason.
	product := func(sku, badge, reason, shot string) {
		t.Helper()
		do(t, ctx, "open "+sku, chromedp.Navigate(s.URL+"/#/p/"+sku))
		until(t, ctx, sku+" reads "+badge, text("live-sale", badge)+` && !document.getElementById('live').classList.contains('loading')`)
		switch reason {
		case "":
			until(t, ctx, sku+": Buy is on, no reason shown",
				`!document.getElementById('buy-now').disabled && document.getElementById('buy-reason').getClientRects().length === 0`)
		case "closed": // the badge says why; nothing to buy, nothing said twice
			until(t, ctx, sku+": no buy form", `document.getElementById('buy-area').getClientRects().length === 0`)
		default:
			until(t, ctx, sku+": Buy is off with the reason", fmt.Sprintf(
				`document.getElementById('buy-now').disabled && document.getElementById('buy-reason').getClientRects().length > 0 && `+
					`document.getElementById('buy-reason').textContent.includes(%q)`, reason))
		}
		if shot != "" {
			fits(t, ctx, shot)
		}
	}
	product("sale-none", "not on sale", "closed", "store-product-none")
	product("sale-later", "upcoming", "opens when the sale starts", "store-product-upcoming")
	until(t, ctx, "the upcoming sale states its start and end", `/^Sale starts .+ and ends .+\.$/.test(document.getElementById('sale-info').textContent)`)
	product("sale-sold", "sold out", "closed", "store-product-soldout")
	product("sale-ended", "sale ended", "closed", "store-product-ended")

	// The limit, stated before any purchase; one purchase, then Buy off
	// with the reason.
	product("sale-open", "on sale now", "", "store-product-open")
	until(t, ctx, "the open sale states its limit", `document.getElementById('sale-info').textContent.endsWith('Limit 1 unit per shopper.')`)
	do(t, ctx, "buy the one allowed", chromedp.Click(id("buy-now")))
	until(t, ctx, "the order is placed", `document.getElementById('message').textContent.includes('placed')`)
	until(t, ctx, "Buy is back on", `!document.getElementById('buy-now').disabled`)
	do(t, ctx, "buy one more", chromedp.Click(id("buy-now")))
	until(t, ctx, "past the limit, Buy is off with the reason",
		`document.getElementById('buy-now').disabled && document.getElementById('buy-reason').textContent.includes('purchase limit')`)
	fits(t, ctx, "store-product-limit")

	// The countdown: a sale opening in a few seconds turns on without a
	// reload, at its start. The server sends an event at starts_at too;
	// the page's stream is closed once the countdown shows, so the page
	// must open the sale on its own clock (as when its stream is down).
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const ES = window.EventSource;
		window.streams = [];
		window.EventSource = function (url) { const e = new ES(url); window.streams.push(e); return e; };
		window.EventSource.CLOSED = ES.CLOSED;
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	startsAt := time.Now().Add(6 * time.Second).Truncate(time.Second)
	s.product(t, "sale-soon", 1500, map[string]any{"quantity": 5, "starts_at": startsAt.UTC().Format(time.RFC3339)})
	do(t, ctx, "open sale-soon", chromedp.Navigate(s.URL+"/#/p/sale-soon"))
	until(t, ctx, "sale-soon is upcoming, Buy off with the reason", text("live-sale", "upcoming")+
		` && document.getElementById('buy-now').disabled && document.getElementById('buy-reason').textContent.includes('opens when the sale starts')`+
		` && document.getElementById('countdown').textContent.startsWith('Starts in ')`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		window.sameDocument = true;
		for (const e of window.streams) e.close();
		const b = document.getElementById('buy-now');
		new MutationObserver(() => { if (!b.disabled && !window.buyOnAt) window.buyOnAt = Date.now(); })
			.observe(b, { attributes: true, attributeFilter: ['disabled'] });
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	if time.Now().After(startsAt) {
		t.Fatalf("sale-soon opened before the page was watched; the test is too slow")
	}
	until(t, ctx, "Buy turns on when the sale opens, without a reload",
		`window.sameDocument === true && !!window.buyOnAt && `+text("live-sale", "on sale now")+
			` && document.getElementById('buy-reason').getClientRects().length === 0`)
	on, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`window.buyOnAt`))
	if err != nil {
		t.Fatal(err)
	}
	late := time.UnixMilli(on).Sub(startsAt)
	t.Logf("Buy turned on %v after starts_at", late)
	if late < -50*time.Millisecond || late > 250*time.Millisecond {
		t.Errorf("Buy turned on %v after starts_at, want at once (a timer on starts_at)", late)
	}
	do(t, ctx, "buy as it opens", chromedp.Click(id("buy-now")))
	until(t, ctx, "the order is placed", `document.getElementById('message').textContent.includes('placed')`)

	// The orders: product names and short references.
	do(t, ctx, "open the orders", chromedp.Navigate(s.URL+"/#/orders"))
	until(t, ctx, "the orders name the products",
		`[...document.querySelectorAll('#orders .order-lines')].map(e => e.textContent).join() === '1 × Product sale-soon,1 × Product sale-open'`)
	until(t, ctx, "short order references",
		`[...document.querySelectorAll('#orders .order-id')].every(e => /^Order #[0-9A-F]{8}$/.test(e.textContent)) && `+
			`new Set([...document.querySelectorAll('#orders .order-id')].map(e => e.textContent)).size === 2`)
	until(t, ctx, "both orders confirmed",
		`[...document.querySelectorAll('#orders li')].map(e => e.dataset.status).join() === 'confirmed,confirmed'`)
	fits(t, ctx, "store-orders")
}
