// The shop's admin console: plain JavaScript over the public API (/api/v1),
// no framework, no build step, on the client the pages share
// (/shared/client.js). Views are switched by the URL hash. Nothing is ever
// inserted as HTML: every value goes in through textContent.
"use strict";

// ---- session and API calls ----------------------------------------------
// The console keeps its tokens in sessionStorage, apart from the
// storefront's: closing the tab ends the admin's use of them. A session
// that cannot be refreshed goes to log-in.
const client = shopClient({
  storage: sessionStorage,
  prefix: "admin.",
  signedOut: () => { renderNav(); location.hash = "#/login"; },
  words: {
    invalid_credentials: "Wrong email or password.",
    forbidden: "This account is not an admin.",
    sku_taken: "A product with this SKU already exists.",
    rate_limited: "Too many requests; wait a moment and try again.",
    unavailable: "The shop is briefly unavailable; try again in a moment.",
    invalid_request: "Some fields need attention.",
  },
});
const session = client.session;

// api sends one request of the admin's session.
const api = (method, path, body) => client.api(method, path, body, { auth: true });

// ---- field errors -------------------------------------------------------
function clearErrors(form) {
  form.querySelectorAll(".field-error").forEach((p) => { p.textContent = ""; });
  form.querySelectorAll("[aria-invalid]").forEach((el) => el.removeAttribute("aria-invalid"));
}

// showErrors puts each of a problem's field errors beside its field (the
// element whose data-error names it) and focuses the first; errors with
// no field on the form, and other problems, go to the message.
function showErrors(form, err) {
  clearErrors(form);
  if (!(err instanceof Problem) || !err.errors.length) return fail(err);
  const loose = [];
  let first = null;
  for (const e of err.errors) {
    const slot = form.querySelector(`[data-error="${CSS.escape(e.field)}"]`);
    if (!slot) { loose.push(e.field + ": " + e.message); continue; }
    slot.textContent = e.message;
    const input = form.querySelector(`[name="${CSS.escape(e.field)}"]`);
    if (input) { input.setAttribute("aria-invalid", "true"); first = first || input; }
  }
  say(err.message + (loose.length ? " " + loose.join("; ") + "." : ""), true);
  if (first) first.focus();
}

// ---- formatting ---------------------------------------------------------
const money = (cents) => (cents / 100).toLocaleString("en-US", { style: "currency", currency: "USD" });
const count = (n) => (n === null || n === undefined) ? "\u2013" : Number(n).toLocaleString("en-US");
const when = (t) => t ? new Date(t).toLocaleString() : "\u2013";
const saleWords = { none: "not on sale", upcoming: "upcoming", open: "open", sold_out: "sold out", ended: "ended" };

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
function cell(tr, text, cls) { const td = el("td", text, cls); tr.append(td); return td; }
function link(href, text, cls) { const a = el("a", text, cls); a.href = href; return a; }
const enc = encodeURIComponent;

// ---- views --------------------------------------------------------------
let leave = () => {}; // stops the current view's timers and streams
const views = ["login", "products", "product", "sale", "live", "best", "visitors", "stores", "audit"];

function show(name) {
  for (const v of views) $("view-" + v).hidden = v !== name;
  document.querySelectorAll("#nav a[data-view]").forEach((a) => {
    if (a.dataset.view === name) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  });
}

function renderNav() {
  $("nav").hidden = !session.access;
  $("nav-user").textContent = session.email;
}

async function route() {
  leave();
  leave = () => {};
  const [, view, arg] = location.hash.split("/");
  const param = decodeURIComponent(arg || "");
  if (!session.access && view !== "login") { location.hash = "#/login"; return; }
  switch (view) {
    case "login": show("login"); return $("login-email").focus();
    case "product": return showProduct(param === "new" ? "" : param);
    case "sale": return showSale(param);
    case "live": return showLive(param);
    case "best": return showBest();
    case "visitors": return showVisitors();
    case "stores": return showStores();
    case "audit": return showAudit();
    default: return showProducts();
  }
}

// ---- log in -------------------------------------------------------------
// Admin-ness is the role /me answers: a shopper's session is ended at
// once and the console stays closed.
async function login(ev) {
  ev.preventDefault();
  const form = $("login-form");
  clearErrors(form);
  const email = $("login-email").value.trim(), password = $("login-password").value;
  try {
    session.save(await client.api("POST", "/auth/login", { email, password, device: "admin console" }), email);
    const me = await api("GET", "/me");
    if (me.role !== "admin") {
      await fetch(API + "/auth/logout", { method: "POST", headers: { Authorization: "Bearer " + session.access } }).catch(() => {});
      session.clear();
      renderNav();
      return say("This account is not an admin. Log in with an admin account.", true);
    }
    $("login-password").value = "";
    renderNav();
    location.hash = "#/products";
  } catch (err) { showErrors(form, err); }
}

async function logout() {
  const token = session.access;
  session.clear();
  renderNav();
  location.hash = "#/login";
  await fetch(API + "/auth/logout", { method: "POST", headers: { Authorization: "Bearer " + token } }).catch(() => {});
}

// ---- products -----------------------------------------------------------
let productsCursor = null;

async function showProducts() {
  show("products");
  $("products").replaceChildren();
  productsCursor = null;
  await moreProducts();
}

async function moreProducts() {
  try {
    const q = "?limit=100" + (productsCursor ? "&cursor=" + enc(productsCursor) : "");
    const page = await api("GET", "/products" + q);
    for (const p of page.items) $("products").append(productRow(p));
    productsCursor = page.next_cursor || null;
    $("products-more").hidden = !productsCursor;
    $("products-empty").hidden = $("products").children.length > 0;
    $("products-table").hidden = $("products").children.length === 0;
  } catch (err) { fail(err); }
}

function productRow(p) {
  const tr = el("tr");
  tr.dataset.sku = p.sku;
  cell(tr, p.sku, "mono");
  cell(tr, p.name);
  cell(tr, p.category);
  cell(tr, money(p.price_cents), "num");
  cell(tr, count(p.available), "num");
  const actions = cell(tr, "", "actions");
  actions.append(link("#/product/" + enc(p.sku), "Edit"), link("#/sale/" + enc(p.sku), "Sale"), link("#/live/" + enc(p.sku), "Live"));
  const del = el("button", "Delete", "danger small");
  del.type = "button";
  del.setAttribute("aria-label", "Delete " + p.sku);
  del.addEventListener("click", () => deleteProduct(p.sku, del));
  actions.append(del);
  return tr;
}

// deleteProduct asks for a second click on the same button, so a stray
// click or Enter never deletes.
async function deleteProduct(sku, button) {
  if (button.dataset.armed !== "1") {
    button.dataset.armed = "1";
    button.textContent = "Really delete?";
    setTimeout(() => { button.dataset.armed = ""; button.textContent = "Delete"; }, 4000);
    return;
  }
  try {
    await api("DELETE", "/admin/products/" + enc(sku));
    button.closest("tr").remove();
    say("Deleted " + sku + ".");
  } catch (err) { fail(err); }
}

let editing = ""; // the SKU being edited, "" for a new product

async function showProduct(sku) {
  show("product");
  editing = sku;
  const form = $("product-form");
  form.reset();
  clearErrors(form);
  $("product-title").textContent = sku ? "Edit " + sku : "New product";
  $("product-save").textContent = sku ? "Save changes" : "Create product";
  $("product-sku").readOnly = !!sku;
  if (!sku) return $("product-sku").focus();
  try {
    const p = await api("GET", "/products/" + enc(sku));
    $("product-sku").value = p.sku;
    $("product-name").value = p.name;
    $("product-description").value = p.description || "";
    $("product-category").value = p.category;
    $("product-price").value = String(p.price_cents);
    $("product-name").focus();
  } catch (err) { fail(err); }
}

// intField answers an integer input's value as a number, or the text as
// typed when it is not one, so the API names the field.
function intField(id) {
  const v = $(id).value.trim();
  return /^-?\d+$/.test(v) ? Number(v) : v;
}

async function saveProduct(ev) {
  ev.preventDefault();
  const form = $("product-form");
  const body = {
    name: $("product-name").value, description: $("product-description").value,
    category: $("product-category").value.trim(), price_cents: intField("product-price"),
  };
  try {
    if (editing) {
      await api("PUT", "/admin/products/" + enc(editing), body);
      say("Saved " + editing + ".");
    } else {
      body.sku = $("product-sku").value.trim();
      const p = await api("POST", "/admin/products", body);
      say("Created " + p.sku + ". Open a sale round for it next.");
    }
    location.hash = "#/products";
  } catch (err) { showErrors(form, err); }
}

// ---- sale rounds --------------------------------------------------------
let saleSku = "";

async function showSale(sku) {
  show("sale");
  saleSku = sku;
  const form = $("sale-form");
  clearErrors(form);
  $("sale-title").textContent = "Sale round: " + sku;
  $("sale-live").href = "#/live/" + enc(sku);
  $("sale-quantity").focus();
  await loadReport();
}

const reportRows = [
  ["round_id", "Round"], ["quantity", "Quantity"], ["available", "Available"], ["sold", "Sold"],
  ["confirmed", "Confirmed"], ["paid", "Paid"], ["released", "Released"], ["per_user_limit", "Per-user limit"],
  ["starts_at", "Starts"], ["ends_at", "Ends"],
];

async function loadReport() {
  try {
    const rep = await api("GET", "/admin/products/" + enc(saleSku) + "/stock");
    const dl = $("report");
    dl.replaceChildren();
    const row = (label, value, key) => {
      const dd = el("dd", value);
      if (key) dd.dataset.key = key;
      dl.append(el("dt", label), dd);
    };
    for (const [key, label] of reportRows) {
      if (!(key in rep)) continue;
      const v = rep[key];
      row(label, key.endsWith("_at") ? when(v) : key === "per_user_limit" && v === 0 ? "unlimited" : count(v), key);
    }
    const room = rep.waiting_room;
    row("Waiting room", room ? `${count(room.admit_per_second)}/s, pass ${room.pass_ttl_seconds} s, ${room.challenge_bits} challenge bits` : "none", "waiting_room");
    if (room) { row("Waiting", count(room.waiting), "waiting"); row("Admitted", count(room.admitted), "admitted"); }
  } catch (err) { fail(err); }
}

function localToISO(id) {
  const v = $(id).value;
  if (!v) return undefined;
  const d = new Date(v);
  return isNaN(d) ? v : d.toISOString();
}

async function seed(ev) {
  ev.preventDefault();
  const form = $("sale-form");
  const body = { quantity: intField("sale-quantity") };
  if ($("sale-limit").value.trim() !== "") body.per_user_limit = intField("sale-limit");
  const starts = localToISO("sale-starts"), ends = localToISO("sale-ends");
  if (starts) body.starts_at = starts;
  if (ends) body.ends_at = ends;
  if ($("sale-room").checked) {
    body.waiting_room = { admit_per_second: intField("sale-admit") };
    if ($("sale-ttl").value.trim() !== "") body.waiting_room.pass_ttl_seconds = intField("sale-ttl");
    if ($("sale-bits").value.trim() !== "") body.waiting_room.challenge_bits = intField("sale-bits");
  }
  try {
    await api("PUT", "/admin/products/" + enc(saleSku) + "/stock", body);
    clearErrors(form);
    say("A new round is open for " + saleSku + ".");
    await loadReport();
  } catch (err) { showErrors(form, err); }
}

// ---- live view ----------------------------------------------------------
// Available comes from the public stream; the rate is the change of the
// stock report's sold count over the last five seconds of one-second
// polls; the room's counters from the admin room endpoint.
async function showLive(sku) {
  show("live");
  $("live-title").textContent = "Live sale: " + sku;
  $("live-sale-link").href = "#/sale/" + enc(sku);
  for (const id of ["live-available", "live-rate", "live-sold", "live-waiting", "live-admitted"]) $(id).textContent = "\u2013";
  $("live-state").textContent = "";
  $("live-room").hidden = true;
  $("admit-form").hidden = true;
  $("live-chart").replaceChildren();
  const points = [], samples = [];
  let stopped = false, timer = null;
  const events = new EventSource(API + "/products/" + enc(sku) + "/events");
  events.addEventListener("stock", (e) => {
    const s = JSON.parse(e.data);
    $("live-available").textContent = count(s.available);
    $("live-state").textContent = saleWords[s.sale] || s.sale;
    $("live-state").className = "badge " + s.sale;
    points.push([Date.now(), s.available]);
    drawLine($("live-chart"), points);
    $("live-status").textContent = "Live: updated " + new Date().toLocaleTimeString();
  });
  events.addEventListener("error", () => {
    if (!stopped) $("live-status").textContent = "Reconnecting to the live stream\u2026";
  });
  const poll = async () => {
    try {
      await pollLive(sku, samples);
    } catch (err) {
      if (!stopped) $("live-status").textContent = err instanceof Problem ? err.message : unreachable;
    }
    if (!stopped) timer = setTimeout(poll, 1000);
  };
  leave = () => { stopped = true; events.close(); clearTimeout(timer); };
  poll();
}

async function pollLive(sku, samples) {
  const rep = await api("GET", "/admin/products/" + enc(sku) + "/stock");
  const now = Date.now();
  samples.push([now, rep.sold]);
  while (samples.length > 1 && now - samples[0][0] > 5500) samples.shift();
  const [t0, s0] = samples[0];
  const rate = samples.length > 1 && now > t0 ? Math.max(0, (rep.sold - s0) * 1000 / (now - t0)) : 0;
  $("live-rate").textContent = rate.toLocaleString("en-US", { maximumFractionDigits: 1 });
  $("live-sold").textContent = count(rep.sold);
  $("live-quantity").textContent = "of " + count(rep.quantity) + " seeded";
  if (!rep.waiting_room) { $("live-room").hidden = true; $("admit-form").hidden = true; return; }
  const room = await api("GET", "/admin/products/" + enc(sku) + "/queue");
  $("live-room").hidden = false;
  $("live-waiting").textContent = count(room.waiting);
  $("live-admitted").textContent = count(room.admitted);
  $("live-admit-rate").textContent = count(room.admit_per_second);
  if ($("admit-form").hidden) { $("admit-form").hidden = false; $("admit-rate").value = String(room.admit_per_second); }
}

async function changeRate(ev) {
  ev.preventDefault();
  const sku = decodeURIComponent(location.hash.split("/")[2] || "");
  try {
    await api("PATCH", "/admin/products/" + enc(sku) + "/queue", { admit_per_second: intField("admit-rate") });
    clearErrors($("admit-form"));
    say("The room now admits " + $("admit-rate").value + " a second.");
  } catch (err) { showErrors($("admit-form"), err); }
}

// ---- charts (inline SVG, built node by node) -----------------------------
const SVG = "http://www.w3.org/2000/svg";
function svgEl(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// drawLine plots [time, value] points of the last two minutes.
function drawLine(svg, points) {
  const now = Date.now(), span = 120000;
  while (points.length > 2 && now - points[1][0] > span) points.shift();
  const W = 600, H = 160, pad = 24;
  const max = Math.max(1, ...points.map((p) => p[1]));
  const x = (t) => pad + (W - 2 * pad) * Math.max(0, 1 - (now - t) / span);
  const y = (v) => H - pad - (H - 2 * pad) * v / max;
  let d = "";
  points.forEach(([t, v], i) => {
    d += (i ? " L" : "M") + x(t).toFixed(1) + " " + y(v).toFixed(1);
  });
  if (points.length) d += " H" + x(now).toFixed(1);
  svg.replaceChildren(
    svgEl("line", { x1: pad, y1: H - pad, x2: W - pad, y2: H - pad, class: "axis" }),
    svgEl("text", { x: pad, y: 14, class: "tick" }, count(max)),
    svgEl("text", { x: pad, y: H - 6, class: "tick" }, "2 min ago"),
    svgEl("text", { x: W - pad, y: H - 6, class: "tick end" }, "now"),
    svgEl("path", { d, class: "line" }),
  );
}

// drawBars draws one pair of bars (views, unique visitors) per day.
function drawBars(svg, days) {
  const W = 600, H = 200, left = 40, bottom = 28, top = 12;
  const max = Math.max(1, ...days.map((d) => Math.max(d.views, d.unique_visitors)));
  const step = (W - left - 8) / Math.max(1, days.length);
  const bw = Math.max(1, step * 0.4);
  const y = (v) => H - bottom - (H - bottom - top) * v / max;
  const nodes = [
    svgEl("line", { x1: left, y1: H - bottom, x2: W - 8, y2: H - bottom, class: "axis" }),
    svgEl("text", { x: left - 4, y: top + 4, class: "tick end" }, count(max)),
    svgEl("text", { x: left - 4, y: H - bottom, class: "tick end" }, "0"),
  ];
  days.forEach((d, i) => {
    const x0 = left + i * step + step * 0.1;
    const bar = (x, v, cls) => {
      const r = svgEl("rect", { x: x.toFixed(1), y: y(v).toFixed(1), width: bw.toFixed(1), height: (H - bottom - y(v)).toFixed(1), class: cls });
      r.append(svgEl("title", {}, `${d.date}: ${count(v)} ${cls === "views" ? "views" : "unique visitors"}`));
      return r;
    };
    nodes.push(bar(x0, d.views, "views"), bar(x0 + bw, d.unique_visitors, "unique"));
    const every = Math.ceil(days.length / 7);
    if (i % every === 0) nodes.push(svgEl("text", { x: (x0 + bw).toFixed(1), y: H - 8, class: "tick mid" }, d.date.slice(5)));
  });
  svg.replaceChildren(...nodes);
}

// ---- best sellers -------------------------------------------------------
async function showBest() {
  show("best");
  await loadBest();
}

async function loadBest(ev) {
  if (ev) ev.preventDefault();
  try {
    const r = await api("GET", "/best-sellers?limit=100&period=" + enc($("best-period").value));
    $("best").replaceChildren(...r.items.map((e) => {
      const tr = el("tr");
      tr.dataset.sku = e.sku;
      cell(tr, e.rank, "num"); cell(tr, e.sku, "mono"); cell(tr, e.name); cell(tr, count(e.units), "num");
      return tr;
    }));
    $("best-empty").hidden = r.items.length > 0;
    $("best-table").hidden = r.items.length === 0;
  } catch (err) { fail(err); }
}

// ---- visitors -----------------------------------------------------------
const isoDay = (d) => d.toISOString().slice(0, 10);

async function showVisitors() {
  show("visitors");
  if (!$("visitors-to").value) {
    const now = new Date();
    $("visitors-to").value = isoDay(now);
    $("visitors-from").value = isoDay(new Date(now.getTime() - 13 * 86400000));
  }
  await loadVisitors();
}

async function loadVisitors(ev) {
  if (ev) ev.preventDefault();
  const form = $("visitors-form");
  const sku = $("visitors-sku").value.trim();
  const q = "?from=" + enc($("visitors-from").value) + "&to=" + enc($("visitors-to").value);
  try {
    const r = await api("GET", (sku ? "/admin/products/" + enc(sku) + "/visitors" : "/admin/visitors") + q);
    clearErrors(form);
    $("visitors-unique").textContent = count(r.unique_visitors);
    $("visitors-views").textContent = count(r.views);
    drawBars($("visitors-chart"), r.days || []);
  } catch (err) { showErrors(form, err); }
}

// ---- pickup stores ------------------------------------------------------
function numberField(id) {
  const v = $(id).value.trim();
  return v !== "" && isFinite(Number(v)) ? Number(v) : v;
}

async function showStores() {
  show("stores");
  await findStores();
}

async function saveStore(ev) {
  ev.preventDefault();
  const form = $("store-form");
  const id = $("store-id").value.trim();
  clearErrors(form);
  if (!id) { $("store-id-error").textContent = "An id is needed."; return $("store-id").focus(); }
  const body = { name: $("store-name").value, lng: numberField("store-lng"), lat: numberField("store-lat") };
  if ($("store-address").value.trim()) body.address = $("store-address").value;
  try {
    const s = await api("PUT", "/admin/stores/" + enc(id), body);
    say("Saved store " + s.id + ".");
    $("nearby-lng").value = String(s.lng);
    $("nearby-lat").value = String(s.lat);
    await findStores();
  } catch (err) { showErrors(form, err); }
}

async function findStores(ev) {
  if (ev) ev.preventDefault();
  const form = $("nearby-form");
  // An empty radius is left out, for the server's default: an empty
  // number is a 400 like any other that is not one.
  const radius = $("nearby-radius").value;
  const q = "?limit=50&lng=" + enc($("nearby-lng").value) + "&lat=" + enc($("nearby-lat").value) + (radius === "" ? "" : "&radius_km=" + enc(radius));
  try {
    const r = await api("GET", "/stores/nearby" + q);
    clearErrors(form);
    $("stores").replaceChildren(...r.items.map(storeItem));
    $("stores-empty").hidden = r.items.length > 0;
  } catch (err) { showErrors(form, err); }
}

function storeItem(s) {
  const li = el("li");
  li.dataset.id = s.id;
  const text = el("div");
  text.append(el("strong", s.name), el("span", " " + s.id, "mono hint"),
    el("div", [s.address, `${s.lat}, ${s.lng}`, count(Math.round(s.distance_km)) + " km away"].filter(Boolean).join(" \u00b7 "), "hint"));
  const del = el("button", "Delete", "danger small");
  del.type = "button";
  del.setAttribute("aria-label", "Delete store " + s.id);
  del.addEventListener("click", async () => {
    try { await api("DELETE", "/admin/stores/" + enc(s.id)); li.remove(); say("Deleted store " + s.id + "."); } catch (err) { fail(err); }
  });
  li.append(text, del);
  return li;
}

// ---- audit --------------------------------------------------------------
function showAudit() {
  show("audit");
  $("audit-run").focus();
}

async function runAudit() {
  const button = $("audit-run");
  button.disabled = true;
  button.textContent = "Running\u2026";
  try {
    const r = await api("GET", "/admin/audit");
    const v = $("audit-result");
    v.hidden = false;
    v.className = "verdict " + (r.ok ? "ok" : "bad");
    v.textContent = r.ok ? `OK: ${r.rounds.length} live round(s) checked, no problems.` : `${r.problems.length} problem(s) found.`;
    $("audit-problems-title").hidden = r.problems.length === 0;
    $("audit-problems").replaceChildren(...r.problems.map((p) => {
      const li = el("li");
      li.append(el("strong", p.kind + " "), el("span", [p.sku, p.round_id && "round " + p.round_id, p.order_id].filter(Boolean).join(" \u00b7 "), "mono"), el("div", p.detail));
      return li;
    }));
    $("audit-rounds").replaceChildren(...r.rounds.map((x) => {
      const tr = el("tr");
      cell(tr, x.sku, "mono");
      for (const k of ["round_id", "quantity", "available", "released", "held_redis", "held_postgres"]) cell(tr, count(x[k]), "num");
      return tr;
    }));
    $("audit-table").hidden = r.rounds.length === 0;
  } catch (err) { fail(err); } finally {
    button.disabled = false;
    button.textContent = "Run the audit";
  }
}

// ---- start --------------------------------------------------------------
function start() {
  $("login-form").addEventListener("submit", login);
  $("nav-logout").addEventListener("click", logout);
  $("products-more").addEventListener("click", moreProducts);
  $("product-form").addEventListener("submit", saveProduct);
  $("sale-form").addEventListener("submit", seed);
  $("sale-room").addEventListener("change", () => { $("sale-room-fields").hidden = !$("sale-room").checked; });
  $("report-refresh").addEventListener("click", loadReport);
  $("admit-form").addEventListener("submit", changeRate);
  $("best-form").addEventListener("submit", loadBest);
  $("visitors-form").addEventListener("submit", loadVisitors);
  $("store-form").addEventListener("submit", saveStore);
  $("nearby-form").addEventListener("submit", findStores);
  $("audit-run").addEventListener("click", runAudit);
  window.addEventListener("hashchange", () => { $("main").focus({ preventScroll: true }); route(); });
  renderNav();
  route();
}
start();
