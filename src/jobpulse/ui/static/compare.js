// Compare jobs: pick several, overlay each metric on one shared x-range (one request per metric), the charts in
// sections by prefix and the series named as on every page (names.js).

import { api, jobPath } from "./api.js";
import { clear, debounce, h, replace, segmented } from "./dom.js";
import { badge, dateTime, duration, jobDuration, num } from "./format.js";
import { ChartSections, seriesLabel } from "./names.js";
import { ChartView, describeRange, ScalarChart } from "./scalars.js";
import { app, banner, boot, done } from "./shell.js";
import { color } from "./theme.js";

const MAX_JOBS = 20;
const params = new URLSearchParams(location.search);
let chosen = [...new Set(boot.jobs || [])].slice(0, MAX_JOBS);
const info = new Map();
const catalogs = new Map();
const view = new ChartView({ axis: params.get("axis") === "time" ? "time" : "iter" });
let metricFilter = params.get("metric") || "";


const chips = h("div", { class: "chips", style: { display: "contents" } });
const addInput = h("input", { type: "search", placeholder: "Add a job…", "aria-label": "Add a job to compare", autocomplete: "off" });
const suggest = h("div", { class: "card suggest", hidden: true });
const summary = h("div", { class: "table-wrap" });
const sections = new ChartSections({ onOpen: () => view.loadVisible() });
const notes = h("div");
const rangeText = h("span", { class: "muted" });
const reset = h("button", { class: "btn btn-sm", type: "button", hidden: true, onclick: () => view.setRange(null) }, "Reset zoom");
const filter = h("input", { type: "search", placeholder: "Filter metrics", "aria-label": "Filter metrics", value: metricFilter });
const smoothing = h("input", { type: "range", min: 0, max: 0.99, step: 0.01, value: 0, "aria-label": "Smoothing" });
view.onChange = () => { rangeText.textContent = describeRange(view); reset.hidden = !view.range; };

function syncUrl() {
  const url = new URL(location.href);
  if (chosen.length) url.searchParams.set("jobs", chosen.join(",")); else url.searchParams.delete("jobs");
  if (metricFilter) url.searchParams.set("metric", metricFilter); else url.searchParams.delete("metric");
  if (view.axis === "time") url.searchParams.set("axis", "time"); else url.searchParams.delete("axis");
  history.replaceState(null, "", url);
}

const jobColor = (job) => color(Math.max(0, chosen.indexOf(job)));

function renderChips() {
  replace(chips, chosen.map((job) => h("span", { class: "chip", dataset: { job } },
    h("span", { class: "legend-dot", style: { background: jobColor(job) } }), job,
    h("button", { type: "button", class: "icon-btn", style: { width: "18px", height: "18px" }, "aria-label": `Remove ${job}`,
      onclick: () => { chosen = chosen.filter((j) => j !== job); refresh(); } }, h("span", { class: "x" }, "×")))));
}

async function loadJobs() {
  const missing = [];
  await Promise.all(chosen.map(async (job) => {
    if (info.has(job)) return;
    try {
      const [detail, catalog] = await Promise.all([api(jobPath(job)), api(`${jobPath(job)}/scalars`)]);
      info.set(job, detail.job);
      catalogs.set(job, catalog.metrics);
    } catch (error) {
      if (error.status === 404) missing.push(job); else throw error;
    }
  }));
  if (missing.length) {
    chosen = chosen.filter((j) => !missing.includes(j));
    clear(notes).append(h("div", { class: "alert alert-warn" },
      `${missing.map((j) => `“${j}”`).join(", ")} ${missing.length === 1 ? "does" : "do"} not exist (deleted, or outside your projects), so ${missing.length === 1 ? "it is" : "they are"} left out.`));
  }
}

// The first series of the shared metrics, a column each in the summary.
function sharedSeries(count) {
  return sharedMetrics().flatMap((m) => [...m.variants].sort().map((variant) => ({ metric: m.metric, variant })))
    .slice(0, count);
}

function renderSummary(latest) {
  const columns = sharedSeries(4);
  const headers = ["", "Job", "Status", "Started", "Duration", ...columns.map((c) => seriesLabel(c.metric, c.variant))];
  const rows = chosen.map((job) => {
    const j = info.get(job);
    const values = latest[job] || [];
    return h("tr", {}, h("td", {}, h("span", { class: "legend-dot", style: { background: jobColor(job) } })),
      h("td", { class: "job-cell" }, h("a", { class: "name", href: `/jobs/${encodeURIComponent(job)}` }, j.name || job),
        h("div", { class: "id" }, job)),
      h("td", {}, badge(j.status)), h("td", {}, dateTime(j.started || j.created)),
      h("td", { class: "num" }, duration(jobDuration(j))),
      columns.map((c) => {
        const found = values.find((r) => r.metric === c.metric && r.variant === c.variant);
        return h("td", { class: "num" }, found ? num(found.value) : "–");
      }));
  });
  clear(summary).append(h("table", { class: "grid" }, h("thead", {}, h("tr", {},
    headers.map((t, i) => h("th", { class: i > 4 ? "num metric-head" : "" }, t)))), h("tbody", {}, rows)));
}

// Metrics with the number of chosen jobs that report them, the shared ones first.
function sharedMetrics() {
  const counts = new Map();
  for (const job of chosen) {
    for (const m of catalogs.get(job) || []) {
      const entry = counts.get(m.metric) || { metric: m.metric, jobs: 0, variants: new Set() };
      entry.jobs += 1;
      for (const v of m.variants) entry.variants.add(v.variant);
      counts.set(m.metric, entry);
    }
  }
  return [...counts.values()].sort((a, b) => (b.jobs - a.jobs) || a.metric.localeCompare(b.metric));
}

function renderCharts() {
  view.clear();
  sections.clear();
  if (chosen.length < 1) return;
  const dashes = ["solid", "dash", "dot", "dashdot", "longdash"];
  for (const entry of sharedMetrics()) {
    const variants = [...entry.variants];
    const chart = new ScalarChart({ metric: entry.metric, source: { jobs: [...chosen] },
      meta: `${entry.jobs} of ${chosen.length} jobs`,
      label: (s) => (variants.length > 1 ? `${s.job} · ${s.variant}` : s.job),
      colorOf: (s) => jobColor(s.job), dashOf: (s) => dashes[Math.max(0, variants.indexOf(s.variant)) % dashes.length] });
    view.add(chart);
    sections.add(entry.metric, chart.el);
  }
  applyFilter();
  view.loadVisible();
}

function applyFilter() {
  const text = metricFilter.toLowerCase();
  for (const chart of view.charts) chart.el.hidden = Boolean(text) && !chart.metric.toLowerCase().includes(text);
  sections.sync();
}

async function refresh() {
  syncUrl();
  renderChips();
  try {
    await loadJobs();
  } catch (error) {
    banner(error.message);
    return;
  }
  syncUrl();
  renderChips();
  if (!chosen.length) {
    clear(summary).append(h("div", { class: "empty-state" }, h("h2", {}, "Pick jobs to compare"),
      h("p", { class: "muted" }, "Add two or more jobs above, or tick them in the jobs list and press Compare. " +
        "Each metric is drawn for all of them on one shared x-range.")));
    view.clear();
    sections.clear();
    return;
  }
  const latest = await api("/jp/v1/scalars/latest", { method: "POST", body: { jobs: chosen } }).then((d) => d.jobs).catch(() => ({}));
  renderSummary(latest);
  renderCharts();
}

// -- job picker -----------------------------------------------------------------------------
let active = -1;
const search = debounce(async () => {
  const text = addInput.value.trim();
  let found = [];
  try {
    found = (await api("/jp/v1/jobs", { params: { q: text, limit: 12 } })).jobs.filter((j) => !chosen.includes(j.job));
  } catch { found = []; }
  active = -1;
  replace(suggest, found.length ? found.map((j) => h("button", { type: "button", dataset: { job: j.job },
    onmousedown: (event) => { event.preventDefault(); pick(j.job); } }, badge(j.status), h("span", {}, j.name || j.job), h("span", { class: "id" }, j.job)))
    : h("div", { class: "notice" }, "No other jobs match."));
  suggest.hidden = false;
}, 200);

function pick(job) {
  if (!chosen.includes(job) && chosen.length < MAX_JOBS) chosen.push(job);
  addInput.value = "";
  suggest.hidden = true;
  refresh();
}

addInput.addEventListener("focus", search);
addInput.addEventListener("input", search);
addInput.addEventListener("blur", () => { suggest.hidden = true; });
addInput.addEventListener("keydown", (event) => {
  const buttons = [...suggest.querySelectorAll("button")];
  if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    event.preventDefault();
    active = (active + (event.key === "ArrowDown" ? 1 : -1) + buttons.length) % Math.max(1, buttons.length);
    buttons.forEach((b, i) => b.classList.toggle("active", i === active));
  } else if (event.key === "Enter") {
    event.preventDefault();
    const target = buttons[active] || buttons[0];
    if (target) pick(target.dataset.job);
    else if (addInput.value.trim()) pick(addInput.value.trim());
  } else if (event.key === "Escape") suggest.hidden = true;
});
filter.addEventListener("input", debounce(() => { metricFilter = filter.value.trim(); syncUrl(); applyFilter(); }, 150));
smoothing.addEventListener("input", debounce(() => view.setSmoothing(Number(smoothing.value)), 60));

app.append(
  h("div", { class: "page-head" }, h("div", { class: "title" }, h("h1", {}, "Compare jobs"),
    h("div", { class: "sub" }, "Each metric of the chosen jobs on one shared x-range and bucket width"))),
  notes,
  h("section", { class: "card" }, h("div", { class: "picker" }, chips, h("div", { class: "add" }, addInput, suggest)),
    h("div", { style: { borderTop: "1px solid var(--border)" } }, summary)),
  h("div", { class: "toolbar" }, h("div", { class: "search" }, filter),
    h("label", { class: "field" }, "X axis", segmented([["iter", "Step"], ["time", "Time"]], view.axis, (v) => { view.setAxis(v); syncUrl(); }, "X axis")),
    h("label", { class: "field" }, "Smoothing", smoothing), rangeText, reset),
  sections.el);
done();
refresh();
