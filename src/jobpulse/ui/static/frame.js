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

// A layout font with Plotly's defaults filled in, and its CSS shorthand.
export function fontOf(font, fallback = {}) {
  const size = font?.size || fallback.size || 12;
  const family = font?.family || fallback.family || "sans-serif";
  return { size, family, color: font?.color || fallback.color || "#444", css: `${size}px ${family}` };
}

// A label's box as Plotly measures it: the box of an SVG text in the label's font, anchored as the label
// is ("middle" under the x axis, "end" left of the y axis, "start" in the legend), in a hidden SVG off the
// page as Plotly's own tester is. Answers {left, right, width}, the edges relative to the anchor. The
// canvas's advance width is not that box: layout rounds it up to 1/64 pixel and some glyphs reach past
// their advance ("k", half a pixel to the right), and a margin Plotly rounds to whole pixels comes out a
// pixel off when its need lies that near a half.
const SVG = "http://www.w3.org/2000/svg";
const MEASURED_MAX = 5000; // boxes remembered before starting again (labels change as data arrives)
const measured = new Map();
let probe = null;

function textBox(font, text, anchor) {
  const key = `${font.css}\n${anchor}\n${text}`;
  let box = measured.get(key);
  if (box) return box;
  if (!probe?.isConnected) {
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("aria-hidden", "true");
    svg.style.cssText = "position:absolute;left:-10000px;top:-10000px;width:10px;height:10px;visibility:hidden";
    probe = document.createElementNS(SVG, "text");
    // the style Plotly gives its labels besides their font: spaces kept, no weight or style from the page
    probe.style.cssText = "font-weight:normal;font-style:normal;font-variant:normal;white-space:pre";
    svg.append(probe);
    document.body.append(svg);
  }
  probe.style.fontFamily = font.family;
  probe.style.fontSize = `${font.size}px`;
  probe.setAttribute("text-anchor", anchor);
  probe.textContent = text;
  const origin = probe.ownerSVGElement.getBoundingClientRect().left;
  const rect = probe.getBoundingClientRect();
  box = { left: rect.left - origin, right: rect.right - origin, width: rect.width };
  if (measured.size >= MEASURED_MAX) measured.clear();
  measured.set(key, box);
  return box;
}

// Plotly's label standoff from the axis line: the outside ticks, a fifth of the font, half a line.
function standoff(spec, font) {
  const outside = spec.ticks === "outside" || (spec.ticks === undefined && (spec.tickcolor || spec.ticklen));
  return outside ? (spec.ticklen ?? TICK_LEN) + 0.2 * font.size + 0.5 : 0.5;
}

// Plotly draws a chart again while its margins move, at most this many times (three per margin
// pusher: the legend and the two axes, and once more); past that it keeps the margins it drew with.
const REDRAWS = 12;

const plotSize = (m, width, height) => ({ ...m, w: Math.max(1, width - m.l - m.r), h: Math.max(1, height - m.t - m.b) });

// A margin change Plotly draws again for: one of more than a pixel on a side or in the plot's size.
const moved = (a, b) => ["l", "r", "t", "b", "w", "h"].some((k) => Math.abs(a[k] - b[k]) > 1);

// The plot box and both axes, with the margins Plotly's automargin makes: each side takes the larger
// of its configured margin and what the tick labels (or the legend) need, plus Plotly's pad. Plotly
// first draws with room for the legend, then draws again while the margins that the drawn labels ask
// for move by more than a pixel; a smaller change only goes into its layout's size, so the picture is
// the one drawn before it. Answers {m: margins, w, h: the plot's size as drawn, size: Plotly's final
// layout size ({l, r, t, b, w, h}), width, height: the chart's, x, y}; an axis has its range, its ticks
// ({value, text, shown}, and the text's lines on x), its line's position, its labels' standoff and a
// pixel function (px, py); x also has the legend ({items, height}) when the layout shows one.
export function fit(ctx, traces, layout, width, height, font, legendFont) {
  const base = { l: 80, r: 80, t: 100, b: 80, ...(layout.margin || {}) };
  const pad = Math.min(12, base.l, base.r, base.t, base.b);
  const legendOf = (w) => layoutLegend(traces, { measure: (text) => textBox(legendFont, text, "start").width,
    fontSize: legendFont.size, width: w, chartHeight: height });
  let m = { ...base };
  if (layout.showlegend) {
    const legend = legendOf(plotSize(m, width, height).w);
    if (legend.height) m.t = Math.round(Math.max(base.t, legend.height + pad));
  }
  let x;
  let y;
  let size;
  ctx.font = font.css;
  const metrics = ctx.measureText("0");
  const ascent = metrics.fontBoundingBoxAscent ?? font.size * 0.9;
  const descent = metrics.fontBoundingBoxDescent ?? font.size * 0.25;
  for (let pass = 0; ; pass += 1) {
    const drawn = plotSize(m, width, height);
    const { w, h } = drawn;
    x = axisOf(traces, layout, "x", w);
    y = axisOf(traces, layout, "y", h);
    x.line = m.t + h + 0.5; // where Plotly puts each axis line (drawn or not)
    y.line = m.l - 0.5;
    x.standoff = standoff(x.spec, font);
    y.standoff = standoff(y.spec, font);
    // Plotly's pixel of a value: a linear map rounded to 1/100 pixel, in its order of operations.
    const xm = w / (x.range[1] - x.range[0]);
    const xb = -xm * x.range[0];
    const ym = h / (y.range[0] - y.range[1]);
    const yb = -ym * y.range[1];
    const px = (v) => m.l + Math.round((xb + xm * v) * 100) / 100;
    const py = (v) => m.t + Math.round((yb + ym * v) * 100) / 100;
    Object.assign(x, { px });
    Object.assign(y, { py });
    // Labels past the chart's edges are hidden ("hide past div") and take no margin.
    const need = { l: 0, r: 0, t: 0, b: 0 };
    let widest = -1;
    let top = Infinity;
    let bottom = -Infinity;
    for (const tick of y.ticks) {
      const box = textBox(font, tick.text, "end");
      const baseline = py(tick.value) + MID_SHIFT * font.size;
      tick.shown = baseline + descent <= height && baseline - ascent + font.size / 4 >= 0;
      if (!tick.shown) continue;
      widest = Math.max(widest, -box.left);
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
      const boxes = tick.lines.map((line) => textBox(font, line, "middle"));
      const from = px(tick.value) + Math.min(...boxes.map((box) => box.left));
      const to = px(tick.value) + Math.max(...boxes.map((box) => box.right));
      tick.shown = from >= 0 && to <= width;
      if (!tick.shown) continue;
      lines = Math.max(lines, tick.lines.length);
      left = Math.min(left, from);
      right = Math.max(right, to);
    }
    if (lines) {
      const depth = x.standoff + font.size + (lines - 1) * LINE_SPACING * font.size + descent;
      need.b = Math.max(need.b, depth + 0.5 + pad);
      if (m.l - left > 0) need.l = Math.max(need.l, m.l - left + pad);
      if (right - (m.l + w) > 0) need.r = right - (m.l + w) + pad;
    }
    if (layout.showlegend) {
      x.legend = legendOf(w);
      if (x.legend.height) need.t = Math.max(need.t, x.legend.height + pad);
    }
    const next = {};
    for (const side of ["l", "r", "t", "b"]) next[side] = Math.round(Math.max(base[side], need[side]));
    size = plotSize(next, width, height);
    if (!moved(drawn, size)) break;
    if (pass + 1 >= REDRAWS) {
      size = drawn;
      break;
    }
    m = next;
  }
  const { w, h } = plotSize(m, width, height);
  return { m, x, y, width, height, w, h, size };
}
