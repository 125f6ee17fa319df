// Reports and places in the admin console: best sellers, visitors,
// pickup stores and the audit.
"use strict";

// ---- best sellers -------------------------------------------------------
async function showBest() {
  show("best");
  await loadBest();
}

async function loadBest(ev) {
  if (ev) ev.preventDefault();
  try {
    const r = await api("GET", "/best-sellers?limit=100&period=" + enc($("best-period").value));
    showRows("best-table", r.items.map((e) => {
      const tr = el("tr");
      tr.dataset.sku = e.sku;
      cell(tr, e.rank, "num"); cell(tr, e.sku, "mono"); cell(tr, e.name); cell(tr, count(e.units), "num");
      return tr;
    }));
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
    drawBars($("visitors-chart"), r.days || [], [["views", "views", "views"], ["unique_visitors", "unique", "unique visitors"]],
      (d) => d.date.slice(5), "No visit in this period");
  } catch (err) { showErrors(form, err); }
}

// ---- pickup stores ------------------------------------------------------
// The list shows every store by id (GET /stores) unless the admin
// searches around a point (GET /stores/nearby).
let storesCursor = null;
let storesNear = false;

function numberField(id) {
  const v = $(id).value.trim();
  return v !== "" && isFinite(Number(v)) ? Number(v) : v;
}

async function showStores() {
  show("stores");
  await listStores();
}

async function listStores(more = false) {
  storesNear = false;
  if (!more) storesCursor = null;
  try {
    const page = await api("GET", "/stores?limit=50" + (storesCursor ? "&cursor=" + enc(storesCursor) : ""));
    showStoreItems(page.items, more, "Every store, by id.", "No pickup store yet: add the first one.");
    storesCursor = page.next_cursor || null;
    $("stores-more").hidden = !storesCursor;
  } catch (err) { fail(err); }
}

function showStoreItems(items, more, scope, empty) {
  if (more) $("stores").append(...items.map(storeItem)); else $("stores").replaceChildren(...items.map(storeItem));
  $("stores-scope").textContent = scope;
  $("stores-empty").textContent = empty;
  $("stores-empty").hidden = $("stores").children.length > 0;
  $("stores-all").hidden = !storesNear;
}

async function findStores(ev) {
  if (ev) ev.preventDefault();
  const form = $("nearby-form");
  clearErrors(form);
  const lng = $("nearby-lng").value.trim(), lat = $("nearby-lat").value.trim(), radius = $("nearby-radius").value.trim();
  if (lng === "") return fieldError(form, "lng", "A longitude is needed to search around a point.");
  if (lat === "") return fieldError(form, "lat", "A latitude is needed to search around a point.");
  // An empty radius is left out, for the server's default (10 km).
  const q = "?limit=50&lng=" + enc(lng) + "&lat=" + enc(lat) + (radius === "" ? "" : "&radius_km=" + enc(radius));
  try {
    const r = await api("GET", "/stores/nearby" + q);
    storesNear = true;
    const km = radius === "" ? "10" : radius;
    showStoreItems(r.items, false, `Stores within ${km} km of ${lat}, ${lng}, nearest first.`, `No store within ${km} km of that point.`);
    $("stores-more").hidden = true;
  } catch (err) { showErrors(form, err); }
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
    await (storesNear ? findStores() : listStores());
  } catch (err) { showErrors(form, err); }
}

function storeItem(s) {
  const li = el("li");
  li.dataset.id = s.id;
  const text = el("div");
  const where = [s.address, `${s.lat}, ${s.lng}`];
  if (s.distance_km !== undefined) where.push(count(Math.round(s.distance_km)) + " km away");
  text.append(el("strong", s.name), el("span", " " + s.id, "mono hint"), el("div", where.filter(Boolean).join(" \u00b7 "), "hint"));
  const del = button("Delete", "danger small", () => deleteStore(s, li), "Delete store " + s.id);
  li.append(text, del);
  return li;
}

async function deleteStore(s, li) {
  if (!await ask(`Delete the pickup store ${s.name} (${s.id})?`, "Delete the store")) return;
  try { await api("DELETE", "/admin/stores/" + enc(s.id)); li.remove(); say("Deleted store " + s.id + "."); } catch (err) { fail(err); }
}

// ---- audit --------------------------------------------------------------
function showAudit() {
  show("audit");
  $("audit-run").focus();
}

async function runAudit() {
  const b = $("audit-run");
  b.disabled = true;
  b.textContent = "Running\u2026";
  try {
    const r = await api("GET", "/admin/audit");
    const v = $("audit-result");
    v.hidden = false;
    v.className = "verdict " + (r.ok ? "ok" : "bad");
    v.textContent = r.ok ? `OK: ${r.rounds.length} live round(s) checked, no problems.` : `${r.problems.length} problem(s) found.`;
    $("audit-problems-title").hidden = r.problems.length === 0;
    $("audit-problems").replaceChildren(...r.problems.map(problemItem));
    showRows("audit-table", r.rounds.map((x) => {
      const tr = el("tr");
      cell(tr, x.sku, "mono");
      for (const k of ["round_id", "quantity", "available", "released", "held_redis", "held_postgres"]) cell(tr, count(x[k]), "num");
      return tr;
    }));
  } catch (err) { fail(err); } finally {
    b.disabled = false;
    b.textContent = "Run the audit";
  }
}

function problemItem(p) {
  const li = el("li");
  const ids = [p.sku, p.round_id && "round " + p.round_id, ...(p.order_ids || [])].filter(Boolean).join(" \u00b7 ");
  li.append(el("strong", p.kind + " "), el("span", ids, "mono"), el("div", p.detail));
  return li;
}

function bindReports() {
  $("best-form").addEventListener("submit", loadBest);
  $("visitors-form").addEventListener("submit", loadVisitors);
  $("store-form").addEventListener("submit", saveStore);
  $("nearby-form").addEventListener("submit", findStores);
  $("stores-all").addEventListener("click", () => listStores());
  $("stores-more").addEventListener("click", () => listStores(true));
  $("audit-run").addEventListener("click", runAudit);
}
