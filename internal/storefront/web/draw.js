// The product page's draw (docs/api.md, Draws): a round whose shoppers
// enter with their payment authorised instead of buying, and whose units
// go at the close to entrants in an order anyone can check. Loaded after
// app.js, whose helpers it shares (one scope of classic scripts).
"use strict";

// A draw's state on the product page's badge (its words and colour),
// the count's unit, and an entry's state, in a shopper's words.
const drawBadges = { upcoming: ["draw upcoming", "upcoming"], open: ["draw open", "open"], closed: ["drawing", "upcoming"],
  drawn: ["drawn", "ended"] };
const drawUnits = (state, n) => (state === "drawn" ? "left" : n === 1 ? "unit in the draw" : "units in the draw");
const entryWords = { authorizing: "confirming", entered: "entered", won: "won", lost: "not drawn",
  withdrawn: "withdrawn", failed: "payment failed" };
const liveEntry = (e) => !!e && (e.state === "entered" || e.state === "authorizing");
// setText changes an element's text only when it differs: a live region
// announces every change, and the panel is drawn again each read.
const setText = (id, t) => { if ($(id).textContent !== t) $(id).textContent = t; };
const plural = (n, one, many = one + "s") => n + " " + (n === 1 ? one : many);

// entrySentence says what an entry's state means for its shopper.
function entrySentence(e) {
  switch (e.state) {
    case "authorizing": return "Your bank needs to confirm the authorisation; waiting for it…";
    case "entered": return "You are in the draw for " + plural(e.quantity, "unit") +
      ". Your card is authorised, not charged; the result comes at the close.";
    case "won": return "You won! Your order " + (e.order_id ? orderNumber(e.order_id) + " " : "") + "is paid.";
    case "lost": return "Not this time: your authorisation was released and nothing was charged.";
    case "withdrawn": return "You withdrew; your authorisation was released.";
    case "failed": return "Your card could not be charged, so the units went on to the next entrant.";
    default: return "";
  }
}

// How often the page reads the draw again: every few seconds while
// entries are open or an entry waits on the bank, sooner while it is
// being drawn; a read is also due at closes_at itself.
const drawPollMs = { open: 5000, upcoming: 5000, closed: 2000, authorizing: 3000 };

// drawPanel runs sku's draw on the product page: whether the round is a
// draw (the stock event's draw; GET .../draw once per round that is one), the shopper's entry, enter
// and withdraw, the countdown to the close, and once drawn the result
// with the fairness data.
function drawPanel(sku) {
  const path = "/products/" + encodeURIComponent(sku) + "/draw";
  let stopped = false, round = null, asked = false, draw = null, entry = null, limit = 1, timer = null, intent = null, busy = false;
  const el = $("draw");
  el.hidden = true;
  el.removeAttribute("data-state");
  $("draw-card").hidden = !takesCards();

  const render = () => {
    el.hidden = !draw;
    if (!draw) return;
    el.dataset.state = draw.state;
    const open = draw.state === "open";
    $("draw-form").hidden = !open || liveEntry(entry);
    $("draw-quantity").max = String(limit);
    $("draw-quantity-hint").textContent = limit > 1 ? "Up to " + limit + " units." : "One unit per shopper.";
    $("draw-enter").disabled = busy;
    renderEntry(open);
    renderResult();
    tick();
  };

  const renderEntry = (open) => {
    $("draw-entry").hidden = !entry;
    if (!entry) { el.removeAttribute("data-entry"); return; }
    el.dataset.entry = entry.state;
    setText("draw-entry-state", entryWords[entry.state] || entry.state);
    $("draw-entry-state").className = "badge " + entry.state;
    setText("draw-entry-words", entrySentence(entry));
    const won = entry.state === "won" && !!entry.order_id;
    $("draw-order").hidden = !won;
    if (won) $("draw-order").dataset.orderId = entry.order_id;
    $("draw-withdraw").hidden = !open || !liveEntry(entry);
    $("draw-withdraw").disabled = busy;
  };

  const renderResult = () => {
    const drawn = draw.state === "drawn";
    $("draw-result").hidden = !drawn;
    if (!drawn) return;
    setText("draw-result-words", "The draw took place: " + plural(draw.units, "unit") + " among " +
      plural(draw.entries, "entry", "entries") + ".");
    for (const key of ["seed", "seed_sha256", "winners_sha256"]) {
      const dd = $("draw-fairness").querySelector(`dd[data-key="${key}"]`);
      if (dd.textContent !== (draw[key] || "")) dd.textContent = draw[key] || "";
    }
  };

  // tick moves the countdown on (the product page calls it each second).
  const tick = () => {
    const cd = $("draw-countdown");
    if (!draw) return;
    const left = Date.parse(draw.closes_at) - Date.now();
    cd.hidden = draw.state === "drawn";
    if (draw.state === "closed" || (draw.state === "open" && left <= 0)) cd.textContent = "Drawing now…";
    else cd.textContent = "Entries close in " + inWords(left) + " (" + when(draw.closes_at) + ").";
  };

  // read fetches the draw and, for a logged-in shopper, the entry (404:
  // none yet), then plans the next read.
  const read = async () => {
    clearTimeout(timer);
    try {
      draw = await api("GET", path);
      if (session.access) entry = await mine();
    } catch (err) {
      if (stopped) return;
      if (err instanceof Problem && err.status === 404) draw = null; // not a draw (any more)
      else fail(err);
    }
    if (stopped) return;
    render();
    if (productRender) productRender();
    plan();
  };

  const mine = async () => {
    try { return await api("GET", path + "/entries/me", undefined, { auth: true }); } catch (err) {
      if (err instanceof Problem && err.status === 404) return null;
      throw err;
    }
  };

  // plan schedules the next read: polled while anything can still change,
  // and once at closes_at; nothing once drawn with a final entry.
  const plan = () => {
    if (!draw || stopped) return;
    const wait = entry && entry.state === "authorizing" ? drawPollMs.authorizing : drawPollMs[draw.state];
    if (!wait) return; // drawn: the result stays
    const toClose = Date.parse(draw.closes_at) - Date.now();
    timer = setTimeout(read, toClose > 0 && toClose < wait ? toClose + 250 : wait);
  };

  // seen is told every stock state: a new round's draw is read when the
  // state says the round is one (draw absent: a server older than the
  // flag, which is asked); a round without a sale is none.
  const seen = (st) => {
    const id = st.round_id == null ? null : st.round_id;
    limit = Math.max(1, st.per_user_limit || 1);
    if (id !== round) {
      round = id;
      asked = false;
      draw = null;
      entry = null;
      clearTimeout(timer);
      render();
    }
    // Once per round, as soon as a state says it is a draw (or an older
    // server's says nothing).
    if (asked || id === null || st.sale === "none" || st.draw === false) return;
    asked = true;
    read();
  };

  const enter = async (ev) => {
    ev.preventDefault();
    if (!needLogin()) return;
    const quantity = Number($("draw-quantity").value);
    if (!Number.isInteger(quantity) || quantity < 1 || quantity > limit) {
      say("Enter a quantity from 1 to " + limit + ".", true);
      $("draw-quantity").focus();
      return;
    }
    const token = paymentToken($("draw-method"));
    if (!token) return;
    // One Idempotency-Key per entry asked for until answered: a second
    // click cannot authorise twice.
    if (!intent || intent.quantity !== quantity || intent.token !== token) intent = { quantity, token, key: newKey() };
    await act(async () => {
      entry = await api("POST", path + "/entries", { quantity, payment_token: token }, { auth: true, idempotencyKey: intent.key });
      intent = null;
      say(entry.state === "authorizing" ? entrySentence(entry) : "You are in the draw. Good luck!");
    }, () => { intent = null; });
    // The form is gone with the entry: the focus goes to what replaced it.
    if (!$("draw-withdraw").hidden) $("draw-withdraw").focus();
  };

  const withdraw = async () => {
    await act(async () => {
      entry = await api("DELETE", path + "/entries/me", undefined, { auth: true });
      say("Entry withdrawn; your authorisation was released. You may enter again while the draw is open.");
    });
    if (!$("draw-form").hidden) $("draw-quantity").focus(); // Withdraw is gone, the form is back
  };

  // act runs one request with the buttons off, tells the shopper a
  // problem's detail (answered: answered is called), and reads the draw
  // again after.
  const act = async (request, answered = () => {}) => {
    busy = true;
    render();
    try {
      await request();
    } catch (err) {
      if (err instanceof Problem) answered();
      if (!paymentRefused(err, $("draw-method"), "")) fail(err);
    } finally {
      busy = false;
    }
    if (!stopped) await read();
  };

  $("draw-form").onsubmit = enter;
  $("draw-withdraw").onclick = withdraw;

  return {
    seen,
    tick,
    // state is the draw's state, or null while the round is not known
    // to be a draw.
    state: () => (draw ? draw.state : null),
    stop() { stopped = true; clearTimeout(timer); },
  };
}
