// Charts of the admin console: inline SVG built node by node. A chart's
// coordinates are the element's own pixels (its viewBox follows its
// width, redrawn on resize), so its labels are as large on a phone as on
// a desktop.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
function svgEl(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// drawn holds each chart's last drawing, to redraw at a new width.
const drawn = new Map();

// chart draws with draw(svg, width, height) in pixel units and keeps it
// for redrawChart.
function chart(svg, height, draw) {
  drawn.set(svg, [height, draw]);
  const width = Math.max(240, Math.round(svg.getBoundingClientRect().width || 600));
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.replaceChildren(...draw(width, height));
}

function redrawCharts() {
  for (const [svg, [height, draw]] of drawn) if (svg.isConnected) chart(svg, height, draw);
}

// note is a chart's sentence in place of its data.
const note = (W, H, text) => svgEl("text", { x: W / 2, y: H / 2, class: "note" }, text);

// drawLine plots [time, value] points of the last two minutes, over the
// time since the first reading while that is shorter (at least 10 s), so
// a new chart is a line across, not a stub; until the readings span two
// seconds it says so rather than show a lone dot.
function drawLine(svg, points) {
  const now = Date.now(), keep = 120000;
  while (points.length > 2 && now - points[1][0] > keep) points.shift();
  chart(svg, 160, (W, H) => {
    const pad = 24, left = 44;
    const nodes = [svgEl("line", { x1: left, y1: H - pad, x2: W - pad, y2: H - pad, class: "axis" })];
    if (!points.length || now - points[0][0] < 2000) {
      const last = points.length ? `: ${count(points[points.length - 1][1])} now` : "";
      return [...nodes, note(W, H / 2 + 12, "Not enough data yet" + last)];
    }
    const span = Math.min(keep, Math.max(10000, now - points[0][0]));
    const max = Math.max(1, ...points.map((p) => p[1]));
    const x = (t) => left + (W - left - pad) * Math.max(0, 1 - (now - t) / span);
    const y = (v) => H - pad - (H - 2 * pad) * v / max;
    let d = "";
    points.forEach(([t, v], i) => { d += (i ? " L" : "M") + x(t).toFixed(1) + " " + y(v).toFixed(1); });
    d += " H" + x(now).toFixed(1);
    const ago = span >= keep ? "2 min ago" : Math.round(span / 1000) + " s ago";
    return [...nodes,
      svgEl("text", { x: left - 6, y: pad + 4, class: "tick end" }, count(max)),
      svgEl("text", { x: left - 6, y: H - pad, class: "tick end" }, "0"),
      svgEl("text", { x: left, y: H - 6, class: "tick" }, ago),
      svgEl("text", { x: W - pad, y: H - 6, class: "tick end" }, "now"),
      svgEl("path", { d, class: "line" })];
  });
}

// drawBars draws bars per item: series are [key, css class, words] and
// label(item) names an item under its bars. With every value zero it
// says so over the axis.
function drawBars(svg, items, series, label, empty) {
  chart(svg, 200, (W, H) => {
    const left = 44, bottom = 28, top = 14, right = 8;
    const max = Math.max(1, ...items.flatMap((d) => series.map(([k]) => d[k])));
    const step = (W - left - right) / Math.max(1, items.length);
    const bw = Math.max(1, Math.min(48, step * 0.8 / series.length));
    const y = (v) => H - bottom - (H - bottom - top) * v / max;
    const nodes = [
      svgEl("line", { x1: left, y1: H - bottom, x2: W - right, y2: H - bottom, class: "axis" }),
      svgEl("text", { x: left - 6, y: top + 4, class: "tick end" }, count(max)),
      svgEl("text", { x: left - 6, y: H - bottom, class: "tick end" }, "0"),
    ];
    const every = Math.ceil(items.length / Math.max(1, Math.floor((W - left) / 56)));
    items.forEach((d, i) => {
      const x0 = left + i * step + (step - bw * series.length) / 2;
      series.forEach(([k, cls, words], j) => {
        const r = svgEl("rect", { x: (x0 + j * bw).toFixed(1), y: y(d[k]).toFixed(1), width: bw.toFixed(1), height: (H - bottom - y(d[k])).toFixed(1), class: cls });
        r.append(svgEl("title", {}, `${label(d)}: ${count(d[k])} ${words}`));
        nodes.push(r);
      });
      if (i % every === 0) nodes.push(svgEl("text", { x: (x0 + bw * series.length / 2).toFixed(1), y: H - 8, class: "tick mid" }, label(d)));
    });
    if (empty && items.every((d) => series.every(([k]) => !d[k]))) nodes.push(note(W, (H - bottom) / 2 + 6, empty));
    return nodes;
  });
}
