// Plotly.js (served by this server from the plotly package), themed layouts and time conversions.

import { boot, currentTheme, onThemeChange } from "./shell.js";

let loading = null;
export function loadPlotly() {
  if (window.Plotly) {
    if (!performance.getEntriesByName("jp-plotly-ready").length) performance.mark("jp-plotly-ready");
    return Promise.resolve(window.Plotly);
  }
  if (!loading) {
    loading = new Promise((resolve, reject) => {
      let script = document.getElementById("plotly-js");
      if (!script) {
        script = document.createElement("script");
        script.src = boot.plotly;
        script.async = true;
        document.head.append(script);
      }
      script.addEventListener("load", () => {
        performance.mark("jp-plotly-ready");
        warmUp(window.Plotly);
        resolve(window.Plotly);
      });
      script.addEventListener("error", () => reject(new Error("the chart library could not be loaded")));
    });
  }
  return loading;
}

export const PALETTE = ["#3b82f6", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#06b6d4", "#ec4899", "#84cc16",
  "#f97316", "#64748b", "#14b8a6", "#a855f7"];

export function color(i) { return PALETTE[i % PALETTE.length]; }

export function alpha(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${a})`;
}

function css(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

function axisStyle() {
  return { gridcolor: css("--border"), zerolinecolor: css("--border"), linecolor: css("--border-strong"),
    tickcolor: css("--border-strong"), automargin: true, showspikes: false };
}

export function themeColors() {
  const axis = axisStyle();
  return {
    paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
    font: { family: css("--font"), size: 11, color: css("--muted") },
    hoverlabel: { bgcolor: css("--surface"), bordercolor: css("--border-strong"),
      font: { color: css("--text"), family: css("--font"), size: 12 } },
    legend: { font: { color: css("--text-2"), size: 11 } },
    xaxis: axis, yaxis: axis,
  };
}

export function baseLayout(extra = {}) {
  const theme = themeColors();
  return {
    ...theme,
    margin: { l: 56, r: 16, t: 10, b: 34 },
    hovermode: "x unified",
    dragmode: "zoom",
    showlegend: false,
    legend: { ...theme.legend, orientation: "h", x: 0, y: 1.0, yanchor: "bottom", bgcolor: "rgba(0,0,0,0)" },
    ...extra,
    xaxis: { ...theme.xaxis, ...(extra.xaxis || {}) },
    yaxis: { ...theme.yaxis, ...(extra.yaxis || {}) },
  };
}

export const CONFIG = { displaylogo: false, responsive: true, scrollZoom: false,
  modeBarButtonsToRemove: ["lasso2d", "select2d", "autoScale2d", "toggleSpikelines", "hoverClosestCartesian",
    "hoverCompareCartesian"] };

// Plotly draws numbers on a date axis as UTC; shift them so the axis reads the viewer's local time.
export function toPlotTime(ms) {
  return ms - new Date(ms).getTimezoneOffset() * 60000;
}

export function fromPlotTime(value) {
  let shifted;
  if (typeof value === "number") shifted = value;
  else {
    const m = String(value).match(/^(\d{4})-(\d\d)-(\d\d)(?:[ T](\d\d)(?::(\d\d)(?::(\d\d)(\.\d+)?)?)?)?/);
    if (!m) return NaN;
    shifted = Date.UTC(+m[1], +m[2] - 1, +m[3], +(m[4] || 0), +(m[5] || 0), +(m[6] || 0),
      Math.round(parseFloat(m[7] || "0") * 1000));
  }
  return shifted + new Date(shifted).getTimezoneOffset() * 60000;
}

// A vertical line at time `ms` (already in plot time) for layout.shapes.
export function markerShape(plotX) {
  return { type: "line", xref: "x", yref: "paper", x0: plotX, x1: plotX, y0: 0, y1: 1,
    line: { color: css("--bad"), width: 1.5, dash: "dot" } };
}

// Charts that follow the theme: each registers a function that relayouts it.
const themed = new Set();
export function followTheme(fn) { themed.add(fn); return () => themed.delete(fn); }
onThemeChange(() => { for (const fn of themed) fn(currentTheme()); });

// Plotly's first plot on a page sets itself up (styles, font metrics); do that off screen while the
// first chart's data is still on its way.
function warmUp(Plotly) {
  if (!Plotly || !document.body) return;
  const div = document.createElement("div");
  div.style.cssText = "position:absolute;left:-10000px;top:0;width:480px;height:240px";
  document.body.append(div);
  Plotly.newPlot(div, [{ type: "scatter", mode: "lines", x: [0, 1], y: [0, 1] }], baseLayout(), { staticPlot: true })
    .then(() => { Plotly.purge(div); div.remove(); }, () => div.remove());
}

// Marks the benchmark and tests read: the first chart drawn on the page (a preview drawn without
// Plotly, or a Plotly chart), and the first interactive (Plotly) chart.
export function markFirstChart() {
  if (window.__jpFirstChart) return;
  window.__jpFirstChart = performance.now();
  performance.mark("jp-first-chart");
}

export function markInteractiveChart() {
  if (window.__jpChartInteractive) return;
  window.__jpChartInteractive = performance.now();
  performance.mark("jp-chart-interactive");
}
