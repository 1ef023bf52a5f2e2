// The heat map (heatmap.js) and the line charts (chart.js) of the System tab, drawn from the panel's shared
// series requests; titles, units and axis formatting come from the name table (system-metrics.js).

import { drawChart, unmount } from "./chart.js";
import { clear, h, isVisible, whenVisible } from "./dom.js";
import { natural, num } from "./format.js";
import { drawHeatmap } from "./heatmap.js";
import { infoTitle, metricInfo, titleWithUnit } from "./system-metrics.js";
import { alpha, color, followTheme } from "./theme.js";

export const HEAT_CELLS = 150000;
const LINE_CELLS = 60000;
const MAX_LINES = 16;
const HEAT_MIN_STEP_S = 10; // a heat map's cells are no finer than the agent's usual sampling
const FEW_POINTS = 40; // a series with at most this many points shows them as markers too

const deviceLabel = (metric) => (metric.startsWith("npu") ? "NPU" : "GPU");
const label = (metric) => metricInfo(metric).title;

class Drawn {
  constructor(panel) {
    this.panel = panel;
    this.plotted = false;
    this.key = null;
    this.unfollow = followTheme(() => this.redraw());
  }

  invalidate() {
    this.key = null;
    if (isVisible(this.el)) this.load();
    else whenVisible(this.el, () => { if (this.key === null) this.load(); });
  }

  state(message, isError = false) {
    this.plot.querySelector(".chart-state, .skeleton")?.remove();
    if (message === null) this.plot.append(h("div", { class: "skeleton" }));
    else if (message) this.plot.append(h("div", { class: `chart-state${isError ? " error" : ""}` }, message));
  }

  // What every chart of the panel shares: its time range, the marks over it, zoom, reset and a click in time.
  common(step) {
    const panel = this.panel;
    return { xRange: panel.timeRange(step), marks: panel.marks(), onZoom: (lo, hi) => panel.zoom(lo, hi),
      onReset: () => panel.reset() };
  }

  empty() {
    unmount(this.plot);
    this.plotted = false;
    this.state("No samples in this range.");
  }

  destroy() {
    this.unfollow();
    unmount(this.plot);
    this.el.remove();
  }
}

export class HeatMap extends Drawn {
  constructor(panel, metrics) {
    super(panel);
    this.metric = metrics[0];
    this.select = h("select", { "aria-label": "Heat map metric", onchange: () => { this.metric = this.select.value; this.invalidate(); } },
      metrics.map((m) => h("option", { value: m }, label(m))));
    this.plot = h("div", { class: "chart heatmap", dataset: { metric: this.metric } }, h("div", { class: "skeleton" }));
    this.outliers = h("div", { class: "outliers" });
    this.title = h("h2", {}, "");
    this.el = h("section", { class: "card heat-card" },
      h("div", { class: "card-head" }, this.title, h("div", { class: "right" }, this.select)),
      h("div", { class: "card-body", style: { paddingTop: "4px" } }, this.plot, this.outliers));
    whenVisible(this.el, () => this.load());
  }

  async load(quiet = false) {
    const metric = this.metric;
    const info = this.panel.metrics.get(metric);
    const key = `${metric}|${this.panel.span().join(":")}`;
    this.key = key;
    this.title.textContent = `${label(metric)} by worker and ${deviceLabel(metric)}`;
    if (!quiet && !this.plotted) this.state(null);
    try {
      const data = await this.panel.series([metric], { rows: info.series, minStepS: HEAT_MIN_STEP_S });
      if (!performance.getEntriesByName("jp-heatmap-data").length) performance.mark("jp-heatmap-data");
      if (this.key !== key) return;
      this.data = data;
      this.draw();
    } catch (error) {
      this.state(error.message, true);
    } finally {
      this.panel.heatDrawn();
    }
  }

  rows() {
    const series = this.data.series.filter((s) => s.device !== "");
    series.sort((a, b) => natural(a.worker, b.worker) || natural(a.device, b.device));
    return series;
  }

  draw() {
    const { start, end, step_ms: step } = this.data;
    const rows = this.rows();
    if (!rows.length || !step) { this.empty(); return; }
    const unit = metricInfo(this.metric, topOf(rows));
    const cols = Math.floor((end - start) / step) + 1;
    const z = rows.map((s) => {
      const row = new Array(cols).fill(null);
      for (let i = 0; i < s.t.length; i += 1) row[Math.round((s.t[i] - start) / step)] = scaled(s.avg[i], unit);
      return row;
    });
    const dev = deviceLabel(this.metric);
    this.title.textContent = `${unit.title} by worker and ${dev}${unit.unit ? ` (${unit.unit})` : ""}`;
    const y = rows.map((s) => `${s.worker} · ${dev} ${s.device}`);
    const n = rows.length;
    const rowPx = n <= 40 ? 15 : n <= 128 ? 8 : Math.max(1, 720 / n);
    this.plot.style.height = `${Math.max(180, Math.min(900, Math.round(n * rowPx) + 70))}px`;
    let ticks = y.map((text, row) => ({ row, text }));
    if (n > 48) {
      const first = new Map();
      rows.forEach((s, i) => { if (!first.has(s.worker)) first.set(s.worker, i); });
      const every = Math.ceil(first.size / 40);
      ticks = [...first.entries()].filter((_, i) => i % every === 0).map(([text, row]) => ({ row, text }));
    }
    this.plot.querySelector(".chart-state, .skeleton")?.remove();
    drawHeatmap(this.plot, { ...this.common(step), name: this.metric, start, step, z, labels: y, ticks,
      zmin: unit.max === 100 ? 0 : undefined, zmax: unit.max, gap: n <= 32, format: (v) => `${num(v)}${unit.suffix}`,
      onRow: (i) => this.pick(rows[i].worker) });
    this.plotted = true;
    this.plot.dataset.metric = this.metric;
    this.plot.dataset.rows = String(n);
    if (!performance.getEntriesByName("jp-heatmap").length) performance.mark("jp-heatmap");
    this.showOutliers(rows, z, y, unit);
  }

  showOutliers(rows, z, y, unit) {
    const means = z.map((row) => {
      const values = row.filter((v) => v !== null);
      return values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
    });
    const known = means.filter((v) => v !== null).sort((a, b) => a - b);
    clear(this.outliers);
    if (known.length < 3) return;
    const median = known[Math.floor(known.length / 2)];
    const deviations = known.map((v) => Math.abs(v - median)).sort((a, b) => a - b);
    const mad = deviations[Math.floor(deviations.length / 2)] || 0;
    const shown = (v) => unit.fmt(v / unit.factor);
    const flagged = means.map((v, i) => ({ v, i }))
      .filter(({ v }) => v !== null && Math.abs(v - median) > Math.max(4 * 1.4826 * mad, 0.15 * Math.abs(median)))
      .sort((a, b) => Math.abs(b.v - median) - Math.abs(a.v - median)).slice(0, 6);
    if (!flagged.length) {
      this.outliers.append(h("span", { class: "muted" }, `All ${rows.length} ${deviceLabel(this.metric)}s are close to the median of ${shown(median)}.`));
      return;
    }
    this.outliers.append(h("span", { class: "muted" }, `Stands out (median ${shown(median)}):`));
    for (const { v, i } of flagged) {
      this.outliers.append(h("button", { type: "button", class: "outlier", title: "Show this worker's charts",
        dataset: { worker: rows[i].worker, device: rows[i].device },
        onclick: () => this.panel.setWorker(rows[i].worker) }, y[i], h("b", {}, shown(v))));
    }
  }

  pick(worker) {
    if (this.panel.workers.includes(worker)) this.panel.setWorker(worker);
  }

  redraw() { if (this.plotted && this.data) this.draw(); }
}

export class SystemChart extends Drawn {
  constructor(panel, metric, device) {
    super(panel);
    this.metric = metric;
    this.device = device;
    this.plot = h("div", { class: "chart", dataset: { metric } }, h("div", { class: "skeleton" }));
    this.meta = h("span", { class: "meta" });
    this.title = h("h2", { title: metric }, titleWithUnit(metric));
    this.el = h("section", { class: "card chart-card system-chart", dataset: { metric } },
      h("div", { class: "card-head" }, this.title, h("div", { class: "right" }, this.meta)),
      this.plot);
    whenVisible(this.el, () => { if (this.key === null) this.load(); });
  }

  async load(quiet = false) {
    const panel = this.panel;
    const key = `${panel.worker}|${panel.span().join(":")}`;
    this.key = key;
    if (!quiet && !this.plotted) this.state(null);
    const info = panel.metrics.get(this.metric);
    try {
      await panel.heatReady;
      let data;
      if (this.device) {
        const rows = panel.worker ? panel.selected().reduce((n, w) => n + (info.perWorker.get(w) || 0), 0) || 1 : info.series;
        data = await panel.series([this.metric], { worker: panel.worker, rows,
          cells: rows > MAX_LINES ? HEAT_CELLS : LINE_CELLS });
      } else {
        const rows = panel.worker ? panel.selected().length : panel.workers.length;
        data = await panel.series(panel.hostMetrics, { worker: panel.worker, device: "", rows, cells: LINE_CELLS });
      }
      if (this.key !== key) return;
      this.data = data;
      this.draw();
    } catch (error) {
      this.state(error.message, true);
    }
  }

  draw() {
    let series = this.data.series.filter((s) => s.metric === this.metric && (this.device ? s.device !== "" : s.device === ""));
    series.sort((a, b) => natural(a.worker, b.worker) || natural(a.device, b.device));
    if (!series.length) { this.empty(); return; }
    const unit = metricInfo(this.metric, topOf(series));
    this.title.textContent = infoTitle(unit);
    const scale = (v) => scaled(v, unit);
    const step = this.data.step_ms;
    const at = (t) => t + step / 2;
    const lines = [];
    const dev = deviceLabel(this.metric);
    if (series.length > MAX_LINES) {
      const agg = aggregate(series);
      const x = agg.t.map(at);
      lines.push({ name: "max", x, y: agg.max.map(scale), width: 0, legend: false });
      lines.push({ name: "min – max", x, y: agg.min.map(scale), width: 0, legend: false,
        fill: alpha(color(0), 0.18) });
      lines.push({ name: `mean of ${series.length}`, x, y: agg.mean.map(scale), color: color(0),
        points: x.length <= FEW_POINTS,
        detail: (j) => `(min ${unit.fmt(agg.min[j])} · max ${unit.fmt(agg.max[j])})` });
      this.meta.textContent = `${series.length} series: mean with min–max`;
    } else {
      series.forEach((s, i) => {
        const name = this.device ? (this.panel.selected().length === 1 ? `${dev} ${s.device}` : `${s.worker} · ${dev} ${s.device}`) : s.worker;
        lines.push({ name, x: s.t.map(at), y: s.avg.map(scale), color: color(i), width: 1.4,
          points: s.t.length <= FEW_POINTS });
      });
      this.meta.textContent = `${series.length} series · ${stepText(step)} step`;
    }
    const percent = unit.unit === "%" ? "%" : "";
    this.plot.querySelector(".chart-state, .skeleton")?.remove();
    drawChart(this.plot, { ...this.common(step), series: lines, time: true,
      y: { label: unit.axisTitle, zero: true, range: unit.max === 100 ? [0, 100] : null,
        format: (v) => `${num(v)}${unit.suffix}`, tick: (v) => `${unit.integer ? Math.round(v) : num(v)}${percent}` },
      onClick: (x) => { if (this.panel.onTimeClick) this.panel.onTimeClick(Math.round(x)); } });
    this.plotted = true;
  }

  redraw() { if (this.plotted && this.data) this.draw(); }
}

// Mean, min and max across many series per time bucket.
function aggregate(series) {
  const buckets = new Map();
  for (const s of series) {
    for (let i = 0; i < s.t.length; i += 1) {
      const v = s.avg[i];
      if (v === null) continue;
      const b = buckets.get(s.t[i]) || { sum: 0, n: 0, min: Infinity, max: -Infinity };
      b.sum += v; b.n += 1;
      if (v < b.min) b.min = v;
      if (v > b.max) b.max = v;
      buckets.set(s.t[i], b);
    }
  }
  const t = [...buckets.keys()].sort((a, b) => a - b);
  return { t, mean: t.map((k) => buckets.get(k).sum / buckets.get(k).n), min: t.map((k) => buckets.get(k).min),
    max: t.map((k) => buckets.get(k).max) };
}


// The largest value (stored units) of the series, to pick the unit a chart shows them in.
function topOf(series) {
  let top = 0;
  for (const s of series) for (const v of s.avg) if (v !== null && Math.abs(v) > top) top = Math.abs(v);
  return top;
}

function scaled(v, unit) {
  return v === null || v === undefined ? null : v * unit.factor;
}

// Markers too where the points are few: a single sample is a point, not an invisible line.
function modeOf(points) {
  return points <= FEW_POINTS ? "lines+markers" : "lines";
}

function stepText(ms) {
  if (ms < 60000) return `${ms / 1000}s`;
  if (ms < 3600000) return `${ms / 60000}m`;
  return `${ms / 3600000}h`;
}
