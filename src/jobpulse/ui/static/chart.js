// Line charts drawn with uPlot (from npm, built into the package: see web-assets/). A chart is a list of series,
// each with its own x values (steps, or epoch milliseconds shown in the viewer's local time), drawn on one x axis;
// a series with `fill` shades the band between it and the series before it. Dragging across a chart asks for
// that x-range (onZoom), a double-click for the whole (onReset), a click names the x value under the mouse
// (onClick); the legend under the plot shows each named series' value under the cursor.
//
// A drawn chart's element holds what it shows, for whoever reads the page (the tests among them):
//   el.data   the series as given: [{name, x, y, …}] (a heat map: [{type: "heatmap", x, y, z}])
//   el.marks  the job's findings drawn on it: {spans: [[start, end]], text: [...]} (see marks.js)
//   el.chart  the uPlot instance; el.dataset.axis "time" or "linear"; el.dataset.xTicks the x axis's labels

import uPlot from "./third-party/uPlot.esm.js";
import { clock, fullTime, num } from "./format.js";
import { drawMarks, markTip, marksSummary } from "./marks.js";
import { css } from "./theme.js";

const DASHES = { solid: null, dash: [6, 4], dot: [2, 3], dashdot: [6, 3, 2, 3], longdash: [10, 4] };
const CLICK_SLOP = 4; // pixels the mouse may move between press and release for a click, not a drag
const MINUTE = 60000;
const DAY = 24 * 60 * MINUTE;
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

// -- mounting: any uPlot chart in a chart element -----------------------------------------------------

const mounted = new WeakMap(); // element -> {u, resize}

function axisStyle() {
  return { stroke: css("--muted"), font: `11px ${css("--font")}`, labelFont: `11px ${css("--font")}`,
    grid: { stroke: css("--border"), width: 1 }, ticks: { stroke: css("--border-strong"), width: 1, size: 5 } };
}

// Tick labels of a time axis whose ticks are `incr` ms apart: the clock to the minute or second the step needs,
// and the date under the first tick of each day (a step of days: the date alone).
function timeTicks(splits, incr) {
  let day = "";
  return splits.map((v) => {
    const d = new Date(v);
    const date = `${MONTHS[d.getMonth()]} ${d.getDate()}`;
    if (incr >= DAY) return date;
    let text = incr >= MINUTE ? clock(v).slice(0, 5) : clock(v);
    if (date !== day) { day = date; text += `\n${date}`; }
    return text;
  });
}

// The x axis of a chart in `el`: steps, or times in the viewer's local time; its labels go to el.dataset.xTicks.
export function xAxis(el, time, style) {
  const values = (u, splits, ai, space, incr) => {
    const labels = time ? timeTicks(splits, incr) : splits.map((v) => num(v));
    el.dataset.xTicks = JSON.stringify(labels);
    return labels;
  };
  return { ...style, space: 70, values };
}

// The plot's height that fills `el` with what uPlot puts around it (the legend, a colour bar).
function fitHeight(el, u) {
  const around = u.root.offsetHeight - u.root.querySelector(".u-wrap").offsetHeight;
  return Math.max(80, el.clientHeight - around);
}

function tipElement(el) {
  return el.querySelector(":scope > .chart-tip") || el.appendChild(Object.assign(document.createElement("div"),
    { className: "chart-tip", hidden: true }));
}

// Shows `tip(u, left, top)` (text, or null for none) next to the cursor.
function followTip(el, tip) {
  return (u) => {
    const box = tipElement(el);
    const { left, top } = u.cursor;
    const text = left >= 0 && tip ? tip(u, left, top) : null;
    box.hidden = !text;
    if (!text) return;
    box.textContent = text;
    const over = u.over.getBoundingClientRect();
    const host = el.getBoundingClientRect();
    const x = over.left - host.left + left;
    box.style.left = `${Math.min(x + 12, host.width - box.offsetWidth - 4)}px`;
    box.style.top = `${over.top - host.top + top + 14}px`;
  };
}

function zoomOnSelect(onZoom) {
  return (u) => {
    const { left, width } = u.select;
    if (width < 2) return;
    u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
    if (onZoom) onZoom(u.posToVal(left, "x"), u.posToVal(left + width, "x"));
  };
}

function bindClick(u, onClick) {
  let down = null;
  u.over.addEventListener("mousedown", (e) => { down = e.clientX; });
  u.over.addEventListener("click", (e) => {
    if (down === null || Math.abs(e.clientX - down) > CLICK_SLOP || u.cursor.left < 0) return;
    onClick(u.posToVal(u.cursor.left, "x"), u.cursor.top);
  });
}

// Draws the uPlot chart of `opts` and `data` in `el`, in place of the one there; answers the uPlot instance.
// `on`: {zoom(lo, hi), reset(), click(x, top), tip(u, left, top)}; `marks` (marks.js) are drawn over the data.
// `hidden`: series (uPlot's indices) left out of the legend; `after`: an element to show under the plot.
export function mount(el, opts, data, { on = {}, marks = null, hidden = [], after = null } = {}) {
  unmount(el);
  el.querySelector(":scope > .chart-state, :scope > .skeleton")?.remove();
  const width = Math.max(160, el.clientWidth);
  const hooks = { ...(opts.hooks || {}) };
  const add = (name, fn) => { hooks[name] = [...(hooks[name] || []), fn]; };
  add("setSelect", zoomOnSelect(on.zoom));
  if (marks) {
    add("drawClear", (u) => drawMarks(u, marks, "below"));
    add("draw", (u) => drawMarks(u, marks, "above"));
  }
  const tip = (u, left, top) => (marks && markTip(u, marks, left, top)) || (on.tip ? on.tip(u, left, top) : null);
  add("setCursor", followTip(el, tip));
  const cursor = { drag: { x: true, y: false, setScale: false }, ...(opts.cursor || {}),
    bind: { dblclick: () => () => { if (on.reset) on.reset(); return null; } } };
  const u = new uPlot({ ...opts, width, height: Math.max(80, el.clientHeight - 24), ms: 1, cursor, hooks }, data, el);
  const rows = u.root.querySelectorAll(".u-legend .u-series");
  for (const i of hidden) if (rows[i]) rows[i].style.display = "none";
  if (after) u.root.append(after);
  u.setSize({ width, height: fitHeight(el, u) });
  if (on.click) bindClick(u, on.click);
  const resize = new ResizeObserver(() => {
    const w = Math.max(160, el.clientWidth);
    if (w !== u.width) u.setSize({ width: w, height: fitHeight(el, u) });
  });
  resize.observe(el);
  mounted.set(el, { u, resize });
  el.chart = u;
  el.marks = marksSummary(marks);
  el.classList.add("drawn");
  return u;
}

// Removes the chart drawn in `el`, if any.
export function unmount(el) {
  const found = mounted.get(el);
  if (!found) return;
  found.resize.disconnect();
  found.u.destroy();
  el.querySelector(":scope > .chart-tip")?.remove();
  mounted.delete(el);
  el.classList.remove("drawn");
  el.chart = null;
}

// -- line charts ----------------------------------------------------------------------------------

function sameX(series) {
  const first = series[0].x;
  return series.every((s) => s.x === first || (s.x.length === first.length && s.x.every((v, i) => v === first[i])));
}

// uPlot's table: one x column for all series (the union of theirs where they differ, a series left without a
// value where it has none), and for each series the index of its own point at a row of the table.
function table(series) {
  if (sameX(series)) return { data: [series[0].x, ...series.map((s) => s.y)], own: (si, row) => row };
  const data = uPlot.join(series.map((s) => [s.x, s.y]));
  const at = series.map((s) => new Map(s.x.map((x, j) => [x, j])));
  return { data, own: (si, row) => at[si].get(data[0][row]) };
}

function seriesOpts(s, si, own, yFormat) {
  const value = (u, v, _, row) => {
    if (v === null || v === undefined) return "–";
    const j = own(si, row);
    return s.detail && j !== undefined ? `${yFormat(v)} ${s.detail(j)}` : yFormat(v);
  };
  return { label: s.name, stroke: s.width === 0 ? "transparent" : s.color, width: s.width ?? 1.7,
    dash: DASHES[s.dash || "solid"] || undefined, points: { show: Boolean(s.points), size: 5, fill: s.color },
    value };
}

function yRange(y) {
  if (y.range) return () => y.range;
  if (!y.zero) return undefined;
  return (u, lo, hi) => (lo === null || hi === null ? [0, 1]
    : uPlot.rangeNum(Math.min(0, lo), Math.max(hi, 0), 0.1, true));
}

// Draws `spec` in `el`: {series: [{name, x, y, color, width, dash, points, fill, legend, detail(j)}], time,
// xRange, y: {range, zero, format, label}, legend, marks, onZoom, onReset, onClick}. Answers the uPlot instance.
export function drawChart(el, spec) {
  const series = spec.series;
  const { data, own } = table(series);
  const y = spec.y || {};
  const yFormat = y.format || ((v) => num(v));
  const xFormat = spec.time ? (v) => fullTime(v).slice(0, 19) : (v) => num(v); // to the second
  const bands = [];
  series.forEach((s, i) => { if (s.fill && i > 0) bands.push({ series: [i, i + 1], fill: s.fill }); });
  const axis = axisStyle();
  const opts = {
    scales: { x: { time: Boolean(spec.time), ...(spec.xRange ? { auto: false, range: () => spec.xRange } : {}) },
      y: { range: yRange(y) } },
    axes: [xAxis(el, spec.time, axis), { ...axis, size: 58, label: y.label, labelSize: y.label ? 16 : 0,
      values: (u, splits) => splits.map((v) => (y.tick ? y.tick(v) : yFormat(v))) }],
    series: [{ label: spec.time ? "Time" : "Step", value: (u, v) => (v == null ? "–" : xFormat(v)) },
      ...series.map((s, i) => seriesOpts(s, i, own, yFormat))],
    bands,
    legend: { show: spec.legend !== false, live: true },
  };
  const hidden = series.flatMap((s, i) => (s.legend === false ? [i + 1] : []));
  const u = mount(el, opts, data, { marks: spec.marks, hidden,
    on: { zoom: spec.onZoom, reset: spec.onReset, click: spec.onClick } });
  el.data = series;
  el.dataset.axis = spec.time ? "time" : "linear";
  return u;
}

// Marks the benchmark and tests read: the first chart drawn on the page, which is also the first interactive
// one (uPlot draws a chart whole, at once).
export function markFirstChart() {
  if (window.__jpFirstChart) return;
  window.__jpFirstChart = window.__jpChartInteractive = performance.now();
  performance.mark("jp-first-chart");
  performance.mark("jp-chart-interactive");
}
