// The shop's storefront: plain JavaScript over the public API (/api/v1),
// no framework, no build step, on the client the pages share
// (/shared/client.js). Views are switched by the URL hash. Nothing is ever
// inserted as HTML: every value goes in through textContent.
"use strict";

// ---- session ------------------------------------------------------------
// Tokens live in localStorage so a reload keeps the shopper logged in.
const { session, api } = shopClient({
  storage: localStorage,
  prefix: "shop.",
  fieldsInMessage: true,
  signedOut: () => renderNav(),
  words: {
    out_of_stock: "Sorry, not enough stock left.",
    limit_exceeded: "You have reached the purchase limit for this product.",
    sale_not_active: "This sale is not open right now.",
    cart_empty: "Your cart is empty.",
    rate_limited: "Too many requests; please wait a moment and try again.",
    invalid_credentials: "Wrong email or password.",
    email_taken: "An account with this email already exists. Log in instead?",
    unavailable: "The shop is briefly unavailable; please try again in a moment.",
    order_not_payable: "This order can no longer be paid (it expired or was cancelled).",
    order_not_cancellable: "This order can no longer be cancelled.",
    order_pending: "This order is still being recorded; try again in a moment.",
    payment_declined: "The payment was declined.",
    idempotency_key_reused: "This request was already used for something else; please try again.",
    pass_required: "This sale has a waiting room: join the queue, and buy once you are admitted.",
    challenge_failed: "The waiting room's check did not go through; please join again.",
    already_entered: "You already hold an entry in this draw.",
    draw_closed: "The draw is closed: entries can no longer change.",
  },
});

// Waiting-room passes, per SKU, for this tab only (sessionStorage): a
// purchase of a roomed SKU, and a checkout of a cart holding it, send
// them in X-Queue-Pass. They belong to the shopper who got them, so they
// go at log-in and log-out.
const passes = {
  all() {
    try { return JSON.parse(sessionStorage.getItem("shop.passes") || "{}") || {}; } catch { return {}; }
  },
  save(all) { sessionStorage.setItem("shop.passes", JSON.stringify(all)); },
  put(sku, pass, expiresAt) { const all = this.all(); all[sku] = { pass, expires_at: expiresAt }; this.save(all); },
  drop(sku) { const all = this.all(); delete all[sku]; this.save(all); },
  clear() { sessionStorage.removeItem("shop.passes"); },
  // get answers sku's pass while it is good, else "".
  get(sku) {
    const p = this.all()[sku];
    if (!p || !p.pass) return "";
    if (p.expires_at && Date.parse(p.expires_at) <= Date.now()) { this.drop(sku); return ""; }
    return p.pass;
  },
  // header answers the X-Queue-Pass header for skus ({} when none).
  header(skus) {
    const list = [...new Set(skus)].map((sku) => this.get(sku)).filter(Boolean);
    return list.length ? { "X-Queue-Pass": list.join(",") } : {};
  },
};

// The rounds whose waiting room the shopper joined, per SKU (round_id),
// so that the page asks for a ticket only where there is one: the
// queue's GET answers 404 to a shopper who never joined. Kept across
// tabs; they go at log-in and log-out with the passes.
const joined = {
  all() {
    try { return JSON.parse(localStorage.getItem("shop.joined") || "{}") || {}; } catch { return {}; }
  },
  put(sku, round) { const all = this.all(); all[sku] = round; localStorage.setItem("shop.joined", JSON.stringify(all)); },
  drop(sku) { const all = this.all(); delete all[sku]; localStorage.setItem("shop.joined", JSON.stringify(all)); },
  has(sku, round) { return round != null && this.all()[sku] === round; },
  clear() { localStorage.removeItem("shop.joined"); },
};

// ---- formatting ---------------------------------------------------------
const money = (cents) => (cents / 100).toLocaleString(undefined, { style: "currency", currency: "USD" });
// inWords says a stretch of time as people do: "about 10 seconds",
// "about 3 minutes", "about an hour".
function inWords(ms) {
  const about = (n, unit) => "about " + (n === 1 ? (unit === "hour" ? "an " : "a ") + unit : n + " " + unit + "s");
  const s = Math.max(1, Math.round(ms / 1000));
  if (s < 60) return about(s, "second");
  const m = Math.round(s / 60);
  if (m < 60) return about(m, "minute");
  const h = Math.round(s / 3600);
  if (h < 48) return about(h, "hour");
  return about(Math.round(s / 86400), "day");
}
const saleWords = { none: "not on sale", upcoming: "upcoming", open: "on sale now", sold_out: "sold out", ended: "sale ended" };
// A sale that sells nothing now or later: no count, no buy form.
const closedSale = (sale) => sale === "none" || sale === "ended" || sale === "sold_out";
const categoryWords = (c) => { const w = c.replace(/[-_.]+/g, " "); return w.charAt(0).toUpperCase() + w.slice(1); };
const validCategory = (c) => /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(c);
const when = (iso) => new Date(iso).toLocaleString(undefined,
  { weekday: "short", month: "short", day: "numeric", hour: "numeric", minute: "2-digit" });

// saleNow is a stock state's sale as of now: the server's word, moved on
// by the clock at the window's edges (its own event is on its way).
function saleNow(st) {
  if (!st) return null;
  const now = Date.now();
  const starts = st.starts_at ? Date.parse(st.starts_at) : 0, ends = st.ends_at ? Date.parse(st.ends_at) : 0;
  if (st.sale === "none" || st.sale === "ended") return st.sale;
  if (ends && now >= ends) return "ended";
  if (st.sale === "upcoming" && starts && now >= starts) return st.available > 0 ? "open" : "sold_out";
  return st.sale;
}

// limitSentence states the round's per-shopper limit (the stock event's
// per_user_limit; 0 or absent: none).
function limitSentence(st) {
  const n = st.per_user_limit;
  if (!n) return "";
  return " Limit " + n + (n === 1 ? " unit" : " units") + " per shopper.";
}

// saleSentence adds to the sale's badge what it does not say: the
// window and the limit ("" when there is nothing to add).
function saleSentence(sale, st) {
  switch (sale) {
    case "upcoming":
      return "Sale starts " + when(st.starts_at) + (st.ends_at ? " and ends " + when(st.ends_at) : "") + "." + limitSentence(st);
    case "open": return ((st.ends_at ? "Ends " + when(st.ends_at) + "." : "") + limitSentence(st)).trim();
    case "sold_out": return "Units come back if orders are cancelled" + (st.ends_at ? " before " + when(st.ends_at) : "") + ".";
    case "ended": return st.ends_at ? "It ran until " + when(st.ends_at) + "." : "";
    default: return "";
  }
}

// Why Buy cannot succeed now ("" when it can); closed sales hide the
// form instead, their badge says why.
const buyReasons = { upcoming: "Buying opens when the sale starts." };
const newKey = () => (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random().toString(16).slice(2));

// ---- views --------------------------------------------------------------
let leave = () => {}; // stops the current view's timers and streams
const views = ["catalog", "product", "notfound", "cart", "orders", "login", "register"];
const titles = { catalog: "Flash sales", notfound: "Product not found", cart: "Your cart", orders: "Your orders",
  login: "Log in", register: "Sign up" };

function show(name, title) {
  for (const v of views) $("view-" + v).hidden = v !== name;
  document.title = (title || titles[name] || "Flash sales") + " · shop";
}

async function route() {
  leave();
  leave = () => {};
  const [, view, arg] = location.hash.split("/");
  $("message").hidden = true;
  switch (view) {
    case "p": return showProduct(decodeURIComponent(arg || ""));
    case "c": return showCatalog(decodeURIComponent(arg || ""));
    case "cart": return needLogin() && showCart();
    case "orders": return needLogin() && showOrders();
    case "login": show("login"); return focusFirst("login-email");
    case "register": show("register"); return focusFirst("register-name");
    default: return showCatalog();
  }
}

function focusFirst(id) { $(id).focus(); }

function needLogin() {
  if (session.access) return true;
  location.hash = "#/login";
  say("Please log in first.");
  return false;
}

function renderNav() {
  const inside = !!session.access;
  $("nav-user").hidden = !inside;
  $("nav-user").textContent = session.name || session.email;
  $("nav-logout").hidden = !inside;
  $("nav-login").hidden = inside;
  $("nav-register").hidden = inside;
}

// Catalog: the listing (of one category, or all), its availability
// polled (one stream per product would take the browser's few
// connections per server).
async function showCatalog(category = "") {
  show("catalog", category ? categoryWords(category) : "");
  const invalid = !!category && !validCategory(category); // no product has it: nothing to ask
  let stopped = false, timer = null, cursor = null;
  const cards = new Map();
  const states = saleStates();
  const query = "/products?limit=50" + (category ? "&category=" + encodeURIComponent(category) : "");
  const load = async (more) => {
    const page = invalid ? { items: [], next_cursor: null }
      : await api("GET", query + (more && cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
    if (!more) { $("catalog").textContent = ""; cards.clear(); }
    for (const p of page.items) { const c = card(p, states); cards.set(p.sku, c); states.want(p.sku, c.state); }
    if (!category) learnCategories(page.items);
    cursor = page.next_cursor;
    $("catalog-more").hidden = !cursor;
    $("catalog-empty").hidden = cards.size > 0;
  };
  const poll = async () => {
    try {
      const page = await api("GET", query);
      for (const p of page.items) { const c = cards.get(p.sku); if (c) c.update(p); }
      for (const c of cards.values()) c.tick();
    } catch { /* the next poll tries again */ }
    if (!stopped) timer = setTimeout(poll, 3000);
  };
  $("catalog-more").onclick = () => load(true).catch(fail);
  leave = () => { stopped = true; clearTimeout(timer); states.stop(); };
  renderCategories(category);
  try { await load(false); } catch (err) { fail(err); }
  if (category && !categories.size) await listCategories();
  renderCategories(category);
  if (!stopped && !invalid) timer = setTimeout(poll, 3000);
}

// The categories of the catalog's filter, from the unfiltered listing:
// the API has no list of them.
const categories = new Set();
function learnCategories(items) { for (const p of items) if (p.category) categories.add(p.category); }
async function listCategories() {
  try { learnCategories((await api("GET", "/products?limit=100")).items); } catch { /* the filter waits for the next visit */ }
}

// renderCategories draws the filter: All, then each category, the
// shown one marked as the current page.
function renderCategories(active) {
  const nav = $("categories");
  nav.textContent = "";
  const link = (label, href, current) => {
    const a = document.createElement("a");
    a.href = href;
    a.textContent = label;
    if (current) a.setAttribute("aria-current", "page");
    nav.append(a);
  };
  link("All", "#/", !active);
  for (const c of [...categories].sort()) link(categoryWords(c), "#/c/" + encodeURIComponent(c), c === active);
  nav.hidden = categories.size < 2 && !active;
}

// cardDetail is what a card says beside its sale's badge, without
// saying the badge again.
function cardDetail(sale, st, available) {
  switch (sale) {
    case "upcoming": return "Starts " + when(st.starts_at);
    case "open": return available + " " + (st.draw ? drawUnits("open", available) : "available") + (st.ends_at ? " · ends " + when(st.ends_at) : "");
    case "ended": return st.ends_at ? when(st.ends_at) : "";
    default: return ""; // not on sale, sold out: the badge says it all
  }
}

// showImage puts a product's picture in img (alt: its name), or leaves
// the placeholder when it has none or it fails to load.
function showImage(img, p) {
  img.onerror = () => { img.hidden = true; };
  img.hidden = !p.image_url;
  img.alt = p.name;
  if (p.image_url && img.getAttribute("src") !== p.image_url) img.src = p.image_url;
}

// card draws a catalog card: the sale's state (from the product's first
// stock event, read once) with the listing's availability, polled.
function card(p, states) {
  const li = $("product-card").content.firstElementChild.cloneNode(true);
  const link = li.querySelector(".card-link");
  link.href = "#/p/" + encodeURIComponent(p.sku);
  li.querySelector(".card-name").textContent = p.name;
  li.querySelector(".card-price").textContent = money(p.price_cents);
  li.dataset.sku = p.sku;
  showImage(li.querySelector(".card-image"), p);
  const badge = li.querySelector(".card-sale"), avail = li.querySelector(".card-available");
  let st = null, available = p.available;
  const draw = () => {
    if (!st) { li.classList.add("loading"); return; }
    li.classList.remove("loading");
    let sale = saleNow({ ...st, available });
    if (sale === "open" && available <= 0) sale = "sold_out";
    if (sale === "sold_out" && available > 0) sale = "open";
    li.dataset.sale = sale;
    badge.textContent = saleWords[sale] || sale;
    badge.className = "badge card-sale " + sale;
    avail.textContent = cardDetail(sale, st, available);
    li.querySelector(".card-queue").hidden = !(st.waiting_room && sale !== "none" && sale !== "ended");
    li.querySelector(".card-draw").hidden = !(st.draw && sale !== "none");
  };
  const update = (q) => {
    const before = available;
    available = q.available;
    showImage(li.querySelector(".card-image"), q);
    // Stock where there was no sale, or more than the round had: a new
    // round, perhaps; read its state again.
    if (st && ((st.sale === "none" && available > 0) || available > before && saleNow(st) !== "open")) states.want(p.sku, state);
    draw();
  };
  const state = (s) => { st = s; available = s.sale === "none" ? available : s.available; draw(); };
  draw();
  $("catalog").append(li);
  return { update, state, tick: draw };
}

// saleStates reads products' sale states for the catalog: the first event
// of each one's stock stream, then the stream is closed (a stream per card
// left open would take the browser's few connections to the server). A
// few at a time.
function saleStates() {
  const queue = [], ctl = new AbortController();
  let running = 0;
  const next = () => {
    while (running < 4 && queue.length) {
      const [sku, done] = queue.shift();
      running++;
      firstStock(sku, ctl.signal).then((s) => { if (s) done(s); }, () => {})
        .finally(() => { running--; next(); });
    }
  };
  return {
    want(sku, done) { queue.push([sku, done]); next(); },
    stop() { queue.length = 0; ctl.abort(); },
  };
}

async function firstStock(sku, signal) {
  const r = await fetch(API + "/products/" + encodeURIComponent(sku) + "/events",
    { signal, headers: { Accept: "text/event-stream" } });
  if (!r.ok || !r.body) return null;
  const reader = r.body.getReader(), dec = new TextDecoder();
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return null;
      buf += dec.decode(value, { stream: true });
      const m = buf.match(/event: ?stock\r?\ndata: ?(.*)\r?\n/);
      if (m) return JSON.parse(m[1]);
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

// Product page: live stock over Server-Sent Events, the countdown to the
// sale's start, buy now and add to cart. An unknown SKU shows the
// not-found page.
async function showProduct(sku) {
  show("product");
  resetProduct();
  let state = null, tick = null, events = null, opens = null, gone = false;
  const room = waitingRoom(sku);
  const draw = drawPanel(sku);
  currentRoom = room;
  leave = () => {
    gone = true;
    if (events) events.close();
    clearInterval(tick);
    clearTimeout(opens);
    room.stop();
    draw.stop();
    productRender = null;
  };
  disableBuy("Checking availability…");
  const found = await loadProduct(sku);
  if (gone || !found) return;
  const render = () => {
    if (!state) return;
    renderSale(sku, state, draw.state());
    room.tick();
    draw.tick();
  };
  productRender = render;
  events = new EventSource(API + "/products/" + encodeURIComponent(sku) + "/events");
  events.addEventListener("stock", (ev) => {
    const was = state;
    state = JSON.parse(ev.data);
    // Units back (a cancellation) or a new round: the limit may allow
    // another purchase, so the server is asked again.
    if (was && (state.available > was.available || roundKey(sku, was) !== roundKey(sku, state))) limitHit = null;
    currentRound = roundKey(sku, state);
    // Buy turns on at the exact second the sale opens, not a tick later.
    clearTimeout(opens);
    const wait = state.sale === "upcoming" && state.starts_at ? Date.parse(state.starts_at) - Date.now() : -1;
    if (wait >= 0 && wait < 2147483647) opens = setTimeout(render, wait);
    $("live-status").textContent = "";
    room.seen(state);
    draw.seen(state);
    render();
  });
  events.onerror = () => {
    $("live-status").textContent = events.readyState === EventSource.CLOSED
      ? "Stock numbers stopped updating; reload the page to see the latest." : "Reconnecting…";
  };
  tick = setInterval(render, 1000);
  buyIntent = null;
}

// resetProduct empties the product page and shows its skeleton.
function resetProduct() {
  ["product-name", "product-description", "product-price", "live-sale", "live-status", "live-available", "sale-info"]
    .forEach((id) => { $(id).textContent = ""; });
  $("product-image").hidden = true;
  $("product-image").removeAttribute("src");
  $("live").classList.add("loading"); // a skeleton until the first event
  $("live").setAttribute("aria-busy", "true");
  $("view-product").classList.add("loading");
  $("countdown").hidden = true;
  $("buy-area").hidden = false;
}

// loadProduct reads the product and fills in the page; false when it is
// not there (the not-found page is shown, unless the shopper moved on)
// or could not be read.
async function loadProduct(sku) {
  let p;
  try {
    p = await api("GET", "/products/" + encodeURIComponent(sku));
  } catch (err) {
    if (!isProductPage(sku)) return false;
    if (err instanceof Problem && err.status === 404) showNotFound(); else fail(err);
    return false;
  }
  $("product-name").textContent = p.name;
  $("product-description").textContent = p.description || "";
  $("product-price").textContent = money(p.price_cents);
  showImage($("product-image"), p);
  document.title = p.name + " · shop";
  $("view-product").classList.remove("loading");
  return true;
}

const isProductPage = (sku) => location.hash.split("/")[1] === "p" &&
  decodeURIComponent(location.hash.split("/")[2] || "") === sku;

function showNotFound() {
  leave();
  leave = () => {};
  show("notfound");
}

// renderSale shows a stock state on the product page: the badge, the
// count and the sentence, and Buy on or off (with the reason) or hidden
// for a sale that sells nothing or a draw (drawState: its state; null
// for a round that is not one), whose units are entered for, not bought.
function renderSale(sku, state, drawState) {
  const sale = saleNow(state);
  const starts = state.starts_at ? Date.parse(state.starts_at) : 0;
  $("live").classList.remove("loading");
  $("live").removeAttribute("aria-busy");
  $("live").dataset.sale = sale;
  $("live-available").textContent = String(state.available);
  $("live-count").hidden = sale === "none" || sale === "ended";
  const badge = drawState ? drawBadges[drawState] : [saleWords[sale] || sale, sale];
  $("live-sale").textContent = badge[0];
  $("live-sale").className = "badge " + badge[1];
  $("sale-info").textContent = saleSentence(sale, state);
  const cd = $("countdown");
  cd.hidden = sale !== "upcoming";
  if (sale === "upcoming") cd.textContent = "Starts in " + inWords(starts - Date.now());
  $("live-unit").textContent = drawState ? drawUnits(drawState, state.available) : "available";
  $("buy-area").hidden = closedSale(sale) || !!drawState;
  const limited = limitHit === roundKey(sku, state);
  const reason = buyReasons[sale] || (limited ? "You have reached the purchase limit for this sale." : "");
  if (reason) disableBuy(reason, sale !== "upcoming" && sale !== "open");
  else if (!buying) enableBuy();
}

// waitingRoom runs the product page's waiting room for sku: whether the
// round has one (the stock event's waiting_room), the shopper's ticket
// live from its event stream, and the join with its proof of work. The
// buy form shows only without a room or once admitted. The ticket is
// asked for only once the shopper joined this round's room: the page
// makes no request it knows is answered 404.
const ticketWords = { waiting: "waiting", admitted: "admitted", expired: "pass expired", sold_out: "sold out" };
function waitingRoom(sku) {
  const path = "/products/" + encodeURIComponent(sku) + "/queue";
  let stopped = false, roomed = false, round = null, ticket = null, stream = null, worker = null;
  const el = $("queue");
  el.hidden = true;
  el.removeAttribute("data-solve-ms");
  el.removeAttribute("data-solve-tries");
  el.removeAttribute("data-room"); // until the first stock event
  el.removeAttribute("data-state");
  $("queue-ticket").hidden = true;
  $("queue-work").hidden = true;
  $("queue-join").hidden = false;
  $("queue-join").disabled = false;
  $("buy-form").hidden = false;

  const render = () => {
    el.hidden = !roomed;
    el.dataset.room = roomed ? "yes" : "no";
    const admitted = !!(ticket && ticket.state === "admitted" && passes.get(sku));
    $("buy-form").hidden = roomed && !admitted;
    $("queue-join").hidden = !roomed || !!ticket;
    $("queue-ticket").hidden = !ticket;
    $("queue-intro").hidden = !!ticket;
    if (ticket) renderTicket(ticket);
  };

  const show = (t) => {
    if (stopped) return;
    ticket = t;
    el.dataset.state = t.state;
    if (t.state === "admitted" && t.pass) passes.put(sku, t.pass, t.pass_expires_at);
    else if (t.state === "expired") passes.drop(sku);
    render();
  };

  const forget = () => {
    ticket = null;
    el.removeAttribute("data-state");
    if (stream) { stream.close(); stream = null; }
  };

  const follow = (t) => {
    if (stream || stopped || !t.events_url) return;
    stream = new EventSource(t.events_url);
    stream.addEventListener("queue", (ev) => show(JSON.parse(ev.data)));
    stream.onerror = () => {
      if (stream && stream.readyState === EventSource.CLOSED) {
        stream = null; // the room is over or the round changed: look again
        if (!stopped) setTimeout(() => { if (roomed && !stream) readTicket().catch(fail); }, 2000);
      }
    };
  };

  // readTicket fetches the shopper's ticket, if the shopper joined this
  // round's room.
  const readTicket = async () => {
    if (!session.access || !joined.has(sku, round)) return;
    try {
      const t = await api("GET", path, undefined, { auth: true });
      show(t);
      follow(t);
    } catch (err) {
      if (!(err instanceof Problem && err.status === 404)) throw err;
      joined.drop(sku); // not in this room after all
      forget();
      render();
    }
  };

  // seen is told every stock state: a new round, or a sale that ended,
  // drops the ticket; a round with a room the shopper joined reads it.
  const seen = (st) => {
    const id = st.round_id == null ? null : st.round_id;
    const now = !!st.waiting_room && st.sale !== "none" && st.sale !== "ended";
    if (id !== round || !now) forget();
    round = id;
    roomed = now;
    render();
    if (roomed && !ticket) readTicket().catch(fail);
  };

  // solve finds the challenge's nonce in workers, one a core (each draws
  // its own nonces; Web Crypto's digests are asynchronous and each worker
  // spends most of its time waiting on them), timed; the first answer wins.
  const solve = (challenge, bits) => new Promise((resolve, reject) => {
    const n = Math.max(1, Math.min(navigator.hardwareConcurrency || 2, 8));
    const started = performance.now();
    const all = [];
    const stop = () => { for (const w of all) w.terminate(); worker = null; };
    for (let i = 0; i < n; i++) {
      const w = new Worker("/assets/pow.js");
      all.push(w);
      w.onmessage = (ev) => {
        if (!worker) return; // answered already
        const ms = performance.now() - started;
        stop();
        if (ev.data.error) { reject(new Error(ev.data.error)); return; }
        el.dataset.solveMs = ms.toFixed(1);
        el.dataset.solveTries = String(ev.data.tries * n); // about: every worker tried as many
        el.dataset.solveWorkers = String(n);
        resolve(ev.data.nonce);
      };
      w.onerror = (ev) => { if (worker) { stop(); reject(new Error(ev.message || "the check failed")); } };
    }
    worker = { terminate: stop };
    for (const w of all) w.postMessage({ challenge, bits });
  });

  const join = async () => {
    if (!needLogin()) return;
    const button = $("queue-join"), work = $("queue-work");
    button.disabled = true;
    try {
      const ch = await api("GET", path + "/challenge", undefined, { auth: true });
      let body = {};
      if (ch.bits > 0) {
        work.hidden = false;
        work.textContent = "Checking your browser (a short puzzle keeps bots out of the line)…";
        body = { challenge: ch.challenge, nonce: await solve(ch.challenge, ch.bits) };
      }
      if (stopped) return;
      const t = await api("POST", path, body, { auth: true });
      joined.put(sku, round);
      work.hidden = true;
      show(t);
      follow(t);
      say("You are in the queue.");
    } catch (err) {
      if (stopped) return;
      work.hidden = true;
      if (err instanceof Problem && err.status === 404 && !ticket) {
        // The room was an earlier round's: this one sells without.
        roomed = false;
        render();
        say("This sale has no waiting room now: buy directly.");
        return;
      }
      if (err instanceof Problem) fail(err);
      else say("The waiting room's check could not run: " + err.message, true);
    } finally {
      button.disabled = false;
    }
  };
  $("queue-join").onclick = join;

  return {
    seen,
    tick() { if (ticket && ticket.state === "admitted") render(); },
    // lost is told of a 403 pass_required: the pass is gone, read the
    // ticket again.
    lost() { passes.drop(sku); if (ticket) show({ ...ticket, state: "expired", pass: null }); readTicket().catch(fail); },
    stop() {
      stopped = true;
      if (stream) stream.close();
      if (worker) worker.terminate();
    },
  };
}

// renderTicket shows a waiting-room ticket: its state, the place in
// line and the wait in words.
function renderTicket(ticket) {
  $("queue-state").textContent = ticketWords[ticket.state] || ticket.state;
  $("queue-state").className = "badge " + ticket.state;
  const place = $("queue-place"), eta = $("queue-eta");
  place.removeAttribute("data-position");
  eta.textContent = "";
  switch (ticket.state) {
    case "waiting":
      if (ticket.position == null) {
        place.textContent = "Your place in line is drawn when the sale starts.";
      } else {
        place.dataset.position = String(ticket.position);
        place.textContent = "Number " + ticket.position + " in line";
      }
      if (ticket.eta_seconds != null) eta.textContent = "Estimated wait: " + inWords(ticket.eta_seconds * 1000) + ". Keep this page open.";
      break;
    case "admitted":
      place.textContent = "You are in: buy now.";
      if (ticket.pass_expires_at) eta.textContent = "Your pass is good for " + inWords(Date.parse(ticket.pass_expires_at) - Date.now()) + ".";
      break;
    case "expired":
      place.textContent = "Your pass ran out.";
      break;
    case "sold_out":
      place.textContent = "Sold out for now; admission resumes if units come back.";
      break;
  }
}

// Buy is disabled, with the reason shown, when it cannot succeed: before
// the first stock event, outside the sale's window, sold out, or once the
// server said the shopper reached the round's per-shopper limit (stated
// beforehand from the stock event's per_user_limit). Add to cart stays on
// while a sale is upcoming or open: a cart reserves nothing.
let productRender = null; // the product page's render, while shown
let limitHit = null; // the round (roundKey) whose limit the shopper reached
let currentRound = null; // the product page's round (roundKey)
let buying = false;
const roundKey = (sku, st) => sku + "|" + (st.round_id || "") + "|" + (st.starts_at || "") + "|" + (st.ends_at || "");
function disableBuy(reason, noCart = true) {
  $("buy-now").disabled = true;
  $("add-to-cart").disabled = noCart;
  $("buy-reason").textContent = reason;
  $("buy-reason").hidden = false;
}
function enableBuy() {
  $("buy-now").disabled = $("add-to-cart").disabled = false;
  $("buy-reason").hidden = true;
  $("buy-reason").textContent = "";
}

// A buy intent keeps its Idempotency-Key until it is answered: a retry or
// a second click of the same intent cannot buy twice, and the button stays
// disabled while the request is out.
let buyIntent = null;
let currentRoom = null; // the product page's waiting room
async function buyNow(ev) {
  ev.preventDefault();
  if (!needLogin()) return;
  const sku = decodeURIComponent(location.hash.split("/")[2] || "");
  const quantity = Number($("buy-quantity").value);
  if (!Number.isInteger(quantity) || quantity < 1) { say("Enter a quantity of at least 1.", true); return; }
  if (!buyIntent || buyIntent.sku !== sku || buyIntent.quantity !== quantity) buyIntent = { sku, quantity, key: newKey() };
  const button = $("buy-now");
  button.disabled = true;
  buying = true;
  try {
    const r = await api("POST", "/products/" + encodeURIComponent(sku) + "/purchase", { quantity },
      { auth: true, idempotencyKey: buyIntent.key, headers: passes.header([sku]) });
    buyIntent = null;
    say("Order " + orderNumber(r.order_id) + " placed. Pay for it under Orders.");
  } catch (err) {
    if (err instanceof Problem) buyIntent = null; // answered: the next click is a new intent
    if (err instanceof Problem && err.code === "pass_required" && currentRoom) currentRoom.lost();
    if (err instanceof Problem && err.code === "limit_exceeded") limitHit = currentRound;
    fail(err);
  } finally {
    buying = false;
    button.disabled = false;
    if (productRender) productRender();
  }
}

async function addToCart() {
  if (!needLogin()) return;
  const sku = decodeURIComponent(location.hash.split("/")[2] || "");
  const quantity = Number($("buy-quantity").value);
  try {
    await api("POST", "/cart/items", { sku, quantity }, { auth: true });
    say("Added to your cart.");
  } catch (err) { fail(err); }
}

// Cart and checkout.
let checkoutKey = null;
let cartSkus = []; // the SKUs of the cart as last shown
async function showCart() {
  show("cart");
  let cart;
  try { cart = await api("GET", "/cart", undefined, { auth: true }); } catch (err) { fail(err); return; }
  cartSkus = cart.items.map((it) => it.sku);
  const body = $("cart-lines");
  body.textContent = "";
  for (const it of cart.items) {
    const tr = document.createElement("tr");
    const name = document.createElement("td");
    const link = document.createElement("a");
    link.href = "#/p/" + encodeURIComponent(it.sku);
    link.textContent = it.name || it.sku;
    name.append(link);
    const qty = document.createElement("td");
    const input = document.createElement("input");
    input.type = "number"; input.min = "0"; input.value = it.quantity; input.inputMode = "numeric";
    input.setAttribute("aria-label", "Quantity of " + (it.name || it.sku));
    input.onchange = () => setLine(it.sku, Number(input.value));
    qty.append(input);
    const total = document.createElement("td");
    total.textContent = money(it.line_total_cents);
    const act = document.createElement("td");
    const rm = document.createElement("button");
    rm.type = "button"; rm.className = "danger"; rm.textContent = "Remove";
    rm.setAttribute("aria-label", "Remove " + (it.name || it.sku));
    rm.onclick = () => setLine(it.sku, 0);
    act.append(rm);
    tr.append(name, qty, total, act);
    body.append(tr);
  }
  $("cart-total").textContent = money(cart.total_cents);
  const empty = cart.items.length === 0;
  $("cart-table").hidden = empty;
  $("cart-empty").hidden = !empty;
  $("checkout").hidden = empty;
}

async function setLine(sku, quantity) {
  try {
    await api("PUT", "/cart/items/" + encodeURIComponent(sku), { quantity }, { auth: true });
    checkoutKey = null; // another cart is another checkout
  } catch (err) { fail(err); }
  showCart();
}

async function checkout() {
  const button = $("checkout");
  button.disabled = true;
  checkoutKey = checkoutKey || newKey();
  try {
    const r = await api("POST", "/cart/checkout", undefined,
      { auth: true, idempotencyKey: checkoutKey, headers: passes.header(cartSkus) });
    checkoutKey = null;
    say("Order " + orderNumber(r.order_id) + " placed. Pay for it below.");
    location.hash = "#/orders";
  } catch (err) {
    if (err instanceof Problem) checkoutKey = null;
    fail(err);
    showCart();
  } finally {
    button.disabled = false;
  }
}

// The payment provider, as the server tells the page (index.html's
// shop-payment-provider meta element): "test" pays with one click;
// "stripe" pays with the card (a PaymentMethod id, pm_…) typed in the
// orders page's field; there is no Stripe.js (the page loads nothing
// from elsewhere), so a payment the bank must confirm is waited for.
function paymentProvider() {
  const m = document.querySelector('meta[name="shop-payment-provider"]');
  return (m && m.content) || "test";
}
const takesCards = () => paymentProvider() === "stripe";

// paymentToken answers what to pay with: the test provider's token, or
// the card typed in input with Stripe; null when none was typed (the
// shopper is told, in input).
function paymentToken(input) {
  if (!takesCards()) return "tok_test"; // the test provider approves it
  const token = input.value.trim();
  if (token) return token;
  say("Enter the card to pay with first (a payment method id, pm_…).", true);
  input.focus();
  return null;
}

// paymentRefused tells the shopper that a payment the provider declined,
// or could not be asked for, took no money (after "nothing was charged",
// what still holds); false for any other error.
function paymentRefused(err, input, still) {
  if (!(err instanceof Problem)) return false;
  if (err.code === "payment_declined") {
    say(takesCards() ? "The card was declined; try another card." : "The payment was declined.", true);
    if (takesCards()) { input.focus(); input.select(); }
    return true;
  }
  if (err.status !== 503) return false;
  say("Payments are unavailable right now; nothing was charged" + still + ". Try again in a moment.", true);
  return true;
}

// A payment under way is finished by the provider's webhook: the page
// waits for it. Any other state of a payable order needs another card.
const paymentUnderWay = new Set(["requires_action", "requires_confirmation", "processing"]);
const waitingOnPayment = (o) => o.status === "confirmed" && !!o.payment &&
  (paymentUnderWay.has(o.payment.status) || o.payment.status === "succeeded");
const paymentRetry = (o) => o.status === "confirmed" && !!o.payment &&
  (o.payment.status === "requires_payment_method" || o.payment.status === "failed");

// paymentWords says an order's payment in words (kind: "waiting",
// "retry" or ""), or null when there is nothing to say beyond the
// order's status (no payment, or a plain successful one).
function paymentWords(o) {
  const p = o.payment;
  if (!p) return null;
  const refunded = p.refunded_cents > 0 ? money(p.refunded_cents) + " refunded" : "";
  if (o.status !== "confirmed" && (paymentUnderWay.has(p.status) || p.status === "requires_payment_method")) {
    return { kind: "", text: "The payment was not completed." };
  }
  switch (p.status) {
    case "requires_action":
      return { kind: "waiting", text: "Your bank needs to confirm this payment. Waiting for it…" };
    case "requires_confirmation":
      return { kind: "waiting", text: "The payment is waiting to be confirmed…" };
    case "processing":
      return { kind: "waiting", text: "Processing the payment…" };
    case "requires_payment_method":
    case "failed":
      return o.status === "confirmed"
        ? { kind: "retry", text: "The card was not accepted; try another card." }
        : { kind: "", text: "The payment did not go through." };
    case "refunded":
      return { kind: "", text: "Payment refunded: " + money(p.refunded_cents || p.amount_cents) +
        (o.status === "paid" ? "." : " (the order was " + (statusWords[o.status] || o.status).toLowerCase() + " before the payment went through).") };
    case "succeeded":
      if (refunded) return { kind: "", text: "Paid " + money(p.amount_cents) + "; " + refunded + "." };
      return o.status === "confirmed" ? { kind: "waiting", text: "Payment received; the order updates in a moment…" } : null;
  }
  return { kind: o.status === "confirmed" ? "waiting" : "", text: "Payment under way" + (refunded ? "; " + refunded : "") + "." };
}

// Orders: polled while shown, so pending turns confirmed on its own; pay
// and cancel for confirmed orders, with the countdown to expires_at. The
// list is redrawn only when an order changed, so the keyboard focus stays
// put between polls. A payment under way is followed (GET of the order,
// a bounded number of times) until it is paid or needs another card.
const followTries = 30; // about two and a half minutes: 1 s, 2 s, … then every 5 s
async function showOrders() {
  show("orders");
  let stopped = false, timer = null, tick = null, items = [], drawn = "";
  const expiries = [];
  const busy = new Set(); // orders with a pay or cancel out
  const followers = new Map(); // order id -> its follow's timer
  const followed = new Set(); // followed since the view opened
  const render = (force) => {
    const now = JSON.stringify(items);
    if (!force && now === drawn) return;
    drawn = now;
    const list = $("orders");
    const focus = document.activeElement && list.contains(document.activeElement)
      ? document.activeElement.getAttribute("aria-label") : null;
    list.textContent = "";
    expiries.length = 0;
    for (const o of items) list.append(orderItem(o, expiries, { pay, cancel, busy: busy.has(o.order_id) }));
    $("orders-empty").hidden = items.length > 0;
    $("pay-card").hidden = !takesCards() || !items.some((o) => o.status === "confirmed");
    tickExpiries(expiries);
    if (focus) {
      const again = [...list.querySelectorAll("button")].find((b) => b.getAttribute("aria-label") === focus);
      if (again && !again.disabled) again.focus();
    }
  };
  const put = (o) => {
    const i = items.findIndex((x) => x.order_id === o.order_id);
    if (i >= 0) { items[i] = o; render(); }
  };
  const load = async () => {
    let page;
    try { page = await api("GET", "/orders?limit=20", undefined, { auth: true }); } catch (err) { fail(err); return; }
    if (stopped) return;
    await nameProducts(page.items.flatMap((o) => (o.items || []).map((i) => i.sku)));
    if (stopped) return;
    items = page.items;
    render();
    for (const o of items) if (waitingOnPayment(o) && !followed.has(o.order_id)) follow(o.order_id);
  };
  // follow reads order id again and again while its payment is under way.
  const follow = (id, tries = 0) => {
    followed.add(id);
    clearTimeout(followers.get(id));
    followers.set(id, setTimeout(async () => {
      let o = null;
      try { o = await api("GET", "/orders/" + encodeURIComponent(id), undefined, { auth: true }); } catch { /* tried again */ }
      if (stopped) return;
      if (o) put(o);
      if (o && !waitingOnPayment(o)) { followers.delete(id); settled(o); return; }
      if (tries + 1 >= followTries) {
        followers.delete(id);
        say("The payment of order " + orderNumber(id) + " is still under way; this page shows it once it is done (or reload later).");
        return;
      }
      follow(id, tries + 1);
    }, Math.min(1000 * (tries + 1), 5000)));
  };
  // settled tells the shopper how a followed payment ended.
  const settled = (o) => {
    if (o.status === "paid") { say("Order paid. Thank you!"); return; }
    const w = paymentWords(o);
    if (w && (w.kind === "retry" || o.payment.status === "refunded")) say(w.text, w.kind === "retry");
  };
  const pay = async (o) => {
    const token = paymentToken($("pay-method"));
    if (!token) { render(true); return; } // the clicked button back on
    // One Idempotency-Key per order and card until answered.
    const key = o.order_id + " " + token;
    if (!payKeys.has(key)) payKeys.set(key, newKey());
    busy.add(o.order_id);
    render(true);
    try {
      const r = await api("POST", "/orders/" + encodeURIComponent(o.order_id) + "/pay", { payment_token: token },
        { auth: true, idempotencyKey: payKeys.get(key) });
      payKeys.delete(key);
      if (r && r.order_id) put(r);
      if (!r || r.status === "paid") {
        say("Order paid. Thank you!");
      } else {
        // 202: the order is still confirmed; its payment says why.
        const w = paymentWords(r) || { kind: "waiting", text: "The payment is under way…" };
        say(w.text, w.kind === "retry");
        if (waitingOnPayment(r)) follow(r.order_id);
        if (w.kind === "retry") { $("pay-method").focus(); $("pay-method").select(); }
      }
    } catch (err) {
      if (err instanceof Problem) payKeys.delete(key);
      if (unsupported(err)) {
        say("Payment and cancellation are not available on this server yet (or the order is gone).", true);
      } else if (!paymentRefused(err, $("pay-method"), " and the order can still be paid")) {
        fail(err);
      }
    } finally {
      busy.delete(o.order_id);
      await load();
      render(true);
    }
  };
  const cancel = async (o) => {
    busy.add(o.order_id);
    render(true);
    try {
      const r = await api("POST", "/orders/" + encodeURIComponent(o.order_id) + "/cancel", undefined, { auth: true });
      const refunded = r && r.payment && r.payment.status === "refunded";
      say("Order cancelled; its units went back on sale." + (refunded ? " Its payment was refunded." : ""));
    } catch (err) {
      if (unsupported(err)) say("Payment and cancellation are not available on this server yet (or the order is gone).", true);
      else fail(err);
    } finally {
      busy.delete(o.order_id);
      await load();
      render(true);
    }
  };
  const poll = async () => { await load(); if (!stopped) timer = setTimeout(poll, 2000); };
  leave = () => {
    stopped = true;
    clearTimeout(timer);
    clearInterval(tick);
    for (const t of followers.values()) clearTimeout(t);
  };
  tick = setInterval(() => tickExpiries(expiries), 1000);
  await poll();
}

// orderNumber is an order's number for people, the one the page uses
// everywhere: "#" and the id's last eight characters (its first ones are
// a timestamp in a time-ordered id, shared by orders of the same moment;
// the whole id stays in the title and data-order-id).
const orderNumber = (id) => "#" + String(id).replace(/-/g, "").slice(-8).toUpperCase();

// An order's status in a shopper's words, and its badge's colour: an
// order not yet recorded (pending) and one recorded (confirmed) both
// wait for the shopper's payment.
const statusWords = { pending: "Awaiting payment", confirmed: "Awaiting payment", paid: "Paid",
  cancelled: "Cancelled", expired: "Expired", refunded: "Refunded" };
const statusKind = (status) => (status === "pending" || status === "confirmed" ? "awaiting" : status);

// Product names for the order lines, from the catalog: the listing once,
// then GET /products/{sku} for a SKU it did not hold (a deleted product
// keeps its SKU).
const productNames = new Map();
let namesListed = false;
async function nameProducts(skus) {
  if (!namesListed) {
    namesListed = true;
    try {
      let cursor = null, pages = 0;
      do {
        const page = await api("GET", "/products?limit=100" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
        for (const p of page.items) productNames.set(p.sku, p.name);
        cursor = page.next_cursor;
      } while (cursor && ++pages < 5);
    } catch { namesListed = false; }
  }
  const missing = [...new Set(skus)].filter((sku) => !productNames.has(sku));
  await Promise.all(missing.map(async (sku) => {
    try { productNames.set(sku, (await api("GET", "/products/" + encodeURIComponent(sku))).name); } catch { productNames.set(sku, sku); }
  }));
}

const unsupported = (err) => err instanceof Problem && (err.status === 404 || err.status === 405) &&
  (err.code === "not_found" || err.code === "method_not_allowed");

function orderItem(o, expiries, act) {
  const li = $("order-item").content.firstElementChild.cloneNode(true);
  li.dataset.orderId = o.order_id;
  li.dataset.status = o.status;
  li.querySelector(".order-id").textContent = "Order " + orderNumber(o.order_id);
  li.querySelector(".order-id").title = o.order_id;
  if (o.created_at) li.querySelector(".order-date").textContent = when(o.created_at);
  const st = li.querySelector(".order-status");
  st.textContent = statusWords[o.status] || o.status;
  st.className = "badge order-status " + statusKind(o.status);
  li.querySelector(".order-lines").textContent = (o.items || []).map((i) => i.quantity + " × " + (productNames.get(i.sku) || i.sku)).join(", ");
  li.querySelector(".order-total").textContent = "Total " + money(o.total_cents);
  if (o.payment) li.dataset.payment = o.payment.status;
  const words = paymentWords(o);
  if (words) {
    const p = li.querySelector(".order-payment");
    p.hidden = false;
    p.textContent = words.text;
    p.className = "order-payment " + words.kind;
  }
  const actions = li.querySelector(".order-actions");
  if (o.status === "confirmed") {
    const pay = orderButton("Pay", o, () => act.pay(o));
    // Money is moving: a second card now would be a second charge.
    pay.disabled = act.busy || (o.payment && o.payment.status === "processing");
    const cancel = orderButton("Cancel", o, () => act.cancel(o));
    cancel.className = "danger";
    cancel.disabled = act.busy;
    actions.append(pay, cancel);
    if (o.expires_at) expiries.push({ at: Date.parse(o.expires_at), el: li.querySelector(".order-expiry") });
  }
  return li;
}

// payKeys keeps one Idempotency-Key per order's payment with one card
// until answered.
const payKeys = new Map();
function orderButton(label, o, onclick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.setAttribute("aria-label", label + " order " + orderNumber(o.order_id));
  b.dataset.action = label.toLowerCase();
  b.onclick = () => { b.disabled = true; onclick(); };
  return b;
}

function tickExpiries(expiries) {
  for (const e of expiries) {
    const left = e.at - Date.now();
    e.el.textContent = left > 0 ? "Pay within " + inWords(left) : "The time to pay has run out.";
  }
}

// ---- sign-up, log-in, log-out -------------------------------------------
async function login(email, password) {
  const pair = await api("POST", "/auth/login", { email, password, device: "storefront" });
  session.save(pair, email);
  passes.clear();
  joined.clear();
  await whoAmI();
}

// whoAmI reads the shopper's name (GET /me) for the nav: the name given
// at sign-up, else the email.
async function whoAmI() {
  if (!session.access) { renderNav(); return; }
  try {
    const me = await api("GET", "/me", undefined, { auth: true });
    session.setName(me.name || "");
    if (me.email) localStorage.setItem("shop.email", me.email);
  } catch { /* the nav shows the email meanwhile */ }
  renderNav();
}

function formBusy(form, busy) { for (const el of form.elements) el.disabled = busy; }

async function onLogin(ev) {
  ev.preventDefault();
  const form = ev.target;
  formBusy(form, true);
  try {
    await login($("login-email").value.trim(), $("login-password").value);
    form.reset();
    say("Welcome back!");
    location.hash = "#/";
  } catch (err) { fail(err); } finally { formBusy(form, false); }
}

async function onRegister(ev) {
  ev.preventDefault();
  const form = ev.target;
  const email = $("register-email").value.trim(), password = $("register-password").value;
  const body = { email, password };
  if ($("register-name").value.trim()) body.name = $("register-name").value.trim();
  formBusy(form, true);
  try {
    await api("POST", "/auth/register", body);
    await login(email, password);
    form.reset();
    say("Account created; you are logged in.");
    location.hash = "#/";
  } catch (err) { fail(err); } finally { formBusy(form, false); }
}

async function logout() {
  try { await api("POST", "/auth/logout", undefined, { auth: true }); } catch { /* logged out locally anyway */ }
  session.clear();
  passes.clear();
  joined.clear();
  renderNav();
  say("You are logged out.");
  location.hash = "#/";
}

document.addEventListener("DOMContentLoaded", () => {
  $("buy-form").addEventListener("submit", buyNow);
  $("add-to-cart").addEventListener("click", addToCart);
  $("checkout").addEventListener("click", checkout);
  $("login-form").addEventListener("submit", onLogin);
  $("register-form").addEventListener("submit", onRegister);
  $("nav-logout").addEventListener("click", logout);
  window.addEventListener("hashchange", () => { route(); $("main").focus(); });
  window.addEventListener("storage", renderNav);
  renderNav();
  if (session.access && !localStorage.getItem("shop.email")) whoAmI();
  route();
});
