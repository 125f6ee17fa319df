// Sale rounds in the admin console: the round form (filled in from the
// product's current round), the stock report, the waiting room's
// fairness and entries, and the live view of a sale.
"use strict";

let saleSku = "";
let saleReport = null; // the stock report of saleSku's current round

async function showSale(sku) {
  show("sale");
  saleSku = sku;
  saleReport = null;
  const form = $("sale-form");
  clearErrors(form);
  fillSaleForm(null); // nothing of the previous product stays
  $("sale-prefill").textContent = "Reading the current round\u2026";
  $("sale-title").textContent = "Sale round: " + sku;
  $("sale-live").href = "#/live/" + enc(sku);
  // Nothing typed before the round is read would survive its filling in.
  saleFormEnabled(false);
  await loadReport();
  if (saleReport) fillSaleForm(saleReport);
  saleFormEnabled(true);
  $("sale-quantity").focus();
}

function saleFormEnabled(on) {
  for (const e of $("sale-form").elements) e.disabled = !on;
}

const reportRows = [
  ["round_id", "Round"], ["quantity", "Quantity"], ["available", "Available"], ["sold", "Sold"],
  ["confirmed", "Confirmed"], ["paid", "Paid"], ["released", "Released"], ["per_user_limit", "Per-user limit"],
  ["starts_at", "Starts"], ["ends_at", "Ends"],
];

async function loadReport() {
  try {
    const rep = await api("GET", "/admin/products/" + enc(saleSku) + "/stock");
    saleReport = rep;
    showReport(rep);
    await showRoom(rep);
    await showDraw(rep);
  } catch (err) { fail(err); }
}

function showReport(rep) {
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
  const draw = rep.draw;
  row("Draw", draw ? `${drawWords[draw.state] || draw.state}, entries close ${when(draw.closes_at)}` : "none", "draw");
}

// ---- the round form -----------------------------------------------------
// datetime-local value of a time, in the browser's zone.
function localInput(t) {
  const d = new Date(t);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
const future = (t) => !!t && Date.parse(t) > Date.now();

// fillSaleForm sets the form to the current round's settings (rep), or
// to the API's defaults without one. A time already past is left empty:
// a new round with it would start now, or be over at once.
function fillSaleForm(rep) {
  $("sale-form").reset();
  const round = rep && rep.round_id !== null && rep.round_id !== undefined ? rep : null;
  $("sale-quantity").value = round ? String(round.quantity) : "";
  $("sale-limit").value = round ? String(round.per_user_limit) : "1";
  $("sale-starts").value = round && future(round.starts_at) ? localInput(round.starts_at) : "";
  $("sale-ends").value = round && future(round.ends_at) ? localInput(round.ends_at) : "";
  const room = round && round.waiting_room;
  $("sale-room").checked = !!room;
  $("sale-room-fields").hidden = !room;
  $("sale-admit").value = String(room ? room.admit_per_second : 50);
  $("sale-ttl").value = String(room ? room.pass_ttl_seconds : 120);
  $("sale-bits").value = String(room ? room.challenge_bits : 0);
  const draw = round && round.draw;
  $("sale-draw").checked = !!draw;
  $("sale-draw-fields").hidden = !draw;
  $("sale-closes").value = draw && future(draw.closes_at) ? localInput(draw.closes_at) : "";
  $("sale-prefill").textContent = round ? `Filled in from round ${round.round_id}; change what the new round needs.` : "This product has no round yet.";
}

function localToISO(id) {
  const v = $(id).value;
  if (!v) return undefined;
  const d = new Date(v);
  return isNaN(d) ? v : d.toISOString();
}

function seedBody() {
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
  if ($("sale-draw").checked) {
    body.draw = {}; // without a close, the API says it is required, beside the field
    const closes = localToISO("sale-closes");
    if (closes) body.draw.closes_at = closes;
  }
  return body;
}

// reopenAllowed asks before a new round replaces one that has sold
// something: its available and every buyer's count start over.
async function reopenAllowed() {
  const r = saleReport;
  if (!r || r.round_id === null || r.round_id === undefined || !(r.sold > 0)) return true;
  return ask(`Round ${r.round_id} of ${saleSku} has sold ${count(r.sold)} of ${count(r.quantity)}. ` +
    "A new round replaces it: available becomes the new quantity and every buyer's count starts from zero.", "Open a new round");
}

async function seed(ev) {
  ev.preventDefault();
  const form = $("sale-form");
  if (!await reopenAllowed()) return say("Nothing changed: round " + saleReport.round_id + " goes on.");
  try {
    await api("PUT", "/admin/products/" + enc(saleSku) + "/stock", seedBody());
    clearErrors(form);
    say("A new round is open for " + saleSku + ".");
    await loadReport();
  } catch (err) { showErrors(form, err); }
}

// ---- the waiting room's fairness and entries ----------------------------
let roomCursor = null;

async function showRoom(rep) {
  $("room-card").hidden = !rep.waiting_room;
  if (!rep.waiting_room) return;
  const f = await api("GET", "/products/" + enc(saleSku) + "/queue/fairness");
  const dl = $("fairness");
  dl.replaceChildren();
  const row = (label, value, key) => { const dd = el("dd", value, "mono"); dd.dataset.key = key; dl.append(el("dt", label), dd); };
  row("Round", count(f.round_id), "round_id");
  row("Seed SHA-256", f.seed_sha256, "seed_sha256");
  row("Seed", f.seed || "published at the start, when early entries are shuffled", "seed");
  row("Early entries", count(f.early_entries), "early_entries");
  row("Early order SHA-256", f.early_order_sha256 || "after the shuffle", "early_order_sha256");
  roomCursor = null;
  $("room-entries").replaceChildren();
  await moreEntries();
}

async function moreEntries() {
  try {
    const q = "?limit=100" + (roomCursor ? "&cursor=" + enc(roomCursor) : "");
    const page = await api("GET", "/admin/products/" + enc(saleSku) + "/queue/entries" + q);
    showRows("room-table", page.items.map(entryRow), true);
    roomCursor = page.next_cursor || null;
    $("room-more").hidden = !roomCursor;
  } catch (err) { fail(err); }
}

function entryRow(e) {
  const tr = el("tr");
  tr.dataset.entry = e.entry_id;
  cell(tr, e.position === null ? "\u2013" : count(e.position), "num");
  cell(tr, e.entry_id, "mono");
  cell(tr, e.user_id, "mono");
  cell(tr, e.early ? "yes" : "no");
  cell(tr, when(e.joined_at));
  cell(tr, e.admitted_at ? when(e.admitted_at) : "waiting");
  return tr;
}

async function refreshRoom() {
  try { await showRoom(saleReport || { waiting_room: null }); } catch (err) { fail(err); }
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
  const points = [], samples = [];
  drawLine($("live-chart"), points);
  let stopped = false, timer = null;
  const events = new EventSource(API + "/products/" + enc(sku) + "/events");
  events.addEventListener("stock", (e) => liveEvent(JSON.parse(e.data), points));
  events.addEventListener("error", () => {
    if (!stopped) $("live-status").textContent = "Reconnecting to the live stream\u2026";
  });
  const poll = async () => {
    try {
      await pollLive(sku, samples);
    } catch (err) {
      if (!stopped) $("live-status").textContent = err instanceof Problem ? err.message : unreachable;
    }
    if (stopped) return;
    drawLine($("live-chart"), points); // time moves on between events
    timer = setTimeout(poll, 1000);
  };
  leave = () => { stopped = true; events.close(); clearTimeout(timer); };
  poll();
}

function liveEvent(s, points) {
  $("live-available").textContent = count(s.available);
  $("live-state").textContent = saleWords[s.sale] || s.sale;
  $("live-state").className = "badge " + s.sale;
  points.push([Date.now(), s.available]);
  drawLine($("live-chart"), points);
  $("live-status").textContent = "Live: updated " + new Date().toLocaleTimeString();
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

function bindSale() {
  $("sale-form").addEventListener("submit", seed);
  $("sale-room").addEventListener("change", () => { $("sale-room-fields").hidden = !$("sale-room").checked; });
  bindDraw();
  $("report-refresh").addEventListener("click", loadReport);
  $("room-refresh").addEventListener("click", refreshRoom);
  $("room-more").addEventListener("click", moreEntries);
  $("admit-form").addEventListener("submit", changeRate);
}
