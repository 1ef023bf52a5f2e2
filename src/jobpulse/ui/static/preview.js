// A chart's first paint while Plotly.js is still loading: the traces and layout the Plotly chart will
// get (lines, min/max bands filled "tonexty", markers, the legend, vertical marker lines) drawn on a
// canvas laid over the chart's own box. The plot box, axes and legend are laid out as Plotly lays them
// out (frame.js), so the interactive chart that replaces the preview draws the same picture in the
// same place. The canvas tells what it drew in data attributes:
// data-points (points of the named series), data-series, and data-axes (ranges, tick labels, plot box).

import { finite } from "./axes.js";
import { fit, fontOf, LINE_SPACING, MID_SHIFT, TICK_LEN } from "./frame.js";
import { ITEM } from "./legend.js";

const previews = new WeakMap(); // canvas -> {traces, layout, observer}

export function drawPreview(box, traces, layout) {
  let canvas = box.querySelector(":scope > canvas.chart-preview");
  if (!canvas) {
    canvas = document.createElement("canvas");
    canvas.className = "chart-preview";
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", "Chart preview");
    box.append(canvas);
    const observer = new ResizeObserver(() => paint(canvas));
    observer.observe(box);
    previews.set(canvas, { observer });
  }
  Object.assign(previews.get(canvas), { traces, layout });
  paint(canvas);
  return canvas;
}

export function removePreview(box) {
  const canvas = box.querySelector(":scope > canvas.chart-preview");
  if (!canvas) return;
  previews.get(canvas)?.observer.disconnect();
  previews.delete(canvas);
  canvas.remove();
}

export const hasPreview = (box) => Boolean(box.querySelector(":scope > canvas.chart-preview"));

// -- drawing -----------------------------------------------------------------------------------

// A line of `width` CSS pixels on whole device pixels, as Plotly's crisp lines are.
function crisp(v, width, dpr) {
  const device = Math.max(1, Math.round(width * dpr));
  return (device % 2 ? Math.round(v * dpr - 0.5) + 0.5 : Math.round(v * dpr)) / dpr;
}

// Plotly's dash patterns, scaled by the line width.
function dashOf(dash, width) {
  const d = Math.max(width, 3);
  return { dot: [d, d], dash: [3 * d, 3 * d], longdash: [5 * d, 5 * d], dashdot: [3 * d, d, d, d],
    longdashdot: [5 * d, 2 * d, d, 2 * d] }[dash] || [];
}

// Runs of consecutive points where both coordinates are numbers: a null value is a gap.
function runs(xs, ys, ok = () => true) {
  const out = [];
  let run = [];
  for (let i = 0; i < xs.length; i += 1) {
    if (finite(xs[i]) && finite(ys[i]) && ok(i)) run.push(i);
    else if (run.length) { out.push(run); run = []; }
  }
  if (run.length) out.push(run);
  return out;
}

function fillBetween(ctx, upper, lower, px, py) {
  ctx.fillStyle = lower.fillcolor || "rgba(0,0,0,0.1)";
  const same = upper.x.length === lower.x.length;
  const pieces = same ? runs(lower.x, lower.y, (i) => finite(upper.y[i])) : [null];
  for (const run of pieces) {
    const top = run || upper.x.map((_, i) => i).filter((i) => finite(upper.x[i]) && finite(upper.y[i]));
    const bottom = run || lower.x.map((_, i) => i).filter((i) => finite(lower.x[i]) && finite(lower.y[i]));
    if (top.length + bottom.length < 3) continue;
    ctx.beginPath();
    top.forEach((i, k) => (k ? ctx.lineTo : ctx.moveTo).call(ctx, px(upper.x[i]), py(upper.y[i])));
    for (let k = bottom.length - 1; k >= 0; k -= 1) ctx.lineTo(px(lower.x[bottom[k]]), py(lower.y[bottom[k]]));
    ctx.closePath();
    ctx.fill();
  }
}

function strokeTrace(ctx, trace, px, py) {
  const line = trace.line || {};
  const width = line.width ?? 2;
  if (!(trace.mode || "lines").includes("lines") || width <= 0) return;
  ctx.strokeStyle = line.color || "#1f77b4";
  ctx.lineWidth = width;
  ctx.setLineDash(dashOf(line.dash, width));
  for (const run of runs(trace.x, trace.y)) {
    if (run.length < 2) continue;
    ctx.beginPath();
    run.forEach((i, k) => (k ? ctx.lineTo : ctx.moveTo).call(ctx, px(trace.x[i]), py(trace.y[i])));
    ctx.stroke();
  }
  ctx.setLineDash([]);
}

function markTrace(ctx, trace, px, py) {
  if (!(trace.mode || "").includes("markers")) return;
  const radius = (trace.marker?.size ?? 6) / 2;
  ctx.fillStyle = trace.marker?.color || trace.line?.color || "#1f77b4";
  for (let i = 0; i < trace.x.length; i += 1) {
    if (!finite(trace.x[i]) || !finite(trace.y[i])) continue;
    ctx.beginPath();
    ctx.arc(px(trace.x[i]), py(trace.y[i]), radius, 0, 2 * Math.PI);
    ctx.fill();
  }
}

function drawGrid(ctx, g, dpr) {
  const { m, x, y, w, h } = g;
  const inside = (p, lo, len) => p > lo + 1 && p < lo + len - 1; // Plotly leaves out lines on the edges
  ctx.lineWidth = 1;
  ctx.strokeStyle = x.spec.gridcolor || "#eee";
  for (const tick of x.ticks) {
    const p = x.px(tick.value);
    if (!inside(p, m.l, w)) continue;
    const c = crisp(p, 1, dpr);
    ctx.beginPath(); ctx.moveTo(c, m.t); ctx.lineTo(c, m.t + h); ctx.stroke();
  }
  ctx.strokeStyle = y.spec.gridcolor || "#eee";
  for (const tick of y.ticks) {
    const p = y.py(tick.value);
    if (!inside(p, m.t, h)) continue;
    const c = crisp(p, 1, dpr);
    ctx.beginPath(); ctx.moveTo(m.l, c); ctx.lineTo(m.l + w, c); ctx.stroke();
  }
  if (showZero(y, y.py(0) - m.t, h, g.traces, "y")) {
    ctx.strokeStyle = y.spec.zerolinecolor || "#444";
    const c = crisp(y.py(0), 1, dpr);
    ctx.beginPath(); ctx.moveTo(m.l, c); ctx.lineTo(m.l + w, c); ctx.stroke();
  }
  if (showZero(x, x.px(0) - m.l, w, g.traces, "x")) {
    ctx.strokeStyle = x.spec.zerolinecolor || "#444";
    const c = crisp(x.px(0), 1, dpr);
    ctx.beginPath(); ctx.moveTo(c, m.t); ctx.lineTo(c, m.t + h); ctx.stroke();
  }
}

// Plotly's rule: zero in the range of a linear axis, and either clear of the plot's edges, or not on
// the other axis's line (which runs along the start of this one), or filled to along this axis.
function showZero(axis, p, length, traces, key) {
  if (axis.isDate || axis.spec.zeroline === false || !(axis.range[0] * axis.range[1] <= 0)) return false;
  if (p > 1 && p < length - 1) return true;
  const onLine = Math.abs(axis.range[0]) < Math.abs(axis.range[1]) && axis.spec.showline !== false;
  return !onLine || traces.some((t) => typeof t.fill === "string" && t.fill.endsWith(key));
}

// Axis lines along the bottom and the left of the plot (an axis with a line colour shows its line).
function drawAxisLines(ctx, g, dpr) {
  const { m, x, y, w, h } = g;
  ctx.lineWidth = 1;
  if (x.spec.showline ?? Boolean(x.spec.linecolor)) {
    ctx.strokeStyle = x.spec.linecolor;
    const c = crisp(x.line, 1, dpr);
    ctx.beginPath(); ctx.moveTo(m.l - 1, c); ctx.lineTo(m.l + w, c); ctx.stroke();
  }
  if (y.spec.showline ?? Boolean(y.spec.linecolor)) {
    ctx.strokeStyle = y.spec.linecolor;
    const c = crisp(y.line, 1, dpr);
    ctx.beginPath(); ctx.moveTo(c, m.t); ctx.lineTo(c, m.t + h + 1); ctx.stroke();
  }
}

function drawShapes(ctx, g, layout) {
  const { m, x, h } = g;
  for (const s of layout.shapes || []) {
    if (s.type !== "line" || s.xref !== "x" || s.yref !== "paper" || !finite(s.x0)) continue;
    const p = x.px(s.x0);
    if (p < m.l || p > m.l + g.w) continue;
    const width = s.line?.width ?? 2;
    ctx.strokeStyle = s.line?.color || "#444";
    ctx.lineWidth = width;
    ctx.setLineDash(dashOf(s.line?.dash, width));
    ctx.beginPath();
    ctx.moveTo(p, m.t + h - (s.y0 ?? 0) * h);
    ctx.lineTo(p, m.t + h - (s.y1 ?? 1) * h);
    ctx.stroke();
    ctx.setLineDash([]);
  }
}

// Outside tick marks, from each axis line away from the plot.
function drawTickMarks(ctx, g, dpr) {
  const { x, y } = g;
  ctx.lineWidth = 1;
  if (x.standoff > 0.5) {
    ctx.strokeStyle = x.spec.tickcolor || "#444";
    const len = x.spec.ticklen ?? TICK_LEN;
    for (const tick of x.ticks) {
      const c = crisp(x.px(tick.value), 1, dpr);
      ctx.beginPath(); ctx.moveTo(c, x.line); ctx.lineTo(c, x.line + len); ctx.stroke();
    }
  }
  if (y.standoff > 0.5) {
    ctx.strokeStyle = y.spec.tickcolor || "#444";
    const len = y.spec.ticklen ?? TICK_LEN;
    for (const tick of y.ticks) {
      const c = crisp(y.py(tick.value), 1, dpr);
      ctx.beginPath(); ctx.moveTo(y.line, c); ctx.lineTo(y.line - len, c); ctx.stroke();
    }
  }
}

function drawLabels(ctx, g, font) {
  const { x, y } = g;
  ctx.font = font.css;
  ctx.fillStyle = font.color;
  ctx.textBaseline = "alphabetic";
  ctx.textAlign = "center";
  for (const tick of x.ticks) {
    if (!tick.shown) continue;
    tick.lines.forEach((line, k) => {
      ctx.fillText(line, x.px(tick.value), x.line + x.standoff + font.size + k * LINE_SPACING * font.size);
    });
  }
  ctx.textAlign = "right";
  for (const tick of y.ticks) {
    if (tick.shown) ctx.fillText(tick.text, y.line - y.standoff, y.py(tick.value) + MID_SHIFT * font.size);
  }
}

function drawLegend(ctx, g, font) {
  const { m } = g;
  const legend = g.x.legend;
  if (!legend || !legend.items.length) return;
  const top = m.t - legend.height;
  ctx.save();
  ctx.beginPath();
  ctx.rect(0, top, g.width, legend.height); // a legend taller than that scrolls in Plotly
  ctx.clip();
  ctx.font = font.css;
  ctx.textAlign = "left";
  for (const { trace: t, x, y } of legend.items) {
    const x0 = m.l + x;
    const cy = top + y;
    if ((t.mode || "lines").includes("lines") && (t.line?.width ?? 2) > 0) {
      ctx.strokeStyle = t.line?.color || "#1f77b4";
      ctx.lineWidth = Math.min(t.line?.width ?? 2, 5);
      ctx.setLineDash(dashOf(t.line?.dash, ctx.lineWidth));
      ctx.beginPath(); ctx.moveTo(x0 + 5, cy); ctx.lineTo(x0 + 35, cy); ctx.stroke();
      ctx.setLineDash([]);
    }
    if ((t.mode || "").includes("markers")) {
      ctx.fillStyle = t.marker?.color || t.line?.color || "#1f77b4";
      ctx.beginPath(); ctx.arc(x0 + 20, cy, (t.marker?.size ?? 6) / 2, 0, 2 * Math.PI); ctx.fill();
    }
    ctx.fillStyle = font.color;
    ctx.fillText(String(t.name), x0 + ITEM, cy + MID_SHIFT * font.size);
  }
  ctx.restore();
}

function paint(canvas) {
  const state = previews.get(canvas);
  if (!state || !canvas.isConnected) return;
  const { traces, layout } = state;
  // The size Plotly takes for the chart: the box's computed size, whole pixels.
  const style = getComputedStyle(canvas.parentElement);
  const width = Math.round(parseFloat(style.width) || canvas.parentElement.clientWidth);
  const height = Math.round(parseFloat(style.height) || canvas.parentElement.clientHeight);
  if (!width || !height) return;
  const dpr = window.devicePixelRatio || 1;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, width, height);
  ctx.lineJoin = "miter";
  ctx.miterLimit = 4; // SVG's default, which Plotly's paths use
  const font = fontOf(layout.font);
  const legendFont = fontOf(layout.legend?.font, font);
  const g = { ...fit(ctx, traces, layout, width, height, font, legendFont), traces };
  const { m, x, y, w, h } = g;
  drawGrid(ctx, g, dpr);
  ctx.save();
  ctx.beginPath();
  ctx.rect(m.l, m.t, w, h);
  ctx.clip();
  traces.forEach((trace, i) => {
    if (trace.fill === "tonexty" && i > 0) fillBetween(ctx, traces[i - 1], trace, x.px, y.py);
  });
  for (const trace of traces) strokeTrace(ctx, trace, x.px, y.py);
  for (const trace of traces) markTrace(ctx, trace, x.px, y.py);
  drawShapes(ctx, g, layout);
  ctx.restore();
  drawAxisLines(ctx, g, dpr);
  drawTickMarks(ctx, g, dpr);
  drawLabels(ctx, g, font);
  drawLegend(ctx, g, legendFont);
  const named = traces.filter((t) => t.showlegend !== false);
  canvas.dataset.series = String(named.length);
  canvas.dataset.points = String(named.reduce((n, t) => n + (t.x || []).length, 0));
  canvas.dataset.axes = JSON.stringify({
    x: { type: x.isDate ? "date" : "linear", range: x.range, ticks: x.ticks.map((t) => t.text) },
    y: { type: "linear", range: y.range, ticks: y.ticks.map((t) => t.text) },
    plot: { l: g.size.l, t: g.size.t, w: g.size.w, h: g.size.h }, // Plotly's layout size (see fit)
  });
}
