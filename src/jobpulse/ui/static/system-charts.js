// The heat map and the line charts of the System tab, drawn with Plotly from the panel's shared series
// requests; titles, units and axis formatting come from the name table (system-metrics.js).

import { clear, h, isVisible, whenVisible } from "./dom.js";
import { natural } from "./format.js";
import { findingTraces } from "./insights.js";
import { alpha, color, CONFIG, followTheme, fromPlotTime, loadPlotly, toPlotTime } from "./plot.js";
import { infoTitle, metricInfo, titleWithUnit } from "./system-metrics.js";

export const HEAT_CELLS = 150000;
const LINE_CELLS = 60000;
const MAX_LINES = 16;
const HEAT_MIN_STEP_S = 10; // a heat map's cells are no finer than the agent's usual sampling
const FEW_POINTS = 40; // a series with at most this many points shows them as markers too

const deviceLabel = (metric) => (metric.startsWith("npu") ? "NPU" : "GPU");
const label = (metric) => metricInfo(metric).title;

class Plotted {
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

  async show(traces, layout) {
    const Plotly = await loadPlotly();
    this.plot.querySelector(".chart-state, .skeleton")?.remove();
    await Plotly.react(this.plot, [...traces, ...findingTraces()], layout, CONFIG); // the job's findings: insights.js
    if (!this.plotted) {
      this.plotted = true;
      this.plot.on("plotly_relayout", (event) => this.panel.relayout(event));
      this.plot.on("plotly_click", (event) => this.click(event));
    }
  }

  click(event) {
    const point = event.points && event.points[0];
    if (point && this.panel.onTimeClick) this.panel.onTimeClick(Math.round(fromPlotTime(point.x)));
  }

  destroy() {
    this.unfollow();
    if (this.plotted && window.Plotly) window.Plotly.purge(this.plot);
    this.el.remove();
  }
}

export class HeatMap extends Plotted {
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
      await this.draw();
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

  async draw() {
    const { start, end, step_ms: step } = this.data;
    const rows = this.rows();
    if (!rows.length || !step) { this.state("No samples in this range."); return; }
    const unit = metricInfo(this.metric, topOf(rows));
    const cols = Math.floor((end - start) / step) + 1;
    // cell edges, not centres: a single column (a job shorter than a step) still has its step's width
    const x = Array.from({ length: cols + 1 }, (_, i) => toPlotTime(start + i * step));
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
    const height = Math.max(180, Math.min(900, Math.round(n * rowPx) + 70));
    this.plot.style.height = `${height}px`;
    const yaxis = { type: "category", autorange: "reversed", showgrid: false, automargin: true, ticks: "",
      fixedrange: true };
    if (n > 48) {
      const first = new Map();
      rows.forEach((s, i) => { if (!first.has(s.worker)) first.set(s.worker, y[i]); });
      const every = Math.ceil(first.size / 40);
      const ticks = [...first.entries()].filter((_, i) => i % every === 0);
      yaxis.tickvals = ticks.map((t) => t[1]);
      yaxis.ticktext = ticks.map((t) => t[0]);
    }
    const trace = { type: "heatmap", x, y, z, zmin: unit.max === 100 ? 0 : undefined, zmax: unit.max,
      colorscale: "Viridis", ygap: n <= 32 ? 1 : 0, hoverongaps: false,
      colorbar: { thickness: 10, outlinewidth: 0, ticksuffix: unit.suffix === "%" ? "%" : "", len: 1, y: 0.5,
        title: { text: unit.unit, side: "right" } },
      hovertemplate: `%{y}<br>%{x}<br><b>%{z:.3~f}${unit.suffix}</b><extra></extra>` };
    await this.show([trace], this.panel.timeLayout({ yaxis, hovermode: "closest", margin: { l: 8, r: 8, t: 30, b: 30 },
      xaxis: { title: { text: "Time", standoff: 4 } } }, step));
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

  click(event) {
    const point = event.points && event.points[0];
    if (!point) return;
    const worker = String(point.y).split(" · ")[0];
    if (this.panel.workers.includes(worker)) this.panel.setWorker(worker);
  }

  redraw() { if (this.plotted && this.data) this.draw(); }
}

export class SystemChart extends Plotted {
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
      await this.draw();
    } catch (error) {
      this.state(error.message, true);
    }
  }

  async draw() {
    let series = this.data.series.filter((s) => s.metric === this.metric && (this.device ? s.device !== "" : s.device === ""));
    series.sort((a, b) => natural(a.worker, b.worker) || natural(a.device, b.device));
    if (!series.length) { this.state("No samples in this range."); return; }
    const unit = metricInfo(this.metric, topOf(series));
    this.title.textContent = infoTitle(unit);
    const scale = (v) => scaled(v, unit);
    const step = this.data.step_ms;
    const at = (t) => toPlotTime(t + step / 2);
    const traces = [];
    const dev = deviceLabel(this.metric);
    if (series.length > MAX_LINES) {
      const agg = aggregate(series);
      const x = agg.t.map(at);
      traces.push({ type: "scatter", mode: "lines", x, y: agg.max.map(scale), line: { width: 0 }, hoverinfo: "skip", showlegend: false });
      traces.push({ type: "scatter", mode: "lines", x, y: agg.min.map(scale), line: { width: 0 }, fill: "tonexty",
        fillcolor: alpha(color(0), 0.18), name: "min – max", hoverinfo: "skip" });
      traces.push({ type: "scatter", mode: modeOf(x.length), x, y: agg.mean.map(scale), name: `mean of ${series.length}`,
        line: { color: color(0), width: 1.7 }, marker: { size: 6, color: color(0) },
        customdata: agg.min.map((v, i) => [unit.fmt(v), unit.fmt(agg.max[i])]),
        hovertemplate: `%{y:.3~f}${unit.suffix} <span style="opacity:.7">min %{customdata[0]} · max %{customdata[1]}</span><extra>mean</extra>` });
      this.meta.textContent = `${series.length} series: mean with min–max`;
    } else {
      series.forEach((s, i) => {
        const name = this.device ? (this.panel.selected().length === 1 ? `${dev} ${s.device}` : `${s.worker} · ${dev} ${s.device}`) : s.worker;
        traces.push({ type: "scatter", mode: modeOf(s.t.length), name, x: s.t.map(at), y: s.avg.map(scale),
          line: { color: color(i), width: 1.4 }, marker: { size: 6, color: color(i) },
          hovertemplate: `%{y:.4~f}${unit.suffix}<extra>${name}</extra>` });
      });
      this.meta.textContent = `${series.length} series · ${stepText(step)} step`;
    }
    const many = traces.length > 8;
    const legend = !many && traces.length > 1;
    await this.show(traces, this.panel.timeLayout({
      showlegend: legend, hovermode: many ? "closest" : "x unified",
      margin: { l: 56, r: 16, t: legend ? 28 : 10, b: 34 },
      xaxis: { title: { text: "Time", standoff: 4 } },
      yaxis: { title: { text: unit.axisTitle, standoff: 6 }, ticksuffix: unit.unit === "%" ? "%" : "",
        tickformat: unit.integer ? "d" : "~r", rangemode: "tozero",
        range: unit.max === 100 ? [0, 100] : undefined, autorange: unit.max !== 100, fixedrange: true },
    }, step));
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
