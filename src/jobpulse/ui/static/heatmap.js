// A heat map drawn with uPlot (chart.js mounts it): a row per series down, time across, one cell per row and time
// step coloured by its value on the Viridis scale, a colour bar under it. Hovering a cell names its row, time and
// value; a drag across asks for that time range, a click names the row. Its element holds (see chart.js)
// el.data: [{type: "heatmap", name, x: the cells' edges in epoch ms, y: the rows' labels, z: the rows' values}].

import { mount, xAxis } from "./chart.js";
import { fullTime } from "./format.js";
import { css } from "./theme.js";

// Viridis at 0, 0.1, … 1
const VIRIDIS = ["#440154", "#482475", "#414487", "#355f8d", "#2a788e", "#21918c", "#22a884", "#44bf70", "#7ad151",
  "#bddf26", "#fde725"].map((hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)));

// The colour of `t` in [0, 1] on the scale.
export function viridis(t) {
  const at = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(at));
  const f = at - i;
  const [r, g, b] = VIRIDIS[i].map((c, k) => Math.round(c + (VIRIDIS[i + 1][k] - c) * f));
  return `rgb(${r},${g},${b})`;
}

function extent(z, zmin, zmax) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const row of z) for (const v of row) if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  lo = zmin ?? (lo === Infinity ? 0 : lo);
  hi = zmax ?? (hi === -Infinity ? 1 : hi);
  return [lo, hi > lo ? hi : lo + 1];
}

function drawCells(u, spec, [lo, hi]) {
  const { ctx } = u;
  const n = spec.z.length;
  const gap = spec.gap ? devicePixelRatio : 0;
  ctx.save();
  ctx.beginPath();
  ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
  ctx.clip();
  spec.z.forEach((row, i) => {
    const top = u.valToPos(n - i, "y", true);
    const bottom = u.valToPos(n - i - 1, "y", true);
    row.forEach((v, c) => {
      if (v === null) return;
      const left = u.valToPos(spec.start + c * spec.step, "x", true);
      const right = u.valToPos(spec.start + (c + 1) * spec.step, "x", true);
      ctx.fillStyle = viridis((v - lo) / (hi - lo));
      ctx.fillRect(left, top, Math.max(1, right - left), Math.max(1, bottom - top - gap));
    });
  });
  ctx.restore();
}

function colorBar(range, spec) {
  const bar = document.createElement("div");
  bar.className = "colorbar";
  const ramp = document.createElement("span");
  ramp.className = "ramp";
  ramp.style.background = `linear-gradient(to right, ${VIRIDIS.map((_, i) => viridis(i / 10)).join(", ")})`;
  const label = (text) => Object.assign(document.createElement("span"), { textContent: text });
  bar.append(label(spec.format(range[0])), ramp, label(spec.format(range[1])));
  return bar;
}

// The row (index into spec.z) at `top` pixels in the plot, or -1.
function rowAt(u, n, top) {
  const row = Math.floor(n - u.posToVal(top, "y"));
  return row >= 0 && row < n ? row : -1;
}

// Draws `spec` in `el`: {name, start, step (ms), z: rows of values (null: none), labels, ticks: [{row, text}],
// zmin, zmax, gap, xRange, format(v), marks, onZoom, onReset, onRow(i)}.
export function drawHeatmap(el, spec) {
  const n = spec.z.length;
  const range = extent(spec.z, spec.zmin, spec.zmax);
  const cols = spec.z[0] ? spec.z[0].length : 0;
  const edges = Array.from({ length: cols + 1 }, (_, i) => spec.start + i * spec.step);
  const style = { stroke: css("--muted"), font: `11px ${css("--font")}`, grid: { show: false },
    ticks: { stroke: css("--border-strong"), width: 1, size: 4 } };
  const widest = Math.max(0, ...spec.ticks.map((t) => t.text.length));
  const opts = {
    scales: { x: { time: true, auto: false, range: () => spec.xRange }, y: { auto: false, range: () => [0, n] } },
    axes: [xAxis(el, true, style), { ...style, size: 14 + 6.4 * widest, gap: 4,
      splits: () => spec.ticks.map((t) => n - t.row - 0.5), values: () => spec.ticks.map((t) => t.text) }],
    series: [{}, { label: spec.name, stroke: "transparent", points: { show: false },
      paths: (u) => { drawCells(u, spec, range); return null; } }],
    legend: { show: false },
    cursor: { points: { show: false }, y: true },
  };
  const tip = (u, left, top) => {
    const row = rowAt(u, n, top);
    const col = Math.floor((u.posToVal(left, "x") - spec.start) / spec.step);
    const v = row >= 0 && col >= 0 && col < cols ? spec.z[row][col] : null;
    if (v === null) return null;
    return `${spec.labels[row]}\n${fullTime(spec.start + col * spec.step).slice(0, 19)}\n${spec.format(v)}`;
  };
  const click = (x, top) => {
    const row = rowAt(el.chart, n, top);
    if (row >= 0 && spec.onRow) spec.onRow(row);
  };
  mount(el, opts, [edges, edges.map(() => 0)], { marks: spec.marks, after: colorBar(range, spec),
    on: { zoom: spec.onZoom, reset: spec.onReset, click, tip } });
  el.data = [{ type: "heatmap", name: spec.name, x: edges, y: spec.labels, z: spec.z }];
  el.dataset.axis = "time";
}
