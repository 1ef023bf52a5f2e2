// Scalar charts from the downsampled series: mean line with a min/max band per variant (or per job),
// a shared x-range across charts that refetches finer buckets when zoomed, step or time axis, smoothing.
// A chart's first data is drawn at once by preview.js from the same traces and layout, without waiting
// for Plotly.js; the Plotly chart replaces the preview in place when the library has loaded.
// A metric reported by several ranks (workers) shows the leader's series; a switch in its card shows every
// rank's series, or their envelope (per bucket the min / median / max across ranks).

import { api, jobPath, limiter } from "./api.js";
import { h, isVisible, segmented, whenVisible } from "./dom.js";
import { duration, fullTime, num } from "./format.js";
import { boot } from "./shell.js";
import {
  alpha, baseLayout, color, CONFIG, followTheme, fromPlotTime, loadPlotly, markerShape, markFirstChart,
  markInteractiveChart, themeColors, toPlotTime,
} from "./plot.js";
import { findingAxis, findingShapes, findingTraces } from "./insights.js";
import { drawPreview, hasPreview, removePreview } from "./preview.js";

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

// Resolves once the browser has had a frame to paint in (soon, too, where frames are not running).
function nextPaint() {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, 100);
    requestAnimationFrame(() => setTimeout(() => { clearTimeout(timer); resolve(); }, 0));
  });
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
    if (!quiet && !this.plotted && !hasPreview(this.plot)) this.setState(null);
    const library = loadPlotly();
    library.catch(() => {}); // named below, once the data has been drawn
    try {
      const data = await fetchSlot(() => (controller.signal.aborted ? Promise.reject(new DOMException("", "AbortError"))
        : api(this.url(), { signal: controller.signal })));
      if (controller.signal.aborted) return;
      if (!performance.getEntriesByName("jp-first-data").length) performance.mark("jp-first-data");
      this.data = asSeries(data, this.workers);
      this.loadedKey = key;
      if (!this.plotted) {
        // The preview first, even with Plotly.js at hand: it draws in a few milliseconds, Plotly's
        // first plot of a chart takes a hundred or more, and the page paints in between.
        this.drawPreview();
        await (window.Plotly ? nextPaint() : library);
        if (controller.signal.aborted) return;
      }
      await this.draw(window.Plotly);
    } catch (error) {
      if (error.name === "AbortError") return;
      if (hasPreview(this.plot)) {
        this.metaEl.textContent = `Static preview: ${error.message}`;
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

  traces() {
    const { axis, smoothing } = this.view;
    const out = [];
    const series = this.data.series || [];
    const many = series.length > 1;
    series.forEach((s, i) => {
      const name = s.worker !== undefined ? `${this.label(s)} · ${s.worker}` : this.label(s);
      const count = s.envelope ? "ranks" : "n";
      const c = this.colorOf(s, i);
      const x = s.x_first.map((first, j) => {
        const mid = (first + s.x_last[j]) / 2;
        return axis === "time" ? toPlotTime(mid) : mid;
      });
      const mean = s.mean.map(numeric);
      const lo = s.min.map(numeric);
      const hi = s.max.map(numeric);
      const sparse = x.length < 60;
      if (s.count.some((n) => n > 1)) {
        out.push({ type: "scatter", mode: "lines", x, y: hi, line: { width: 0 }, hoverinfo: "skip",
          showlegend: false, legendgroup: name, name: `${name} max` });
        out.push({ type: "scatter", mode: "lines", x, y: lo, line: { width: 0 }, fill: "tonexty",
          fillcolor: alpha(c, many ? 0.1 : 0.16), hoverinfo: "skip", showlegend: false, legendgroup: name,
          name: `${name} min` });
      }
      const customdata = s.count.map((n, j) => [num(lo[j]), num(hi[j]), n, num(mean[j])]);
      const dash = this.dashOf(s, i);
      if (smoothing > 0) {
        out.push({ type: "scatter", mode: "lines", x, y: mean, line: { color: alpha(c, 0.35), width: 1 },
          hoverinfo: "skip", showlegend: false, legendgroup: name, name: `${name} raw` });
      }
      out.push({ type: "scatter", mode: sparse ? "lines+markers" : "lines", x, y: ema(mean, smoothing), name,
        legendgroup: name, customdata, marker: { size: 4, color: c },
        line: { color: c, width: 1.7, dash },
        hovertemplate: smoothing > 0
          ? `%{y:.4~g} <span style="opacity:.7">raw %{customdata[3]}</span><extra>${name}</extra>`
          : `%{y:.4~g} <span style="opacity:.7">min %{customdata[0]} · max %{customdata[1]} · ${count} %{customdata[2]}</span><extra>${name}</extra>` });
    });
    return out;
  }

  layout() {
    const { axis, range, marker } = this.view;
    const xaxis = axis === "time" ? { type: "date", hoverformat: "%Y-%m-%d %H:%M:%S" } : { type: "linear", hoverformat: ",d" };
    if (range) {
      xaxis.range = axis === "time" ? range.map(toPlotTime) : range;
      xaxis.autorange = false;
    } else {
      xaxis.autorange = true;
    }
    const series = (this.data && this.data.series) || [];
    return baseLayout({
      xaxis, yaxis: { autorange: true, fixedrange: true },
      showlegend: series.length > 1,
      margin: { l: 56, r: 16, t: series.length > 1 ? 28 : 10, b: 34 },
      // the job's findings, like the marker, where the axis is time (see insights.js)
      shapes: axis === "time" ? [...findingShapes(), ...(marker ? [markerShape(toPlotTime(marker))] : [])] : [],
      ...(axis === "time" ? findingAxis() : {}),
      uirevision: this.metric,
    });
  }

  emptyMessage() {
    return this.view.range ? "No points in this range. Double-click or reset zoom to see all." : "No points yet.";
  }

  // The chart drawn without Plotly, in the box the Plotly chart will take (see preview.js).
  drawPreview() {
    if (!this.data) return;
    this.plot.querySelector(".skeleton, .chart-state")?.remove();
    if (!(this.data.series || []).length) {
      removePreview(this.plot);
      this.setState(this.emptyMessage());
      return;
    }
    drawPreview(this.plot, this.traces(), this.layout());
    this.updateMeta();
    markFirstChart();
  }

  async draw(Plotly) {
    Plotly = Plotly || window.Plotly;
    if (!Plotly || !this.data) return;
    const series = this.data.series || [];
    this.plot.querySelector(".skeleton, .chart-state")?.remove();
    if (!series.length) {
      if (this.plotted) { Plotly.purge(this.plot); this.plotted = false; }
      removePreview(this.plot);
      this.setState(this.emptyMessage());
      return;
    }
    const marks = this.view.axis === "time" ? findingTraces() : [];
    await Plotly.react(this.plot, [...this.traces(), ...marks], this.layout(), CONFIG);
    removePreview(this.plot); // after Plotly has drawn beneath it: no frame without a chart
    if (!this.plotted) {
      this.plotted = true;
      this.plot.on("plotly_relayout", (event) => this.onRelayout(event));
      this.plot.on("plotly_click", (event) => this.onClick(event));
    }
    this.updateMeta();
    markFirstChart();
    markInteractiveChart();
  }

  redraw() {
    if (!this.data) return;
    if (this.plotted) this.draw();
    else if (hasPreview(this.plot)) this.drawPreview();
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

  onRelayout(event) {
    if (event["xaxis.autorange"] || event.autosize) {
      if (event["xaxis.autorange"] && this.view.range) this.view.setRange(null);
      return;
    }
    let lo = event["xaxis.range[0]"];
    let hi = event["xaxis.range[1]"];
    if (lo === undefined && Array.isArray(event["xaxis.range"])) [lo, hi] = event["xaxis.range"];
    if (lo === undefined || hi === undefined) return;
    if (this.view.axis === "time") { lo = fromPlotTime(lo); hi = fromPlotTime(hi); }
    if (!Number.isFinite(lo) || !Number.isFinite(hi)) return;
    this.view.setRange([Math.floor(lo), Math.ceil(hi)]);
  }

  onClick(event) {
    if (this.view.axis !== "time" || !event.points || !event.points.length || !this.view.onTimeClick) return;
    this.view.onTimeClick(fromPlotTime(event.points[0].x));
  }

  destroy() {
    if (this.controller) this.controller.abort();
    this.unfollow();
    if (this.plotted && window.Plotly) window.Plotly.purge(this.plot);
    removePreview(this.plot);
    this.el.remove();
  }
}

export function describeRange(view) {
  if (!view.range) return "";
  const [lo, hi] = view.range;
  return view.axis === "time" ? `${fullTime(lo)} – ${fullTime(hi)}` : `steps ${num(lo)} – ${num(hi)}`;
}

export { themeColors };
