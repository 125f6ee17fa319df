// A sale round that is a draw, on the console's sale page: its state and
// the countdown to the close, the entries (paged), Close now, and once
// drawn the winners and the fairness data anyone can check them with.
"use strict";

const drawWords = { upcoming: "upcoming", open: "open", closed: "drawing", drawn: "drawn" };
let drawCursor = null;
let drawShown = null; // the public draw answer shown
let drawTimer = null; // the next read while not drawn
let drawTick = null; // the countdown's second

// showDraw shows the draw of the report's round (rep.draw), or hides the
// card for a round that is not one. While the draw is not drawn it is
// read again every few seconds, and the entries with it when their count
// or the state moved.
async function showDraw(rep) {
  clearTimeout(drawTimer);
  $("draw-card").hidden = !rep.draw;
  if (!rep.draw) { drawShown = null; return; }
  const before = drawShown;
  const d = await api("GET", "/products/" + enc(saleSku) + "/draw");
  drawShown = d;
  drawFacts(d, rep.draw);
  // The whole draw's progress rides on every page of the entries; a page
  // of one reads it each refresh, so the cancels are seen draining.
  const first = await api("GET", "/admin/products/" + enc(saleSku) + "/draw/entries?limit=1");
  drawProgress(first.progress);
  if (!before || before.round_id !== d.round_id || before.state !== d.state || before.entries !== d.entries) {
    drawCursor = null;
    $("draw-winners").replaceChildren();
    $("draw-entries").replaceChildren();
    await moreDrawEntries();
  }
  if ($("view-sale").hidden) return; // the admin moved on meanwhile
  leave = () => { clearTimeout(drawTimer); clearInterval(drawTick); drawTick = null; };
  if (!drawTick) drawTick = setInterval(drawCountdown, 1000);
  if (d.state !== "drawn") drawTimer = setTimeout(refreshDraw, 5000);
}

// drawFacts fills the facts list: the public answer (d) with the stock
// report's winners count (r).
function drawFacts(d, r) {
  const dl = $("draw-facts");
  dl.replaceChildren();
  dl.dataset.state = d.state;
  const row = (label, value, key, cls) => { const dd = el("dd", value, cls); dd.dataset.key = key; dl.append(el("dt", label), dd); };
  row("State", drawWords[d.state] || d.state, "state");
  row("Entries close", when(d.closes_at), "closes_at");
  row("Time left", "", "countdown");
  row("Units", count(d.units), "units");
  row("Entries", count(d.entries), "entries");
  row("Winners", d.state === "drawn" ? count(r.winners) : "after the draw", "winners");
  row("Seed SHA-256", d.seed_sha256, "seed_sha256", "mono");
  row("Seed", d.seed || "published once drawn", "seed", "mono");
  row("Winners SHA-256", d.winners_sha256 || "published once drawn", "winners_sha256", "mono");
  $("draw-close").hidden = d.state !== "open" && d.state !== "upcoming";
  $("draw-close").disabled = false;
  drawCountdown();
}

// drawProgress adds the draw's progress to the facts: the entries by
// state, the cents captured and the holds released and left to release.
function drawProgress(p) {
  const dl = $("draw-facts");
  const row = (label, value, key) => { const dd = el("dd", value); dd.dataset.key = key; dl.append(el("dt", label), dd); };
  const states = ["entered", "authorizing", "won", "lost", "failed", "withdrawn"].filter((k) => p[k] > 0);
  row("By state", states.map((k) => count(p[k]) + " " + k).join(", ") || "no entries", "by_state");
  row("Captured", money(p.captured_cents), "captured");
  row("Holds released", count(p.cancelled) + " released, " + count(p.cancels_left) + " left", "cancels");
}

function drawCountdown() {
  const dd = document.querySelector('#draw-facts dd[data-key="countdown"]');
  if (!dd || !drawShown) return;
  const left = Date.parse(drawShown.closes_at) - Date.now();
  if (drawShown.state === "drawn") dd.textContent = "closed";
  else if (drawShown.state === "closed" || left <= 0) dd.textContent = "drawing now";
  else dd.textContent = duration(left);
}

// duration says a time left as "2 d 3 h", "4 h 5 min", "6 min 7 s" or "8 s".
function duration(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const units = [[86400, "d"], [3600, "h"], [60, "min"]];
  const i = units.findIndex(([n]) => s >= n);
  if (i < 0) return s + " s";
  const [n, u] = units[i], [m, v] = units[i + 1] || [1, "s"];
  return Math.floor(s / n) + " " + u + " " + Math.floor((s % n) / m) + " " + v;
}

async function refreshDraw() {
  try {
    saleReport = await api("GET", "/admin/products/" + enc(saleSku) + "/stock");
    showReport(saleReport);
    await showDraw(saleReport);
  } catch (err) { fail(err); }
}

async function moreDrawEntries() {
  const button = $("draw-more");
  button.disabled = true;
  try {
    const q = "?limit=100" + (drawCursor ? "&cursor=" + enc(drawCursor) : "");
    const page = await api("GET", "/admin/products/" + enc(saleSku) + "/draw/entries" + q);
    showRows("draw-table", page.items.map(drawEntryRow), true);
    const won = page.items.filter((e) => e.state === "won");
    $("draw-winners").append(...won.map((e) => el("li", `rank ${e.rank}: entry ${e.entry_id}, user ${e.user_id}, ${e.quantity} asked`)));
    $("draw-winners-card").hidden = $("draw-winners").children.length === 0;
    drawCursor = page.next_cursor || null;
    button.hidden = !drawCursor;
  } catch (err) { fail(err); } finally { button.disabled = false; }
}

function drawEntryRow(e) {
  const tr = el("tr");
  tr.dataset.entry = e.entry_id;
  tr.dataset.state = e.state;
  cell(tr, e.rank === null ? "\u2013" : count(e.rank), "num");
  cell(tr, e.entry_id, "mono");
  cell(tr, e.user_id, "mono");
  cell(tr, count(e.quantity), "num");
  cell(tr, e.state);
  return tr;
}

// closeDraw closes the entries now and runs the draw, once the admin
// confirms: the winners are charged and every other authorisation is
// released.
async function closeDraw() {
  const button = $("draw-close");
  const yes = await ask(`Close the draw of ${saleSku} now? No one can enter or withdraw after this; ` +
    "the winners' payments are captured and every other authorisation is released.", "Close now");
  if (!yes) return say("Nothing changed: the draw stays open.");
  button.disabled = true;
  try {
    const d = await api("POST", "/admin/products/" + enc(saleSku) + "/draw/close");
    say(`The draw of ${saleSku} is ${drawWords[d.state] || d.state}.`);
  } catch (err) { fail(err); }
  await refreshDraw();
}

function bindDraw() {
  $("sale-draw").addEventListener("change", () => { $("sale-draw-fields").hidden = !$("sale-draw").checked; });
  $("draw-close").addEventListener("click", closeDraw);
  $("draw-refresh").addEventListener("click", refreshDraw);
  $("draw-more").addEventListener("click", moreDrawEntries);
}
