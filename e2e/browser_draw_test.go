package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/shop-oss/shop/internal/testenv"
)

// A draw in real browsers against a running `shop serve` (docs/api.md,
// Draws): the admin makes the round a draw in the console; on the product
// page a shopper enters (Enter the draw instead of Buy), sees entered,
// withdraws and enters again; a second shopper enters; the admin closes
// the draw from the console (after confirming) and sees it drawn, with the
// winner and the fairness data; each shopper's page then shows its result
// as the API answers it: the winner won, with a link to its paid order,
// the other lost, both with the seed and the digests. Each shopper and
// the admin have a browser context of their own (their own storage).
func TestBrowserDraw(t *testing.T) {
	t.Parallel()
	const sku = "draw-browser"
	s := newShop(t, liveEnv(t))
	s.shopperProduct(t, shopperProduct{sku: sku, name: "Numbered print", category: "art", description: "One print, drawn among the entrants."})
	a, noScriptErrors := browser(t)
	defer noScriptErrors()
	defer stayOnOrigin(t, a, s.URL)()
	b, admin := otherContext(t, a), otherContext(t, a)

	drawSeed(t, admin, s, sku)
	do(t, a, "open the catalog", chromedp.Navigate(s.URL+"/"))
	until(t, a, "the draw's card says Draw and counts its units", `(() => { const li = document.querySelector('#catalog li[data-sku="`+sku+`"]');
		return !!li && li.querySelector('.card-draw').getClientRects().length > 0 && li.querySelector('.card-available').textContent === '1 unit in the draw'; })()`)
	signUp(t, a, s, "draw-a@shop.test", "draw-password")
	tokenA := storefrontToken(t, a)
	first := drawEnter(t, a, s, sku, "2")
	fits(t, a, "shopper-draw-entered")
	drawWithdraw(t, a, s, sku, tokenA, first)
	second := drawEnter(t, a, s, sku, "1")
	if second == first {
		t.Fatalf("entering again answered the withdrawn entry %s", first)
	}
	signUp(t, b, s, "draw-b@shop.test", "draw-password")
	tokenB := storefrontToken(t, b)
	drawEnter(t, b, s, sku, "1")
	if e := drawEntry(t, s, sku, tokenA); e.State != "entered" || e.ID != second || e.Quantity != 1 {
		t.Fatalf("the first shopper's entry in the API: %+v, want %s entered for 1", e, second)
	}

	drawClose(t, admin, s, sku)
	pub := drawPublic(t, s, sku)
	if pub.State != "drawn" || pub.Seed == nil || pub.WinnersSHA256 == nil {
		t.Fatalf("the draw in the API after the close: %+v", pub)
	}
	winner, loser, winToken, loseToken := a, b, tokenA, tokenB
	if drawEntry(t, s, sku, tokenA).State != "won" {
		winner, loser, winToken, loseToken = b, a, tokenB, tokenA
	}
	won, lost := drawEntry(t, s, sku, winToken), drawEntry(t, s, sku, loseToken)
	if won.State != "won" || won.OrderID == "" || lost.State != "lost" {
		t.Fatalf("one unit, two entries of one: the entries in the API are %+v and %+v, want won and lost", won, lost)
	}
	drawOrderPaid(t, s, winToken, won.OrderID)
	drawResult(t, loser, "lost", *pub.Seed)
	fits(t, loser, "shopper-draw-lost")
	drawResult(t, winner, "won", *pub.Seed)
	until(t, winner, "the won order is linked", fmt.Sprintf(`document.getElementById('draw-order').dataset.orderId === %q`+
		` && document.getElementById('draw-order').getClientRects().length > 0`, won.OrderID))
	fits(t, winner, "shopper-draw-won")
	do(t, winner, "follow the link to the order", chromedp.Click(chromedp.CSS(`#draw-order a`)))
	until(t, winner, "the order is listed, paid", fmt.Sprintf(`document.querySelector('#orders li[data-order-id=%q]')?.dataset.status === 'paid'`, won.OrderID))
}

// otherContext opens a tab in a browser context of its own (its own
// storage: another shopper, or the admin) in parent's browser, checked for
// script errors when t ends.
func otherContext(t *testing.T, parent context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(parent, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // opens the tab
		t.Fatalf("open a browser context: %v", err)
	}
	t.Cleanup(pageErrors(t, ctx))
	return ctx
}

func storefrontToken(t *testing.T, ctx context.Context) string {
	t.Helper()
	tok, err := chromedp.Run(ctx, chromedp.Evaluate[string](`localStorage.getItem('shop.access')`))
	if err != nil || tok == "" {
		t.Fatalf("the shopper's token: %q %v", tok, err)
	}
	return tok
}

// drawSeed logs the admin in and opens a round of one unit as a draw from
// the sale page, closing in two hours: the draw card shows it open.
func drawSeed(t *testing.T, ctx context.Context, s *shop, sku string) {
	t.Helper()
	consoleLogIn(t, ctx, s)
	until(t, ctx, "the overview opens", `!document.getElementById('view-overview').hidden`)
	do(t, ctx, "open the sale round", chromedp.Navigate(s.URL+"/admin#/sale/"+sku))
	until(t, ctx, "the form is ready", `!document.getElementById('sale-seed').disabled`)
	do(t, ctx, "a draw without its close",
		typeInto("sale-quantity", "1"),
		typeInto("sale-limit", "2"),
		chromedp.Click(chromedp.ID("sale-draw")),
		chromedp.WaitVisible(chromedp.ID("sale-closes")),
		chromedp.Click(chromedp.ID("sale-seed")),
	)
	until(t, ctx, "the missing close is said beside its field", `document.getElementById('sale-closes-error').textContent.trim() !== ''`+
		` && document.getElementById('sale-closes').getAttribute('aria-invalid') === 'true'`)
	do(t, ctx, "the close in two hours",
		script(`document.getElementById('sale-closes').value = localInput(Date.now() + 2 * 3600 * 1000)`),
		chromedp.Click(chromedp.ID("sale-seed")),
	)
	until(t, ctx, "the draw card shows the draw open", `document.getElementById('draw-facts').dataset.state === 'open'`+
		` && document.querySelector('#draw-facts dd[data-key="units"]').textContent === '1'`+
		` && /^1 h 5\d min$|^2 h 0 min$/.test(document.querySelector('#draw-facts dd[data-key="countdown"]').textContent)`+
		` && document.getElementById('draw-close').getClientRects().length > 0`)
	s.watch.sample(t, sku)
}

// drawEnter enters the draw on the product page with quantity units and
// waits for the page to show the entry entered, with Withdraw; it
// returns the entry's id, as the API has it.
func drawEnter(t *testing.T, ctx context.Context, s *shop, sku, quantity string) string {
	t.Helper()
	do(t, ctx, "open the product", chromedp.Navigate(s.URL+"/#/p/"+sku))
	until(t, ctx, "Enter the draw instead of Buy", `document.getElementById('draw-form').getClientRects().length > 0`+
		` && !document.getElementById('draw-enter').disabled && document.getElementById('draw-enter').textContent === 'Enter the draw'`+
		` && document.getElementById('buy-area').getClientRects().length === 0`+
		` && document.getElementById('draw-quantity').max === '2'`+
		` && /^Entries close in about (2 hours|1[12]\d minutes)/.test(document.getElementById('draw-countdown').textContent)`)
	do(t, ctx, "enter", chromedp.SetValue(chromedp.ID("draw-quantity"), quantity), chromedp.Click(chromedp.ID("draw-enter")))
	until(t, ctx, "entered, with Withdraw", `document.getElementById('draw').dataset.entry === 'entered'`+
		` && document.getElementById('draw-withdraw').getClientRects().length > 0 && !document.getElementById('draw-withdraw').disabled`+
		` && document.getElementById('draw-form').getClientRects().length === 0`+
		` && document.getElementById('draw-entry').getAttribute('aria-live') === 'polite'`+
		` && document.activeElement.id === 'draw-withdraw'`) // the focus moved from the gone form
	e := drawEntry(t, s, sku, storefrontToken(t, ctx))
	if e.State != "entered" || fmt.Sprint(e.Quantity) != quantity {
		t.Fatalf("the entry in the API: %+v, want entered for %s", e, quantity)
	}
	return e.ID
}

// drawWithdraw withdraws on the page: withdrawn, and the form is back.
func drawWithdraw(t *testing.T, ctx context.Context, s *shop, sku, token, id string) {
	t.Helper()
	do(t, ctx, "withdraw", chromedp.Click(chromedp.ID("draw-withdraw")))
	until(t, ctx, "withdrawn, and the form is back", `document.getElementById('draw').dataset.entry === 'withdrawn'`+
		` && document.getElementById('draw-withdraw').getClientRects().length === 0`+
		` && document.getElementById('draw-form').getClientRects().length > 0 && !document.getElementById('draw-enter').disabled`+
		` && document.activeElement.id === 'draw-quantity'`)
	if e := drawEntry(t, s, sku, token); e.State != "withdrawn" || e.ID != id {
		t.Fatalf("the entry in the API after the withdrawal: %+v, want %s withdrawn", e, id)
	}
}

// drawClose closes the draw in the console, once confirmed: drawn, with
// its one winner listed and the seed published.
func drawClose(t *testing.T, ctx context.Context, s *shop, sku string) {
	t.Helper()
	do(t, ctx, "read the entries", chromedp.Click(chromedp.ID("draw-refresh")))
	until(t, ctx, "three entries listed, two counted", `document.querySelectorAll('#draw-entries tr').length === 3`+
		` && document.querySelector('#draw-facts dd[data-key="entries"]').textContent === '2'`)
	views(t, ctx, "draw-open")
	do(t, ctx, "close now", chromedp.Click(chromedp.ID("draw-close")), chromedp.WaitVisible(chromedp.ID("confirm-yes")),
		chromedp.Click(chromedp.ID("confirm-yes")))
	until(t, ctx, "drawn, one winner, the seed published", `document.getElementById('draw-facts').dataset.state === 'drawn'`+
		` && document.querySelectorAll('#draw-winners li').length === 1`+
		` && /^[0-9a-f]{64}$/.test(document.querySelector('#draw-facts dd[data-key="seed"]').textContent)`+
		` && /^[0-9a-f]{64}$/.test(document.querySelector('#draw-facts dd[data-key="winners_sha256"]').textContent)`+
		` && document.querySelector('#draw-entries tr').dataset.state === 'won'`+
		` && /^1 won, 1 lost, 1 withdrawn$/.test(document.querySelector('#draw-facts dd[data-key="by_state"]').textContent)`+
		` && / 0 left$/.test(document.querySelector('#draw-facts dd[data-key="cancels"]').textContent)`+
		` && document.getElementById('draw-close').getClientRects().length === 0`)
	views(t, ctx, "draw-drawn")
}

// drawResult waits for a shopper's page to show the draw drawn and its
// entry in state, with the fairness data.
func drawResult(t *testing.T, ctx context.Context, state, seed string) {
	t.Helper()
	until(t, ctx, "the result: "+state, fmt.Sprintf(`document.getElementById('draw').dataset.state === 'drawn'`+
		` && document.getElementById('draw').dataset.entry === %q`+
		` && document.querySelector('#draw-fairness dd[data-key="seed"]').textContent === %q`+
		` && /^[0-9a-f]{64}$/.test(document.querySelector('#draw-fairness dd[data-key="winners_sha256"]').textContent)`+
		` && document.getElementById('draw-result').getClientRects().length > 0`+
		` && document.getElementById('draw-withdraw').getClientRects().length === 0`+
		` && document.getElementById('draw-countdown').getClientRects().length === 0`, state, seed))
}

type drawEntryAnswer struct {
	ID       string `json:"entry_id"`
	State    string `json:"state"`
	Quantity int    `json:"quantity"`
	OrderID  string `json:"order_id"`
}

func drawEntry(t *testing.T, s *shop, sku, token string) drawEntryAnswer {
	t.Helper()
	r := call(t, http.MethodGet, s.api+"/products/"+sku+"/draw/entries/me", nil, "Authorization", "Bearer "+token)
	if r.Status != http.StatusOK {
		t.Fatalf("the entry: %d %s", r.Status, r.Body)
	}
	var e drawEntryAnswer
	r.JSON(t, &e)
	return e
}

type drawPublicAnswer struct {
	State         string  `json:"state"`
	Seed          *string `json:"seed"`
	WinnersSHA256 *string `json:"winners_sha256"`
}

func drawPublic(t *testing.T, s *shop, sku string) drawPublicAnswer {
	t.Helper()
	var d drawPublicAnswer
	call(t, http.MethodGet, s.api+"/products/"+sku+"/draw", nil).JSON(t, &d)
	return d
}

// drawOrderPaid waits for the won order to read paid in the API.
func drawOrderPaid(t *testing.T, s *shop, token, id string) {
	t.Helper()
	var o struct {
		Status string `json:"status"`
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r := call(t, http.MethodGet, s.api+"/orders/"+id, nil, "Authorization", "Bearer "+token)
		if r.Status == http.StatusOK {
			r.JSON(t, &o)
		}
		if o.Status == "paid" || time.Now().After(deadline) {
			break
		}
	}
	if o.Status != "paid" {
		t.Errorf("the won order %s: status %q, want paid", id, o.Status)
	}
}

// A draw with SHOP_PAYMENT_PROVIDER=stripe against stripe-mock answering
// requires_action: the product page asks for the card as the orders'
// Pay does (Enter without one says so, in the card field), and the entry
// made with pm_card_visa waits on the bank (authorizing, 202), said in
// words, with Withdraw, as the API has it.
func TestBrowserDrawStripe(t *testing.T) {
	t.Parallel()
	const sku, price = "draw-stripe", 2400
	e := liveEnv(t)
	e["SHOP_PAYMENT_PROVIDER"] = "stripe"
	e["SHOP_STRIPE_SECRET_KEY"] = "sk_test_123"
	e["SHOP_STRIPE_WEBHOOK_SECRET"] = e2eWebhookSecret
	e["SHOP_STRIPE_API_URL"] = testenv.StripeMockWith(t, map[string]map[string]any{
		"payment_intent": {"status": "requires_action", "amount": price, "capture_method": "manual"},
	})
	s := newShop(t, e)
	closes := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	s.product(t, sku, price, map[string]any{"quantity": 3, "draw": map[string]any{"closes_at": closes}})
	ctx, noScriptErrors := browser(t)
	defer noScriptErrors()
	defer stayOnOrigin(t, ctx, s.URL)()

	signUp(t, ctx, s, "draw-stripe@shop.test", "draw-password")
	do(t, ctx, "open the product", chromedp.Navigate(s.URL+"/#/p/"+sku))
	until(t, ctx, "the card field, labelled", `document.getElementById('draw-form').getClientRects().length > 0`+
		` && document.getElementById('draw-card').getClientRects().length > 0`+
		` && document.querySelector('label[for="draw-method"]').textContent.includes('Card')`)
	do(t, ctx, "enter without a card", chromedp.Click(chromedp.ID("draw-enter")))
	until(t, ctx, "the card is asked for, in its field",
		`document.getElementById('message').textContent.includes('Enter the card') && document.activeElement.id === 'draw-method'`)
	do(t, ctx, "enter with a card", chromedp.SendKeys(chromedp.ID("draw-method"), "pm_card_visa"), chromedp.Click(chromedp.ID("draw-enter")))
	until(t, ctx, "waiting on the bank, with Withdraw", `document.getElementById('draw').dataset.entry === 'authorizing'`+
		` && document.getElementById('draw-entry-words').textContent.includes('bank')`+
		` && document.getElementById('draw-withdraw').getClientRects().length > 0`)
	if e := drawEntry(t, s, sku, storefrontToken(t, ctx)); e.State != "authorizing" {
		t.Errorf("the entry in the API: %+v, want authorizing", e)
	}
	fits(t, ctx, "shopper-draw-authorizing")
}
