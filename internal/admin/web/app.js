// The shop's admin console: plain JavaScript over the public API (/api/v1),
// no framework, no build step, on the client the pages share
// (/shared/client.js). This file is the core: the session, field errors,
// formatting, DOM helpers, the confirmation dialog and the views switched
// by the URL hash. Each area has its file (catalog.js, sale.js, people.js,
// reports.js, charts.js); they are classic scripts sharing one scope,
// loaded deferred in order, and start() runs once all are in. Nothing is
// ever inserted as HTML: every value goes in through textContent.
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
    order_not_refundable: "Only a paid order can be refunded.",
    unsupported_media_type: "The image must be a PNG, JPEG or WebP file.",
    payload_too_large: "The image is larger than 2 MiB.",
  },
});
const session = client.session;

// api sends one request of the admin's session; opts may carry an
// idempotencyKey.
const api = (method, path, body, opts = {}) => client.api(method, path, body, { ...opts, auth: true });

// newKey makes an Idempotency-Key (crypto.randomUUID needs a secure
// context; a console on plain HTTP still needs keys).
function newKey() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

// ---- field errors -------------------------------------------------------
function clearErrors(form) {
  form.querySelectorAll(".field-error").forEach((p) => { p.textContent = ""; });
  form.querySelectorAll("[aria-invalid]").forEach((e) => e.removeAttribute("aria-invalid"));
}

// fieldError puts a message of the page's own beside a field.
function fieldError(form, field, message) {
  const slot = form.querySelector(`[data-error="${CSS.escape(field)}"]`);
  if (slot) slot.textContent = message;
  const input = form.querySelector(`[name="${CSS.escape(field)}"]`);
  if (input) { input.setAttribute("aria-invalid", "true"); input.focus(); }
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

// intField answers an integer input's value as a number, or the text as
// typed when it is not one, so the API names the field.
function intField(id) {
  const v = $(id).value.trim();
  return /^-?\d+$/.test(v) ? Number(v) : v;
}

// ---- formatting ---------------------------------------------------------
const money = (cents) => (cents / 100).toLocaleString("en-US", { style: "currency", currency: "USD" });
const count = (n) => (n === null || n === undefined) ? "\u2013" : Number(n).toLocaleString("en-US");
const when = (t) => t ? new Date(t).toLocaleString() : "\u2013";
const saleWords = { none: "not on sale", upcoming: "upcoming", open: "open", sold_out: "sold out", ended: "ended" };

// centsText shows integer cents as a decimal amount ("12.50"), digit by
// digit: no float arithmetic.
function centsText(cents) {
  const s = String(Math.abs(cents)).padStart(3, "0");
  return (cents < 0 ? "-" : "") + s.slice(0, -2) + "." + s.slice(-2);
}

// parseCents reads an amount typed as "12", "12.5", ".50" or "12.50" (a "$" and
// thousands commas allowed) into integer cents from the decimal string
// itself, so 19.99 is 1999 exactly; null when it is not an amount.
function parseCents(text) {
  const m = /^\$?(?=\.?\d)(\d*)(?:\.(\d{0,2}))?$/.exec(text.trim().replace(/,(?=\d{3}(\D|$))/g, ""));
  if (!m) return null;
  const cents = Number(m[1]) * 100 + Number((m[2] || "").padEnd(2, "0"));
  return Number.isSafeInteger(cents) ? cents : null;
}

// ---- DOM helpers --------------------------------------------------------
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
function cell(tr, text, cls) { const td = el("td", text, cls); tr.append(td); return td; }
function link(href, text, cls) { const a = el("a", text, cls); a.href = href; return a; }
function button(text, cls, onClick, label) {
  const b = el("button", text, cls);
  b.type = "button";
  if (label) b.setAttribute("aria-label", label);
  b.addEventListener("click", onClick);
  return b;
}
const enc = encodeURIComponent;

// labelCells gives each cell of a table's body its column's name
// (data-label), which a phone shows before the value once rows stack;
// actions and images speak for themselves.
function labelCells(table) {
  const names = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
  for (const tr of table.tBodies[0].rows) {
    [...tr.cells].forEach((td, i) => {
      td.dataset.label = td.classList.contains("actions") || td.classList.contains("image") ? "" : names[i] || "";
    });
  }
}

// showRows puts rows in a table (appending to what is there with more),
// labels them and shows the table, or the empty note when it has none.
function showRows(tableId, rows, more = false) {
  const table = $(tableId), body = table.tBodies[0];
  if (more) body.append(...rows); else body.replaceChildren(...rows);
  labelCells(table);
  table.hidden = body.rows.length === 0;
  const empty = $(tableId.replace(/-table$/, "-empty"));
  if (empty) empty.hidden = body.rows.length > 0;
}

// ask opens the confirmation dialog and answers whether the admin chose
// yes; Escape and Cancel are no.
function ask(text, yes) {
  const d = $("confirm");
  $("confirm-text").textContent = text;
  $("confirm-yes").textContent = yes;
  d.returnValue = "";
  d.showModal();
  return new Promise((resolve) => {
    d.addEventListener("close", () => resolve(d.returnValue === "yes"), { once: true });
  });
}

// ---- views --------------------------------------------------------------
let leave = () => {}; // stops the current view's timers and streams
const views = ["login", "overview", "products", "product", "sale", "live", "orders", "customers",
  "best", "visitors", "stores", "audit"];

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

// viewOf answers the function that shows a hash route's view (they live
// in the area files, loaded after this one).
function viewOf(name) {
  const views = {
    product: (p) => showProduct(p === "new" ? "" : p),
    products: showProducts, sale: showSale, live: showLive, orders: showOrders, customers: showCustomers,
    best: showBest, visitors: showVisitors, stores: showStores, audit: showAudit,
  };
  return views[name] || showOverview;
}

async function route() {
  leave();
  leave = () => {};
  const [, view, arg] = location.hash.split("/");
  if (!session.access && view !== "login") { location.hash = "#/login"; return; }
  if (view === "login") { show("login"); return $("login-email").focus(); }
  return viewOf(view)(decodeURIComponent(arg || ""));
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
    location.hash = "#/overview";
  } catch (err) { showErrors(form, err); }
}

async function logout() {
  const token = session.access;
  session.clear();
  renderNav();
  location.hash = "#/login";
  await fetch(API + "/auth/logout", { method: "POST", headers: { Authorization: "Bearer " + token } }).catch(() => {});
}

// ---- start --------------------------------------------------------------
// Each area binds its own controls (bindCatalog and the rest, in their
// files).
function start() {
  $("login-form").addEventListener("submit", login);
  $("nav-logout").addEventListener("click", logout);
  bindCatalog();
  bindSale();
  bindPeople();
  bindReports();
  window.addEventListener("resize", redrawCharts);
  window.addEventListener("hashchange", () => { $("main").focus({ preventScroll: true }); route(); });
  renderNav();
  route();
}
// Deferred scripts all run before DOMContentLoaded, in order: by then
// every file of the console is in.
document.addEventListener("DOMContentLoaded", start);
