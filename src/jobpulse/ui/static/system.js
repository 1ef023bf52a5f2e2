// System metrics: a heat map of every worker's devices over time (one series request), and charts per
// worker and per device. Zooming any of them refetches all of them at a finer step.

import { api, jobPath } from "./api.js";
import { clear, h, isVisible } from "./dom.js";
import { fullTime, natural } from "./format.js";
import { hierarchy, nodeGroups } from "./hierarchy.js";
import { findingMarks } from "./insights.js";
import { HEAT_CELLS, HeatMap, SystemChart } from "./system-charts.js";

const NICE_S = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
const MIN_VIEW_MS = 20000; // the narrowest time range a chart shows: a short job still gets readable ticks

// The smallest round step (of at least `minS` seconds) that draws [start, end] for `series` rows within a
// cell budget.
export function chooseStep(spanMs, series, cells = HEAT_CELLS, maxCols = 360, minS = 1) {
  const cols = Math.max(24, Math.min(maxCols, Math.floor(cells / Math.max(1, series))));
  const raw = Math.max(minS, spanMs / cols / 1000);
  return 1000 * (NICE_S.find((s) => s >= raw) || NICE_S[NICE_S.length - 1]);
}

// The x-range a chart shows for data in [start, end] at `step`: at least MIN_VIEW_MS wide, so one sample
// sits in the middle of a readable axis.
export function timeView(start, end, step) {
  const hi = Math.max(end, start + step);
  const width = hi - start;
  const pad = Math.max(width * 0.02, (MIN_VIEW_MS - width) / 2);
  return { range: [start - pad, hi + pad] };
}

export class SystemPanel {
  // ``workers``: a function answering the job's registered workers as its page last read them.
  constructor({ job, workers, marker = null, onTimeClick = null }) {
    this.job = job;
    this.workersOf = workers;
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
    this.build(catalog, this.workersOf());
  }

  build(catalog, registered = []) {
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

    const tree = hierarchy(registered);
    const byNode = tree.ranks > 0;
    const choices = byNode ? this.nodeChoices(tree) : this.workers.map((w) => h("option", { value: w }, w));
    this.workerSelect = h("select", { "aria-label": byNode ? "Node" : "Worker",
      onchange: () => this.setWorker(this.workerSelect.value) },
    h("option", { value: "" }, byNode ? `All nodes (${choices.length})` : `All workers (${this.workers.length})`),
    choices);
    this.resetBtn = h("button", { class: "btn btn-sm", type: "button", hidden: true, onclick: () => this.setRange(null) },
      "Reset zoom");
    this.rangeText = h("span", { class: "muted" });
    if (this.range) {
      this.resetBtn.hidden = false;
      this.rangeText.textContent = `${fullTime(this.range[0])} – ${fullTime(this.range[1])}`;
    }
    this.el.append(h("div", { class: "toolbar" }, h("label", { class: "field" }, byNode ? "Node" : "Worker", this.workerSelect),
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

  // A choice per node that has samples (its own, or its ranks' where they sample themselves: then a group with
  // the whole node and each of them), then the workers of no node.
  nodeChoices(tree) {
    const { groups, placed } = nodeGroups(tree, new Set(this.workers));
    const choices = [];
    for (const { node, names } of groups) {
      const ranks = node.ranks.length ? ` · ${node.ranks.length} rank${node.ranks.length === 1 ? "" : "s"}` : "";
      const whole = h("option", { value: names.join(",") }, `${node.name}${ranks}`);
      choices.push(names.length === 1 ? whole : h("optgroup", { label: node.name }, whole,
        names.map((w) => h("option", { value: w }, w))));
    }
    return [...choices, ...this.workers.filter((w) => !placed.has(w)).map((w) => h("option", { value: w }, w))];
  }

  // The workers the charts show: those of the chosen node or worker, none for all.
  selected() {
    return this.worker ? this.worker.split(",") : [];
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
  series(metrics, { worker = "", device = null, cells = HEAT_CELLS, rows = 1, minStepS = 1 } = {}) {
    const [start, end] = this.span();
    const step = chooseStep(end - start, rows, cells, 360, minStepS);
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

  // A chart's drag across [lo, hi] (epoch ms): every chart shows that range.
  zoom(lo, hi) {
    const start = Math.floor(lo);
    const end = Math.ceil(hi);
    if (Number.isFinite(start) && Number.isFinite(end) && end > start) this.setRange([start, end]);
  }

  // A chart's double-click: the job's whole range again.
  reset() {
    if (this.range) this.setRange(null);
  }

  // The time range the charts show: the one asked for (or the job's), at least MIN_VIEW_MS wide.
  timeRange(step = 0) {
    const [start, end] = this.span();
    return timeView(start, end, step).range;
  }

  // What the charts draw over their data: the job's findings and the time marker (marks.js).
  marks() {
    return { findings: findingMarks(), line: this.marker };
  }

  refresh() {
    if (this.range || !this.loaded || !this.extent) return;
    this.extent = [this.extent[0], Date.now()];
    this.cache.clear();
    if (this.heat && isVisible(this.heat.el)) this.heat.load(true);
    for (const item of this.items) if (isVisible(item.el)) item.load(true);
  }
}
