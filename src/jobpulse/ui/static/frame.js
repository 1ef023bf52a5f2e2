// The frame of a chart drawn without Plotly.js (preview.js): the plot box and both axes as Plotly lays
// them out for the same layout and traces. Ranges and ticks come from axes.js, the legend's room from
// legend.js; margins grow as Plotly's automargin grows them, for tick labels that do not fit and for the
// legend, and labels that would cross the chart's edges are hidden as Plotly hides them.

import { autorange, extremes, ticks } from "./axes.js";
import { layoutLegend } from "./legend.js";

export const LINE_SPACING = 1.3; // Plotly's line height of multi-line labels, in em
export const MID_SHIFT = 0.35; // Plotly's vertical centring of a text line, in em
export const TICK_LEN = 5; // Plotly's outside ticks (an axis with a tick colour has them)
const DEFAULT_RANGE = { linear: [-1, 6], date: [Date.UTC(2000, 0, 1), Date.UTC(2001, 0, 1)] };

// Plotly's pads for a scatter trace: markers keep their radius clear of the edges; lines-only traces
// and fills take no 5% padding along x.
function padOf(trace, key) {
  const markers = (trace.mode || "lines").includes("markers");
  const pad = markers ? Math.max((trace.marker?.size ?? 6) / 1.6, 3) : 0;
  if (key === "x" && (trace.fill === "tonexty" || trace.fill === "tozeroy" || !markers)) return { pad: 0, padded: false };
  return { pad, padded: true };
}

function axisOf(traces, layout, key, length) {
  const spec = layout[`${key}axis`] || {};
  const isDate = spec.type === "date";
  let range;
  if (spec.autorange === false && Array.isArray(spec.range)) range = spec.range.map(Number);
  else {
    const found = traces.map((t) => extremes(t[key] || [], padOf(t, key)));
    if (key === "x") {
      for (const s of layout.shapes || []) {
        if (s.xref === "x") found.push(extremes([s.x0, s.x1], { pad: (s.line?.width ?? 2) / 2, padded: false }));
      }
    }
    range = autorange(found, length) || DEFAULT_RANGE[isDate ? "date" : "linear"];
  }
  const list = ticks(range, length, { isY: key === "y", isDate });
  return { range, length, isDate, ticks: list, spec };
}

// A label's width as Plotly measures it (its SVG box is half a pixel wider than the canvas's advance).
const textWidth = (ctx, text) => ctx.measureText(text).width + 0.5;

// Plotly's label standoff from the axis line: the outside ticks, a fifth of the font, half a line.
function standoff(spec, font) {
  const outside = spec.ticks === "outside" || (spec.ticks === undefined && (spec.tickcolor || spec.ticklen));
  return outside ? (spec.ticklen ?? TICK_LEN) + 0.2 * font.size + 0.5 : 0.5;
}

// The plot box and both axes, with the margins Plotly's automargin makes: each side takes the larger
// of its configured margin and what the tick labels (or the legend) need, plus Plotly's pad. Answers
// {m: margins, w, h: the plot's size, width, height: the chart's, x, y}; an axis has its range, its
// ticks ({value, text, width, shown}), its line's position, its labels' standoff and a pixel function
// (px, py); x also has the legend ({items, height}) when the layout shows one.
export function fit(ctx, traces, layout, width, height, font, legendFont) {
  const base = { l: 80, r: 80, t: 100, b: 80, ...(layout.margin || {}) };
  const pad = Math.min(12, base.l, base.r, base.t, base.b);
  let m = { ...base };
  let x;
  let y;
  ctx.font = font.css;
  const metrics = ctx.measureText("0");
  const ascent = metrics.fontBoundingBoxAscent ?? font.size * 0.9;
  const descent = metrics.fontBoundingBoxDescent ?? font.size * 0.25;
  for (let pass = 0; pass < 5; pass += 1) {
    const w = Math.max(1, width - m.l - m.r);
    const h = Math.max(1, height - m.t - m.b);
    x = axisOf(traces, layout, "x", w);
    y = axisOf(traces, layout, "y", h);
    x.line = m.t + h + 0.5; // where Plotly puts each axis line (drawn or not)
    y.line = m.l - 0.5;
    x.standoff = standoff(x.spec, font);
    y.standoff = standoff(y.spec, font);
    const px = (v) => m.l + ((v - x.range[0]) / (x.range[1] - x.range[0])) * w;
    const py = (v) => m.t + h - ((v - y.range[0]) / (y.range[1] - y.range[0])) * h;
    Object.assign(x, { px });
    Object.assign(y, { py });
    // Labels past the chart's edges are hidden ("hide past div") and take no margin.
    const need = { l: 0, r: 0, t: 0, b: 0 };
    let widest = -1;
    let top = Infinity;
    let bottom = -Infinity;
    for (const tick of y.ticks) {
      tick.width = textWidth(ctx, tick.text);
      const baseline = py(tick.value) + MID_SHIFT * font.size;
      tick.shown = baseline + descent <= height && baseline - ascent + font.size / 4 >= 0;
      if (!tick.shown) continue;
      widest = Math.max(widest, tick.width);
      top = Math.min(top, baseline - ascent);
      bottom = Math.max(bottom, baseline + descent);
    }
    if (widest >= 0) {
      need.l = y.standoff + widest + pad;
      if (m.t - top > 0) need.t = m.t - top + pad;
      if (bottom - (m.t + h) > 0) need.b = bottom - (m.t + h) + pad;
    }
    let left = Infinity;
    let right = -Infinity;
    let lines = 0;
    for (const tick of x.ticks) {
      tick.lines = tick.text.split("<br>");
      tick.width = Math.max(...tick.lines.map((line) => textWidth(ctx, line)));
      tick.shown = px(tick.value) - tick.width / 2 >= 0 && px(tick.value) + tick.width / 2 <= width;
      if (!tick.shown) continue;
      lines = Math.max(lines, tick.lines.length);
      left = Math.min(left, px(tick.value) - tick.width / 2);
      right = Math.max(right, px(tick.value) + tick.width / 2);
    }
    if (lines) {
      const depth = x.standoff + font.size + (lines - 1) * LINE_SPACING * font.size + descent;
      need.b = Math.max(need.b, depth + 0.5 + pad);
      if (m.l - left > 0) need.l = Math.max(need.l, m.l - left + pad);
      if (right - (m.l + w) > 0) need.r = right - (m.l + w) + pad;
    }
    if (layout.showlegend) {
      ctx.font = legendFont.css;
      x.legend = layoutLegend(traces, { measure: (text) => textWidth(ctx, text), fontSize: legendFont.size, width: w,
        chartHeight: height });
      ctx.font = font.css;
      if (x.legend.height) need.t = Math.max(need.t, x.legend.height + pad);
    }
    const next = {};
    for (const side of ["l", "r", "t", "b"]) next[side] = Math.round(Math.max(base[side], need[side]));
    if (next.l === m.l && next.r === m.r && next.t === m.t && next.b === m.b) break;
    m = next;
  }
  return { m, x, y, width, height, w: Math.max(1, width - m.l - m.r), h: Math.max(1, height - m.t - m.b) };
}
