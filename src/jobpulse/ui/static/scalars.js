// Scalar charts from the downsampled series: mean line with a min/max band per variant (or per job),
// a shared x-range across charts that refetches finer buckets when zoomed, step or time axis, smoothing.
// Drawn with uPlot (chart.js) as soon as their data arrives.
// A metric reported by several ranks (workers) shows the leader's series; a switch in its card shows every
// rank's series, or their envelope (per bucket the min / median / max across ranks).

import { api, jobPath, limiter } from "./api.js";
import { h, isVisible, segmented, whenVisible } from "./dom.js";
import { duration, fullTime, num } from "./format.js";
import { boot } from "./shell.js";
import { drawChart, markFirstChart, unmount } from "./chart.js";
import { findingMarks } from "./insights.js";
import { alpha, color, followTheme } from "./theme.js";

// Two chart queries at a time: the first charts on screen arrive sooner than if all shared the server at once.
const fetchSlot = limiter(2);

// Page-wide state shared by every chart: axis, zoomed range, smoothing, a time marker.
export class ChartView {
  constructor({ axis = "iter", range = null, smoothing = 0, marker = null, onChange = null, onTimeClick = null } = {}) {
    this.axis = axis;
    this.range = range;
    this.smoothing = smoothing;
    this.marker = marker;
    this.charts = new Set();
    this.onChange = onChange;
    this.onTimeClick = onTimeClick;
  }

  add(chart) { this.charts.add(chart); chart.view = this; }
  remove(chart) { this.charts.delete(chart); chart.destroy(); }
  clear() { for (const chart of [...this.charts]) this.remove(chart); }

  // Charts already on screen start loading now rather than on the observer's next callback.
  loadVisible() { for (const chart of this.charts) if (isVisible(chart.el)) chart.ensure(); }

  setAxis(axis) {
    if (axis === this.axis) return;
    this.axis = axis;
    this.range = null;
    this.reloadAll();
  }

  setRange(range) {
    this.range = range;
    this.reloadAll();
  }

  setSmoothing(value) {
    this.smoothing = value;
    for (const chart of this.charts) chart.redraw();
    this.changed();
  }

  setMarker(ms) {
    this.marker = ms;
    for (const chart of this.charts) chart.redraw();
    this.changed();
  }

  reloadAll() {
    for (const chart of this.charts) chart.invalidate();
    this.changed();
  }

  // Live update: charts that show the whole range fetch again (in place, no spinner).
  refresh() {
    if (this.range) return;
    for (const chart of this.charts) if (isVisible(chart.el)) chart.load({ quiet: true });
  }

  changed() { if (this.onChange) this.onChange(this); }
}

function ema(values, weight) {
  if (!weight) return values;
  const out = new Array(values.length);
  let last = 0;
  let n = 0;
  for (let i = 0; i < values.length; i += 1) {
    const v = values[i];
    if (v === null || !Number.isFinite(v)) { out[i] = null; continue; }
    last = last * weight + (1 - weight) * v;
    n += 1;
    out[i] = last / (1 - weight ** n);
  }
  return out;
}

const numeric = (v) => (typeof v === "number" ? v : null);

// What a chart of a metric reported by several ranks shows (the chart API's `workers`).
const RANK_MODES = [["leader", "Leader"], ["all", "Every rank"], ["envelope", "Envelope"]];

// An envelope's series in the shape of a chart's: the median as the line, min and max as the band, the ranks
// per bucket as the count.
function asSeries(data, workers) {
  if (workers !== "envelope") return data;
  const width = data.bucket_width || 1;
  const series = (data.series || []).map((s) => ({ ...s, mean: s.median, count: s.workers,
    x_first: s.x, x_last: s.x.map((x) => x + width - 1), envelope: true }));
  return { ...data, series };
}

export class ScalarChart {
  // source: {job} or {jobs: [...]}; label(series) names a trace.
  // ranks: the workers that reported the metric; with more than one, the card holds the switch of RANK_MODES.
  constructor({ metric, source, title, meta, label, colorOf, dashOf, wide = false, ranks = [] }) {
    this.metric = metric;
    this.source = source;
    this.label = label || ((s) => s.variant || metric);
    this.colorOf = colorOf || ((s, i) => color(i));
    this.dashOf = dashOf || (() => "solid");
    this.view = null;
    this.data = null;
    this.loadedKey = null;
    this.controller = null;
    this.plotted = false;
    this.plot = h("div", { class: "chart", dataset: { metric } }, h("div", { class: "skeleton" }));
    this.metaEl = h("span", { class: "meta" }, meta || "");
    this.workers = "leader";
    this.ranksEl = ranks.length > 1
      ? segmented(RANK_MODES, this.workers, (v) => this.setWorkers(v), `Ranks of ${metric}`) : null;
    if (this.ranksEl) this.ranksEl.classList.add("ranks");
    this.el = h("section", { class: `card chart-card${wide ? " chart-wide" : ""}`, dataset: { metric } },
      h("div", { class: "card-head" }, h("h2", { title: metric }, title || metric),
        h("div", { class: "right" }, this.metaEl, this.ranksEl)),
      this.plot);
    this.unfollow = followTheme(() => this.redraw());
    whenVisible(this.el, () => this.ensure());
  }

  key() {
    return `${this.view.axis}|${this.view.range ? this.view.range.join(":") : "all"}|${this.workers}`;
  }

  setWorkers(workers) {
    if (workers === this.workers) return;
    this.workers = workers;
    this.load();
  }

  ensure() {
    const key = this.key();
    if (this.loadedKey !== key && !(this.controller && this.loadingKey === key)) this.load();
  }

  invalidate() {
    if (isVisible(this.el)) this.load();
    else {
      this.loadedKey = null;
      whenVisible(this.el, () => this.ensure());
    }
  }

  url() {
    const { axis, range } = this.view;
    const params = new URLSearchParams({ metric: this.metric, axis, buckets: String(boot.buckets || 600) });
    if (range) {
      params.set("x_min", String(Math.floor(range[0])));
      params.set("x_max", String(Math.ceil(range[1])));
    }
    if (this.workers !== "leader") params.set("workers", this.workers);
    if (this.source.jobs) {
      params.set("jobs", this.source.jobs.join(","));
      return `/jp/v1/scalars/chart?${params}`;
    }
    return `${jobPath(this.source.job)}/scalars/chart?${params}`;
  }

  async load({ quiet = false } = {}) {
    const key = this.key();
    if (this.controller) this.controller.abort();
    const controller = new AbortController();
    this.controller = controller;
    this.loadingKey = key;
    if (!quiet && !this.plotted) this.setState(null);
    try {
      const data = await fetchSlot(() => (controller.signal.aborted ? Promise.reject(new DOMException("", "AbortError"))
        : api(this.url(), { signal: controller.signal })));
      if (controller.signal.aborted) return;
      if (!performance.getEntriesByName("jp-first-data").length) performance.mark("jp-first-data");
      this.data = asSeries(data, this.workers);
      this.loadedKey = key;
      this.draw();
    } catch (error) {
      if (error.name === "AbortError") return;
      if (this.plotted) {
        this.metaEl.textContent = error.message;
        this.metaEl.classList.add("error");
      } else this.setState(error.message, true);
    } finally {
      if (this.controller === controller) this.controller = null;
    }
  }

  setState(message, isError = false) {
    this.plot.querySelector(".chart-state, .skeleton")?.remove();
    if (message === null) this.plot.append(h("div", { class: "skeleton" }));
    else if (message) this.plot.append(h("div", { class: `chart-state${isError ? " error" : ""}` }, message));
  }

  // What the chart draws (chart.js): per series its min/max band, its raw line under smoothing, its line.
  series() {
    const { smoothing } = this.view;
    const out = [];
    const series = this.data.series || [];
    const many = series.length > 1;
    series.forEach((s, i) => {
      const name = s.worker !== undefined ? `${this.label(s)} · ${s.worker}` : this.label(s);
      const count = s.envelope ? "ranks" : "n";
      const c = this.colorOf(s, i);
      const x = s.x_first.map((first, j) => (first + s.x_last[j]) / 2);
      const mean = s.mean.map(numeric);
      const lo = s.min.map(numeric);
      const hi = s.max.map(numeric);
      if (s.count.some((n) => n > 1)) {
        out.push({ name: `${name} max`, x, y: hi, width: 0, legend: false });
        out.push({ name: `${name} min`, x, y: lo, width: 0, legend: false, fill: alpha(c, many ? 0.1 : 0.16) });
      }
      if (smoothing > 0) out.push({ name: `${name} raw`, x, y: mean, color: alpha(c, 0.35), width: 1, legend: false });
      out.push({ name, x, y: ema(mean, smoothing), color: c, dash: this.dashOf(s, i), points: x.length < 60,
        detail: smoothing > 0 ? (j) => `(raw ${num(mean[j])})`
          : (j) => `(min ${num(lo[j])} · max ${num(hi[j])} · ${count} ${s.count[j]})` });
    });
    return out;
  }

  emptyMessage() {
    return this.view.range ? "No points in this range. Double-click or reset zoom to see all." : "No points yet.";
  }

  draw() {
    if (!this.data) return;
    const series = this.data.series || [];
    if (!series.length) {
      unmount(this.plot);
      this.plotted = false;
      this.setState(this.emptyMessage());
      return;
    }
    const { axis, range, marker } = this.view;
    const time = axis === "time";
    drawChart(this.plot, {
      series: this.series(), time, xRange: range, y: { format: (v) => num(v) },
      // the job's findings, like the marker, where the axis is time (see insights.js)
      marks: time ? { findings: findingMarks(), line: marker } : null,
      onZoom: (lo, hi) => this.view.setRange([Math.floor(lo), Math.ceil(hi)]),
      onReset: () => { if (this.view.range) this.view.setRange(null); },
      onClick: (x) => { if (time && this.view.onTimeClick) this.view.onTimeClick(Math.round(x)); },
    });
    this.plotted = true;
    this.updateMeta();
    markFirstChart();
  }

  redraw() {
    if (this.plotted) this.draw();
  }

  updateMeta() {
    const series = this.data.series || [];
    const points = series.reduce((sum, s) => sum + s.count.reduce((a, b) => a + b, 0), 0);
    const width = this.data.bucket_width;
    if (series.some((s) => s.envelope)) {
      const ranks = Math.max(0, ...series.flatMap((s) => s.count));
      this.metaEl.textContent = `median, min and max of ${num(ranks)} ranks`;
      this.metaEl.classList.remove("error");
      return;
    }
    let step = "";
    if (width > 1 && this.view.axis === "time") {
      step = ` · ${width < 1000 ? `${width} ms` : width < 60000 ? `${num(width / 1000, 3)} s` : duration(width)} per bucket`;
    } else if (width > 1) {
      step = ` · ${num(width)} steps per bucket`;
    }
    this.metaEl.textContent = `${num(points)} points${step}`;
    this.metaEl.classList.remove("error");
  }

  destroy() {
    if (this.controller) this.controller.abort();
    this.unfollow();
    unmount(this.plot);
    this.el.remove();
  }
}

export function describeRange(view) {
  if (!view.range) return "";
  const [lo, hi] = view.range;
  return view.axis === "time" ? `${fullTime(lo)} – ${fullTime(hi)}` : `steps ${num(lo)} – ${num(hi)}`;
}
