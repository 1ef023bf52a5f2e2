// System metrics: a heat map of every worker's devices over time (one series request), and charts per
// worker and per device. Zooming any of them refetches all of them at a finer step.

import { api, jobPath } from "./api.js";
import { clear, h, isVisible, whenVisible } from "./dom.js";
import { fullTime, natural, SYSTEM_LABELS, systemUnit } from "./format.js";
import {
  alpha, baseLayout, color, CONFIG, followTheme, fromPlotTime, loadPlotly, markerShape, toPlotTime,
} from "./plot.js";

const NICE_S = [10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
const HEAT_CELLS = 150000;
const LINE_CELLS = 60000;
const MAX_LINES = 16;

// The smallest round step that draws [start, end] for `series` rows within a cell budget.
export function chooseStep(spanMs, series, cells = HEAT_CELLS, maxCols = 360) {
  const cols = Math.max(24, Math.min(maxCols, Math.floor(cells / Math.max(1, series))));
  const raw = spanMs / cols / 1000;
  return 1000 * (NICE_S.find((s) => s >= raw) || NICE_S[NICE_S.length - 1]);
}

const deviceLabel = (metric) => (metric.startsWith("npu") ? "NPU" : "GPU");
const label = (metric) => SYSTEM_LABELS[metric] || metric;

export class SystemPanel {
  constructor({ job, marker = null, onTimeClick = null }) {
    this.job = job;
    let heatDrawn;
    // Line charts wait for the heat map, so it is not slowed down by requests below the fold.
    this.heatReady = new Promise((resolve) => { heatDrawn = resolve; });
    this.heatDrawn = heatDrawn;
    this.marker = marker;
    this.onTimeClick = onTimeClick;
    this.range = null;
    this.worker = "";
    this.cache = new Map();
    this.items = [];
    this.el = h("div", { class: "system" });
    this.loaded = false;
  }

  async open() {
    if (this.loaded) return;
    this.loaded = true;
    clear(this.el).append(h("div", { class: "card notice" }, "Loading system metrics…"));
    let catalog;
    try {
      catalog = await api(`${jobPath(this.job)}/system`);
    } catch (error) {
      this.loaded = false;
      clear(this.el).append(h("div", { class: "card notice error-message" }, error.message));
      return;
    }
    this.build(catalog);
  }

  build(catalog) {
    clear(this.el);
    if (!catalog.series.length || !catalog.range) {
      this.el.append(h("div", { class: "card empty-state" }, h("h2", {}, "No system metrics"),
        h("p", { class: "muted" }, "Run the job under `jobpulse run -- …` or start `jobpulse agent` on its nodes " +
          "to sample CPU, memory, GPU, network and disk.")));
      return;
    }
    this.extent = catalog.range;
    const byMetric = new Map();
    const workers = new Set();
    for (const row of catalog.series) {
      workers.add(row.worker);
      const entry = byMetric.get(row.metric) || { metric: row.metric, device: false, series: 0, perWorker: new Map() };
      const devices = row.devices.filter((d) => d !== "");
      if (devices.length) entry.device = true;
      entry.series += Math.max(1, devices.length);
      entry.perWorker.set(row.worker, Math.max(1, devices.length));
      byMetric.set(row.metric, entry);
    }
    this.metrics = byMetric;
    this.workers = [...workers].sort(natural);
    const deviceMetrics = [...byMetric.values()].filter((m) => m.device).map((m) => m.metric);
    const hostMetrics = [...byMetric.values()].filter((m) => !m.device).map((m) => m.metric);
    const order = (list, first) => [...first.filter((m) => list.includes(m)), ...list.filter((m) => !first.includes(m)).sort()];
    this.deviceMetrics = order(deviceMetrics, ["gpu_util", "npu_util", "gpu_mem_util", "npu_mem_util", "gpu_mem_bytes",
      "gpu_power_w", "gpu_temp_c"]);
    this.hostMetrics = order(hostMetrics, ["cpu_util", "mem_util", "cpu_cores", "mem_bytes", "net_rx_Bps", "net_tx_Bps",
      "disk_read_Bps", "disk_write_Bps"]);

    this.workerSelect = h("select", { "aria-label": "Worker", onchange: () => this.setWorker(this.workerSelect.value) },
      h("option", { value: "" }, `All workers (${this.workers.length})`),
      this.workers.map((w) => h("option", { value: w }, w)));
    this.resetBtn = h("button", { class: "btn btn-sm", type: "button", hidden: true, onclick: () => this.setRange(null) },
      "Reset zoom");
    this.rangeText = h("span", { class: "muted" });
    if (this.range) {
      this.resetBtn.hidden = false;
      this.rangeText.textContent = `${fullTime(this.range[0])} – ${fullTime(this.range[1])}`;
    }
    this.el.append(h("div", { class: "toolbar" }, h("label", { class: "field" }, "Worker", this.workerSelect),
      this.rangeText, this.resetBtn));

    if (this.deviceMetrics.length) {
      this.heat = new HeatMap(this, this.deviceMetrics);
      this.el.append(this.heat.el);
    } else {
      this.heatDrawn();
    }
    this.grid = h("div", { class: "chart-grid", style: { marginTop: "16px" } });
    this.el.append(this.grid);
    this.buildCharts();
  }

  buildCharts() {
    for (const item of this.items) item.destroy();
    this.items = [];
    clear(this.grid);
    for (const metric of [...this.deviceMetrics, ...this.hostMetrics]) {
      const chart = new SystemChart(this, metric, this.metrics.get(metric).device);
      this.items.push(chart);
      this.grid.append(chart.el);
    }
  }

  setWorker(worker) {
    this.worker = worker;
    if (this.workerSelect.value !== worker) this.workerSelect.value = worker;
    this.buildCharts();
  }

  setRange(range) {
    this.range = range;
    this.cache.clear();
    this.resetBtn.hidden = !range;
    this.rangeText.textContent = range ? `${fullTime(range[0])} – ${fullTime(range[1])}` : "";
    if (this.heat) this.heat.invalidate();
    for (const item of this.items) item.invalidate();
  }

  setMarker(ms) {
    this.marker = ms;
    if (this.heat) this.heat.redraw();
    for (const item of this.items) item.redraw();
  }

  span() {
    return this.range || this.extent;
  }

  // One /system/series request per distinct query, shared by the heat map and the charts.
  series(metrics, { worker = "", device = null, cells = HEAT_CELLS, rows = 1 } = {}) {
    const [start, end] = this.span();
    const step = chooseStep(end - start, rows, cells);
    const params = { metric: metrics.join(","), start, end, step: `${step / 1000}s` };
    if (worker) params.worker = worker;
    if (device !== null) params.device = device;
    const key = JSON.stringify(params);
    if (!this.cache.has(key)) {
      const promise = api(`${jobPath(this.job)}/system/series`, { params });
      promise.catch(() => this.cache.delete(key));
      this.cache.set(key, promise);
    }
    return this.cache.get(key);
  }

  relayout(event) {
    if (event["xaxis.autorange"]) { if (this.range) this.setRange(null); return; }
    let lo = event["xaxis.range[0]"];
    let hi = event["xaxis.range[1]"];
    if (lo === undefined && Array.isArray(event["xaxis.range"])) [lo, hi] = event["xaxis.range"];
    if (lo === undefined || hi === undefined) return;
    const start = Math.floor(fromPlotTime(lo));
    const end = Math.ceil(fromPlotTime(hi));
    if (Number.isFinite(start) && Number.isFinite(end) && end > start) this.setRange([start, end]);
  }

  timeLayout(extra = {}) {
    const xaxis = { type: "date", hoverformat: "%Y-%m-%d %H:%M:%S" };
    if (this.range) { xaxis.range = this.range.map(toPlotTime); xaxis.autorange = false; }
    return baseLayout({ ...extra, xaxis: { ...xaxis, ...(extra.xaxis || {}) },
      shapes: this.marker ? [markerShape(toPlotTime(this.marker))] : [] });
  }

  refresh() {
    if (this.range || !this.loaded || !this.extent) return;
    this.extent = [this.extent[0], Date.now()];
    this.cache.clear();
    if (this.heat && isVisible(this.heat.el)) this.heat.load(true);
    for (const item of this.items) if (isVisible(item.el)) item.load(true);
  }
}

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
    await Plotly.react(this.plot, traces, layout, CONFIG);
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

class HeatMap extends Plotted {
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
      const data = await this.panel.series([metric], { rows: info.series });
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
    const unit = systemUnit(this.metric);
    const cols = Math.floor((end - start) / step) + 1;
    const x = Array.from({ length: cols }, (_, i) => toPlotTime(start + i * step + step / 2));
    const z = rows.map((s) => {
      const row = new Array(cols).fill(null);
      for (let i = 0; i < s.t.length; i += 1) row[Math.round((s.t[i] - start) / step)] = s.avg[i] * unit.scale;
      return row;
    });
    const dev = deviceLabel(this.metric);
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
      colorbar: { thickness: 10, outlinewidth: 0, ticksuffix: unit.suffix === "%" ? "%" : "", len: 1, y: 0.5 },
      hovertemplate: `%{y}<br>%{x}<br><b>%{z:.1f}${unit.suffix === "%" ? "%" : ` ${unit.suffix}`}</b><extra></extra>` };
    await this.show([trace], this.panel.timeLayout({ yaxis, hovermode: "closest", margin: { l: 8, r: 8, t: 30, b: 30 } }));
    this.plot.dataset.metric = this.metric;
    this.plot.dataset.rows = String(n);
    if (!performance.getEntriesByName("jp-heatmap").length) performance.mark("jp-heatmap");
    this.showOutliers(rows, z, y);
  }

  showOutliers(rows, z, y) {
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
    const unit = systemUnit(this.metric);
    const flagged = means.map((v, i) => ({ v, i }))
      .filter(({ v }) => v !== null && Math.abs(v - median) > Math.max(4 * 1.4826 * mad, 0.15 * Math.abs(median)))
      .sort((a, b) => Math.abs(b.v - median) - Math.abs(a.v - median)).slice(0, 6);
    if (!flagged.length) {
      this.outliers.append(h("span", { class: "muted" }, `All ${rows.length} ${deviceLabel(this.metric)}s are close to the median of ${unit.fmt(median)}.`));
      return;
    }
    this.outliers.append(h("span", { class: "muted" }, `Stands out (median ${unit.fmt(median)}):`));
    for (const { v, i } of flagged) {
      this.outliers.append(h("button", { type: "button", class: "outlier", title: "Show this worker's charts",
        dataset: { worker: rows[i].worker, device: rows[i].device },
        onclick: () => this.panel.setWorker(rows[i].worker) }, y[i], h("b", {}, unit.fmt(v))));
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

class SystemChart extends Plotted {
  constructor(panel, metric, device) {
    super(panel);
    this.metric = metric;
    this.device = device;
    this.plot = h("div", { class: "chart", dataset: { metric } }, h("div", { class: "skeleton" }));
    this.meta = h("span", { class: "meta" });
    this.el = h("section", { class: "card chart-card system-chart", dataset: { metric } },
      h("div", { class: "card-head" }, h("h2", { title: metric }, label(metric)), h("div", { class: "right" }, this.meta)),
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
        const rows = panel.worker ? info.perWorker.get(panel.worker) || 1 : info.series;
        data = await panel.series([this.metric], { worker: panel.worker, rows,
          cells: rows > MAX_LINES ? HEAT_CELLS : LINE_CELLS });
      } else {
        const rows = panel.worker ? 1 : panel.workers.length;
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
    const unit = systemUnit(this.metric);
    let series = this.data.series.filter((s) => s.metric === this.metric && (this.device ? s.device !== "" : s.device === ""));
    series.sort((a, b) => natural(a.worker, b.worker) || natural(a.device, b.device));
    if (!series.length) { this.state("No samples in this range."); return; }
    const scale = (v) => (v === null ? null : v * unit.scale);
    const traces = [];
    const dev = deviceLabel(this.metric);
    if (series.length > MAX_LINES) {
      const agg = aggregate(series);
      const x = agg.t.map((t) => toPlotTime(t + this.data.step_ms / 2));
      traces.push({ type: "scatter", mode: "lines", x, y: agg.max.map(scale), line: { width: 0 }, hoverinfo: "skip", showlegend: false });
      traces.push({ type: "scatter", mode: "lines", x, y: agg.min.map(scale), line: { width: 0 }, fill: "tonexty",
        fillcolor: alpha(color(0), 0.18), name: "min – max", hoverinfo: "skip" });
      traces.push({ type: "scatter", mode: "lines", x, y: agg.mean.map(scale), name: `mean of ${series.length}`,
        line: { color: color(0), width: 1.7 }, customdata: agg.min.map((v, i) => [unit.fmt(scale(v)), unit.fmt(scale(agg.max[i]))]),
        hovertemplate: `%{y:.3~s} <span style="opacity:.7">min %{customdata[0]} · max %{customdata[1]}</span><extra>mean</extra>` });
      this.meta.textContent = `${series.length} series: mean with min–max`;
    } else {
      series.forEach((s, i) => {
        const name = this.device ? (this.panel.worker ? `${dev} ${s.device}` : `${s.worker} · ${dev} ${s.device}`) : s.worker;
        traces.push({ type: "scatter", mode: "lines", name, x: s.t.map((t) => toPlotTime(t + this.data.step_ms / 2)),
          y: s.avg.map(scale), line: { color: color(i), width: 1.4 },
          hovertemplate: `%{y:.4~s}${unit.suffix === "%" ? "%" : ""}<extra>${name}</extra>` });
      });
      this.meta.textContent = `${series.length} series · ${this.data.step_ms / 1000}s step`;
    }
    const many = traces.length > 8;
    await this.show(traces, this.panel.timeLayout({
      showlegend: !many && traces.length > 1, hovermode: many ? "closest" : "x unified",
      margin: { l: 56, r: 16, t: !many && traces.length > 1 ? 28 : 10, b: 34 },
      yaxis: { ticksuffix: unit.suffix === "%" || unit.suffix.startsWith("B") ? unit.suffix : unit.suffix ? ` ${unit.suffix}` : "",
        tickformat: unit.suffix === "%" ? "" : "~s",
        rangemode: "tozero", range: unit.max === 100 ? [0, 100] : undefined, autorange: unit.max !== 100,
        fixedrange: true },
    }));
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

