// The status page: polls status.json and draws its samples as plain SVG line charts.
// No libraries and nothing fetched from elsewhere. A token, if the endpoint needs one,
// is read from the URL fragment (#token=...), which the browser never sends to a server.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 600, HEIGHT = 170, LEFT = 52, RIGHT = 8, TOP = 8, BOTTOM = 20;
const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d"];

function token() {
  const match = /(?:^|[#&])token=([^&]*)/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

function el(name, attrs, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (parent) parent.appendChild(node);
  return node;
}

function human(value, unit) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  const abs = Math.abs(value);
  if (unit === "bytes") {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = value, i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
    return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + " " + units[i];
  }
  if (abs >= 1e6) return (value / 1e6).toFixed(1) + "M";
  if (abs >= 1e4) return (value / 1e3).toFixed(1) + "k";
  if (abs >= 100 || Number.isInteger(value)) return value.toFixed(0);
  return value.toFixed(2);
}

// The y axis: TICKS steps of a round size from zero to at least the largest value: 1, 2
// or 5 times a power of ten; a power of two for bytes (512 B, 1 MiB); counts ("count")
// never step below 1.
const TICKS = 4;
function niceStep(raw) {
  const power = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map(f => f * power).find(step => step >= raw * (1 - 1e-9));
}
function roundStep(top, unit) {
  const raw = top / TICKS;
  if (unit === "bytes") return 2 ** Math.max(0, Math.ceil(Math.log2(raw)));
  const step = niceStep(raw);
  return unit === "count" ? Math.max(1, Math.ceil(step)) : step;
}

// a tick's label: as few digits as the round value needs (0.5, 20k, 2 MiB)
function tickLabel(value, unit) {
  if (unit === "bytes") return human(value, unit).replace(/\.0 /, " ");
  const abs = Math.abs(value);
  if (abs >= 1e6) return `${+(value / 1e6).toPrecision(6)}M`;
  if (abs >= 1e4) return `${+(value / 1e3).toPrecision(6)}k`;
  return String(+value.toPrecision(6));
}

// series: [{name, points: [[t, v|null], ...]}]; returns the number of points drawn
function drawChart(figure, series, unit, window) {
  const old = figure.querySelector("svg");
  if (old) old.remove();
  const oldLegend = figure.querySelector(".legend");
  if (oldLegend) oldLegend.remove();
  const svg = el("svg", {class: "chart", viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
                         preserveAspectRatio: "none", role: "img"});
  figure.appendChild(svg);
  const times = series.flatMap(s => s.points.map(p => p[0]));
  const values = series.flatMap(s => s.points.map(p => p[1]).filter(v => v !== null));
  const tMax = times.length ? Math.max(...times) : 0;
  const tMin = times.length ? Math.max(Math.min(...times), tMax - window) : 0;
  const top = Math.max(0, ...values);
  const step = roundStep(top > 0 ? top : 1, unit);  // an empty or all-zero chart: 0 to 1
  const vMax = step * TICKS;
  const x = t => LEFT + (tMax > tMin ? (t - tMin) / (tMax - tMin) : 1) * (WIDTH - LEFT - RIGHT);
  const y = v => HEIGHT - BOTTOM - (v / vMax) * (HEIGHT - TOP - BOTTOM);
  for (let i = 0; i <= TICKS; i += 1) {
    const v = step * i;
    el("line", {class: "gridline", x1: LEFT, x2: WIDTH - RIGHT, y1: y(v), y2: y(v)}, svg);
    el("text", {x: LEFT - 4, y: y(v) + 3, "text-anchor": "end"}, svg).textContent = tickLabel(v, unit);
  }
  el("line", {class: "axis", x1: LEFT, x2: LEFT, y1: TOP, y2: HEIGHT - BOTTOM}, svg);
  el("line", {class: "axis", x1: LEFT, x2: WIDTH - RIGHT, y1: HEIGHT - BOTTOM, y2: HEIGHT - BOTTOM}, svg);
  const span = Math.round(tMax - tMin);
  el("text", {x: LEFT, y: HEIGHT - 6}, svg).textContent = `-${span}s`;
  el("text", {x: WIDTH - RIGHT, y: HEIGHT - 6, "text-anchor": "end"}, svg).textContent = "now";
  let drawn = 0;
  const legend = document.createElement("div");
  legend.className = "legend";
  series.forEach((s, index) => {
    const color = COLORS[index % COLORS.length];
    let d = "", pen = "M", count = 0;
    for (const [t, v] of s.points) {
      if (t < tMin) continue;
      if (v === null || v === undefined) { pen = "M"; continue; }
      d += `${pen}${x(t).toFixed(1)},${y(v).toFixed(1)} `;
      pen = "L";
      count += 1;
    }
    if (count === 1) d += `h1`;  // a lone point still shows
    el("path", {class: "series", d: d.trim(), stroke: color, "data-series": s.name,
                "data-points": count}, svg);
    drawn += count;
    const item = document.createElement("span");
    const swatch = document.createElement("i");
    swatch.style.background = color;
    item.appendChild(swatch);
    const last = s.points.length ? s.points[s.points.length - 1][1] : null;
    item.appendChild(document.createTextNode(`${s.name}: ${human(last, unit)}`));
    legend.appendChild(item);
  });
  svg.setAttribute("data-points", String(drawn));
  figure.setAttribute("data-points", String(drawn));
  figure.appendChild(legend);
  return drawn;
}

function column(samples, key) {
  return samples.map(s => [s.t, s[key] === undefined ? null : s[key]]);
}

// the background reconcile's last run (cdc run with a reconcile: section), if any
function renderReconcile(last) {
  const box = document.getElementById("reconcile");
  box.hidden = !last;
  if (!last) return;
  const when = new Date(last.at * 1000).toLocaleString();
  box.textContent = last.finished ? `last reconcile, ${when}: ${last.summary}`
    : `last reconcile, ${when}: could not finish (see the log)`;
}

function render(status) {
  renderReconcile(status.reconcile);
  const samples = status.samples || [];
  const window = status.window_s || 600;
  const health = document.getElementById("health");
  health.textContent = status.ready ? "ready" : "not ready";
  health.className = status.ready ? "ready" : "not-ready";
  const reasons = document.getElementById("reasons");
  reasons.replaceChildren(...((status.health && status.health.reasons) || []).map(text => {
    const li = document.createElement("li");
    li.textContent = text;
    return li;
  }));
  document.getElementById("updated").textContent =
    `${samples.length} samples, every ${status.interval_s}s`;
  drawChart(document.getElementById("throughput"),
            [{name: "events/s", points: column(samples, "events_per_s")}], "", window);
  drawChart(document.getElementById("capture-lag"),
            [{name: "lag", points: column(samples, "lag_seconds")}], "s", window);
  drawChart(document.getElementById("wal"),
            [{name: "capture lag", points: column(samples, "lag_bytes")},
             {name: "slot retained WAL", points: column(samples, "retained_bytes")}],
            "bytes", window);
  const names = [...new Set(samples.flatMap(s => Object.keys(s.connector_lag || {})))].sort();
  drawChart(document.getElementById("connector-lag"),
            names.map(name => ({name, points: samples.map(s => [s.t,
              s.connector_lag && name in s.connector_lag ? s.connector_lag[name] : null])})),
            "count", window);
  const body = document.querySelector("#topics tbody");
  body.replaceChildren(...Object.entries(status.topics || {}).sort().map(([topic, count]) => {
    const row = document.createElement("tr");
    const name = document.createElement("td");
    name.textContent = topic;
    const value = document.createElement("td");
    value.className = "n";
    value.textContent = String(count);
    row.append(name, value);
    return row;
  }));
}

let interval = 2000;

async function poll() {
  const headers = {};
  const secret = token();
  if (secret) headers.Authorization = `Bearer ${secret}`;
  const error = document.getElementById("error");
  try {
    const response = await fetch("status.json", {headers, cache: "no-store"});
    if (response.status === 401) {
      error.textContent = "This endpoint needs its token: open the page as …/#token=<metrics.token>.";
    } else if (!response.ok) {
      error.textContent = `status.json answered ${response.status}`;
    } else {
      const status = await response.json();
      interval = Math.max(1000, (status.interval_s || 2) * 1000);
      error.textContent = "";
      render(status);
    }
  } catch (exc) {
    error.textContent = `cannot reach the endpoint: ${exc}`;
  }
  setTimeout(poll, interval);
}

poll();
