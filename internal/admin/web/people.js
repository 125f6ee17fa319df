// The shop at a glance and its people: the overview (live rounds, orders
// per minute, the audit's verdict), orders (filter, page, refund) and
// customers (search, erase).
"use strict";

// ---- overview -----------------------------------------------------------
async function showOverview() {
  show("overview");
  await loadOverview();
}

async function loadOverview() {
  await Promise.all([overviewRounds().catch(fail), overviewOrders().catch(fail)]);
}

// roundState is the sale state of a stock report, as the live stream
// names it.
function roundState(rep, now = Date.now()) {
  if (rep.round_id === null || rep.round_id === undefined) return "none";
  if (rep.starts_at && Date.parse(rep.starts_at) > now) return "upcoming";
  if (rep.ends_at && Date.parse(rep.ends_at) <= now) return "ended";
  return rep.available > 0 ? "open" : "sold_out";
}

// overviewRounds lists the audit's live rounds, each with its state from
// its stock report, and shows the audit's verdict.
async function overviewRounds() {
  const audit = await api("GET", "/admin/audit");
  const verdict = $("overview-audit");
  verdict.textContent = audit.ok ? "OK" : count(audit.problems.length) + " problem(s)";
  verdict.className = audit.ok ? "ok" : "bad";
  const rounds = audit.rounds.slice().sort((a, b) => a.sku < b.sku ? -1 : 1);
  const reports = await Promise.all(rounds.slice(0, 50).map((r) =>
    api("GET", "/admin/products/" + enc(r.sku) + "/stock").catch(() => null)));
  const states = reports.map((rep) => rep ? roundState(rep) : "");
  showRows("overview-table", rounds.slice(0, 50).map((r, i) => roundRow(r, reports[i], states[i])));
  $("overview-rounds").textContent = count(rounds.length);
  $("overview-open").textContent = count(states.filter((s) => s === "open").length) + " open now";
}

function roundRow(r, rep, state) {
  const tr = el("tr");
  tr.dataset.sku = r.sku;
  cell(tr, r.sku, "mono");
  cell(tr, `${count(rep ? rep.available : r.available)} / ${count(r.quantity)}`, "num");
  cell(tr, "").append(el("span", saleWords[state] || state || "\u2013", "badge " + state));
  const actions = cell(tr, "", "actions");
  actions.append(link("#/live/" + enc(r.sku), "Live"), link("#/sale/" + enc(r.sku), "Sale"));
  return tr;
}

// overviewOrders counts the newest recorded orders (up to 500) per
// minute over the last 15 minutes.
async function overviewOrders() {
  const page = await api("GET", "/admin/orders?limit=500");
  const now = Date.now(), minute = 60000, span = 15;
  const buckets = Array.from({ length: span }, (_, i) => ({ at: now - (span - 1 - i) * minute, orders: 0 }));
  for (const o of page.items) {
    const age = Math.floor((now - Date.parse(o.created_at)) / minute);
    if (age >= 0 && age < span) buckets[span - 1 - age].orders++;
  }
  const capped = page.next_cursor && buckets.reduce((n, b) => n + b.orders, 0) === page.items.length;
  $("overview-rate").textContent = (capped ? "\u2265 " : "") + count(buckets[span - 1].orders);
  $("overview-recent").textContent = count(buckets.reduce((n, b) => n + b.orders, 0)) + " in 15 minutes";
  const label = (b) => { const d = new Date(b.at); return `${d.getHours()}:${String(d.getMinutes()).padStart(2, "0")}`; };
  drawBars($("overview-chart"), buckets, [["orders", "bar", "orders"]], label, "No order in the last 15 minutes");
}

// ---- orders -------------------------------------------------------------
let ordersCursor = null;

async function showOrders() {
  show("orders");
  await findOrders();
}

function ordersQuery() {
  const q = new URLSearchParams({ limit: "50" });
  for (const k of ["status", "sku", "email"]) {
    const v = $("orders-" + k).value.trim();
    if (v) q.set(k, v);
  }
  if (ordersCursor) q.set("cursor", ordersCursor);
  return "?" + q.toString();
}

async function findOrders(ev) {
  if (ev) ev.preventDefault();
  ordersCursor = null;
  await moreOrders(false);
}

// latestList numbers the list requests: an answer to an older one (a search
// the admin has since changed, or a page asked before a refund) is
// dropped, so it never draws over a newer list.
const latestList = { orders: 0, customers: 0 };

async function moreOrders(more = true) {
  const form = $("orders-form");
  const n = ++latestList.orders;
  const query = ordersQuery();
  try {
    const page = await api("GET", "/admin/orders" + query);
    if (n !== latestList.orders) return;
    clearErrors(form);
    showRows("orders-table", page.items.map(orderRow), more);
    $("orders-table").dataset.query = query; // what the rows answer (the browser tests wait on it)
    ordersCursor = page.next_cursor || null;
    $("orders-more").hidden = !ordersCursor;
  } catch (err) { if (n === latestList.orders) showErrors(form, err); }
}

// shortId is an order id's last eight characters: its ids are time
// ordered, so their beginnings are alike.
const shortId = (id) => "\u2026" + id.slice(-8);

function orderRow(o) {
  const tr = el("tr");
  tr.dataset.id = o.order_id;
  const id = cell(tr, shortId(o.order_id), "mono");
  id.title = o.order_id;
  cell(tr, when(o.created_at));
  cell(tr, o.email, "mono");
  cell(tr, o.items.map((i) => `${i.sku} \u00d7 ${i.quantity}`).join(", "));
  cell(tr, money(o.total_cents), "num");
  cell(tr, o.status, "status " + o.status);
  const actions = cell(tr, "", "actions");
  if (o.status === "paid") {
    actions.append(button("Refund", "danger small", () => refund(o, tr), "Refund order " + o.order_id));
  }
  return tr;
}

// refund pays a paid order back in full once the admin confirms; a
// repeat (the same key) refunds nothing more.
async function refund(o, tr) {
  const yes = await ask(`Refund order ${shortId(o.order_id)} of ${o.email}: ${money(o.total_cents)}? ` +
    "The whole order is paid back and its units return to the stock. This cannot be undone.", "Refund " + money(o.total_cents));
  if (!yes) return;
  try {
    const r = await api("POST", "/admin/orders/" + enc(o.order_id) + "/refund", undefined, { idempotencyKey: newKey() });
    const row = orderRow({ ...o, ...r, email: o.email });
    tr.replaceWith(row);
    labelCells($("orders-table"));
    say(`Refunded order ${shortId(o.order_id)}: ${money(o.total_cents)}.`);
  } catch (err) { fail(err); }
}

// ---- customers ----------------------------------------------------------
let customersCursor = null;

async function showCustomers() {
  show("customers");
  await findCustomers();
}

async function findCustomers(ev) {
  if (ev) ev.preventDefault();
  customersCursor = null;
  await moreCustomers(false);
}

async function moreCustomers(more = true) {
  const form = $("customers-form");
  const q = new URLSearchParams({ limit: "50" });
  const email = $("customers-email").value.trim();
  if (email) q.set("email", email);
  if (customersCursor) q.set("cursor", customersCursor);
  const n = ++latestList.customers;
  try {
    const page = await api("GET", "/admin/users?" + q.toString());
    if (n !== latestList.customers) return;
    clearErrors(form);
    showRows("customers-table", page.items.map(customerRow), more);
    customersCursor = page.next_cursor || null;
    $("customers-more").hidden = !customersCursor;
  } catch (err) { if (n === latestList.customers) showErrors(form, err); }
}

function customerRow(u) {
  const tr = el("tr");
  tr.dataset.id = u.id;
  tr.dataset.email = u.email;
  cell(tr, u.email, "mono");
  cell(tr, u.name || "\u2013");
  cell(tr, u.role);
  cell(tr, when(u.created_at));
  cell(tr, count(u.orders), "num");
  const actions = cell(tr, "", "actions");
  actions.append(button("Erase", "danger small", () => erase(u, tr), "Erase " + u.email));
  return tr;
}

// erase removes a customer once the admin confirms: sessions end, unpaid
// orders are cancelled, paid ones stay anonymised.
async function erase(u, tr) {
  const yes = await ask(`Erase ${u.email}? Every session ends at once, unpaid orders are cancelled ` +
    "and paid ones are kept without the name and email. This cannot be undone.", "Erase " + u.email);
  if (!yes) return;
  try {
    await api("DELETE", "/admin/users/" + enc(u.id));
    tr.remove();
    $("customers-empty").hidden = $("customers").children.length > 0;
    $("customers-table").hidden = $("customers").children.length === 0;
    say("Erased " + u.email + ".");
  } catch (err) { fail(err); }
}

function bindPeople() {
  $("overview-refresh").addEventListener("click", loadOverview);
  $("orders-form").addEventListener("submit", findOrders);
  $("orders-more").addEventListener("click", () => moreOrders(true));
  $("customers-form").addEventListener("submit", findCustomers);
  $("customers-more").addEventListener("click", () => moreCustomers(true));
}
