// The job page: description and storage, scalar charts, system metrics, plots and images, details.

import { api, jobPath } from "./api.js";
import { clear, debounce, h, segmented } from "./dom.js";
import { badge, bytes, clock, dateTime, duration, fullTime, jobDuration, num } from "./format.js";
import { hierarchy, rows as treeRows, shapeText } from "./hierarchy.js";
import { InsightsPanel, jobBadge, loadFindingMarks, onFindingMarks } from "./insights.js";
import { MediaPanel } from "./media.js";
import { ChartSections } from "./names.js";
import { ChartView, describeRange, ScalarChart } from "./scalars.js";
import { app, banner, boot, done, errorState, poll, setTitle } from "./shell.js";
import { SystemPanel } from "./system.js";

const JOB = boot.job;
const params = new URLSearchParams(location.search);
const at = params.has("at") ? Number(params.get("at")) : null;

// Ask for everything the first screen needs at once, before building anything.
const jobRequest = api(jobPath(JOB));
const catalogRequest = api(`${jobPath(JOB)}/scalars`);

const view = new ChartView({ axis: params.get("axis") === "time" || at ? "time" : "iter", smoothing: 0, marker: at });
let system = null;
let stopped = false;
const els = {};

function logsLink(ms, text) {
  return h("a", { class: "btn btn-sm", href: `/jobs/${encodeURIComponent(JOB)}/logs?at=${Math.round(ms)}` }, text);
}

function header(job) {
  return h("div", {},
    h("div", { class: "crumbs" }, h("a", { href: "/" }, "Jobs"), "/",
      h("a", { href: `/?project=${encodeURIComponent(job.project)}` }, job.project), "/", h("span", {}, job.job)),
    h("div", { class: "page-head", style: { marginTop: "8px" } },
      h("div", { class: "title" },
        h("h1", {}, h("span", {}, job.name || job.job), els.badge = badge(job.status), jobBadge()),
        h("div", { class: "sub" }, h("span", { class: "mono" }, job.job), " · ", job.project,
          (job.tags || []).length ? [" · ", job.tags.map((t) => [h("span", { class: "tag" }, t), " "])] : null)),
      h("div", { class: "actions" },
        h("a", { class: "btn", href: `/jobs/${encodeURIComponent(job.job)}/logs` }, "Logs"),
        h("a", { class: "btn", href: `/compare?jobs=${encodeURIComponent(job.job)}` }, "Compare…"))));
}

function fact(k, v, title) {
  return h("div", { class: "fact" }, h("div", { class: "k" }, k), h("div", { class: "v", title: title || "" }, v));
}

// The job's start: its own, or its first worker's when a worker reports an earlier one.
function effective(job, workers) {
  const starts = workers.map((w) => w.started).filter(Boolean);
  const own = job.started || job.created;
  const started = starts.length ? Math.min(own, ...starts) : own;
  return { ...job, started };
}

function facts(job, workers, usage) {
  job = effective(job, workers);
  const it = job.instance_type || {};
  // the instance type the job was given, else the one its agent reported from the worker's hardware
  const gpuMemory = it.gpu_memory_limit_mib ? ` · ${bytes(it.gpu_memory_limit_mib * 1048576)} each` : "";
  const gpus = it.gpu_count ? `${it.gpu_count}× ${it.gpu_type || "GPU"}${gpuMemory}` : "–";
  const counts = {};
  for (const w of workers) counts[w.status] = (counts[w.status] || 0) + 1;
  const shape = shapeText(hierarchy(workers)); // "2 nodes × 4 ranks": the statuses move to its tooltip
  const workerText = shape || (workers.length ? `${workers.length}` : "–");
  const workerSub = Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(", ");
  return h("div", { class: "card facts" },
    fact("Duration", els.duration = h("span", { class: "num" }, duration(jobDuration(job)))),
    fact("Started", dateTime(job.started || job.created), fullTime(job.started || job.created)),
    fact(job.ended ? "Ended" : "Last update", dateTime(job.ended || job.updated), fullTime(job.ended || job.updated)),
    fact("Instance", it.name || it.id || "–", it.id || ""),
    fact("Accelerators per worker", gpus),
    fact("Workers", [workerText, workerSub && !shape ? h("small", {}, ` ${workerSub}`) : null],
      shape ? `${workers.length} workers: ${workerSub}` : ""),
    fact("CPU · memory per worker", it.millicpu_limit ? `${num(it.millicpu_limit / 1000)} cores · ${bytes((it.memory_limit_mib || 0) * 1048576)}` : "–"),
    fact("Storage", usage ? [bytes(usage.bytes + (usage.files ? usage.files.bytes : 0)),
      h("small", {}, ` ${num(usage.rows)} rows`)] : "–"));
}

function errorBox(job) {
  if (!job.error_message) return null;
  return h("div", { class: "alert alert-bad", role: "status" },
    h("div", {}, h("strong", {}, job.status === "failed" ? "Job failed" : "Error"), h("pre", {}, job.error_message)));
}

function markerNote() {
  if (!at) return null;
  return h("div", { class: "alert alert-info time-marker" },
    h("span", {}, "Charts around ", h("b", {}, fullTime(at)), ", the time of the log line you came from (red dotted line)."),
    logsLink(at, "← Back to the logs at this time"),
    h("a", { class: "btn btn-sm btn-quiet", href: location.pathname }, "Clear"));
}

// -- metrics tab ------------------------------------------------------------------------------

function metricsPanel(catalog) {
  const panel = h("div", { class: "metrics-panel" });
  const metrics = catalog.metrics;
  if (!metrics.length) {
    panel.append(h("div", { class: "card empty-state" }, h("h2", {}, "No scalars yet"),
      h("p", { class: "muted" }, "Metrics the job logs with jobpulse.log({...}, step) appear here as they arrive.")));
    return panel;
  }
  const rangeText = h("span", { class: "muted range-text" });
  const reset = h("button", { class: "btn btn-sm", type: "button", hidden: true, onclick: () => view.setRange(null) }, "Reset zoom");
  const cursor = h("span", { class: "cursor-link" });
  const smoothValue = h("span", { class: "num muted", style: { width: "32px" } }, "0");
  const slider = h("input", { type: "range", min: 0, max: 0.99, step: 0.01, value: 0, "aria-label": "Smoothing",
    oninput: () => { smoothValue.textContent = slider.value; applySmoothing(Number(slider.value)); } });
  const applySmoothing = debounce((v) => view.setSmoothing(v), 60);
  const axis = segmented([["iter", "Step"], ["time", "Time"]], view.axis, (v) => { view.setAxis(v); syncUrl(); }, "X axis");
  const search = h("input", { type: "search", placeholder: "Filter metrics", "aria-label": "Filter metrics" });
  const sections = new ChartSections({ onOpen: () => view.loadVisible() });
  const cards = new Map();

  view.onChange = () => {
    rangeText.textContent = describeRange(view);
    reset.hidden = !view.range;
  };
  view.onTimeClick = (ms) => {
    view.setMarker(ms);
    if (system) system.setMarker(ms);
    clear(cursor).append(h("span", { class: "muted" }, `${clock(ms)} `), logsLink(ms, "Logs at this time →"));
  };

  const addMetric = (entry) => {
    const variants = entry.variants.map((v) => v.variant);
    const points = entry.variants.reduce((sum, v) => sum + v.points, 0);
    const ranks = [...new Set(entry.variants.flatMap((v) => v.workers || []))];
    const chart = new ScalarChart({ metric: entry.metric, source: { job: JOB }, ranks,
      meta: `${variants.length > 1 ? `${variants.length} variants · ` : ""}${num(points)} points` });
    view.add(chart);
    cards.set(entry.metric, chart);
    sections.add(entry.metric, chart.el);
  };
  for (const entry of metrics) addMetric(entry);
  panel.addMetrics = (list) => { for (const entry of list) if (!cards.has(entry.metric)) addMetric(entry); };

  search.addEventListener("input", debounce(() => {
    const text = search.value.trim().toLowerCase();
    for (const [metric, chart] of cards) chart.el.hidden = Boolean(text) && !metric.toLowerCase().includes(text);
    sections.sync();
  }, 120));

  panel.append(h("div", { class: "toolbar", style: { marginBottom: "16px" } },
    h("div", { class: "search" }, search),
    h("label", { class: "field" }, "X axis", axis),
    h("label", { class: "field" }, "Smoothing", slider, smoothValue),
    rangeText, reset, h("div", { class: "spacer" }), cursor), sections.el);
  if (at) {
    const first = Math.min(...metrics.flatMap((m) => m.variants.map((v) => v.first_ts)));
    const last = Math.max(...metrics.flatMap((m) => m.variants.map((v) => v.last_ts)));
    const half = Math.min(3600e3, Math.max(120e3, (last - first) * 0.05));
    view.range = [Math.round(at - half), Math.round(at + half)];
    view.onChange();
  }
  return panel;
}

function syncUrl() {
  const url = new URL(location.href);
  if (view.axis === "time") url.searchParams.set("axis", "time");
  else url.searchParams.delete("axis");
  history.replaceState(null, "", url);
}

// -- details tab ------------------------------------------------------------------------------

// A row of the workers card: a node (registered or only named by its ranks), a rank under it, or a lone process.
function workerRow({ node, worker: w, depth }) {
  const name = w ? w.worker : node.name;
  const logs = depth === 0 && node ? `node=${encodeURIComponent(node.name)}` : `worker=${encodeURIComponent(name)}`;
  const host = (w && w.host) || (node && !depth ? (node.ranks.find((r) => r.host) || {}).host : "") || "–";
  return h("tr", { class: depth ? "rank-row" : node ? "node-row" : "", dataset: { worker: name } },
    h("td", { class: "mono", style: depth ? { paddingLeft: "28px" } : {} }, depth ? `└ ${name}` : name),
    h("td", {}, w ? w.kind : "node"), h("td", {}, host), h("td", { class: "num" }, w ? w.local_rank ?? "–" : "–"),
    h("td", {}, w ? badge(w.status) : "–"), h("td", { class: "num" }, w ? w.exit_code ?? "–" : "–"),
    h("td", {}, w ? dateTime(w.started) : "–"), h("td", {}, w ? dateTime(w.ended) : "–"),
    h("td", {}, h("a", { href: `/jobs/${encodeURIComponent(JOB)}/logs?${logs}` }, "logs")));
}

function detailsPanel(job, workers, usage) {
  const page = { n: 0 };
  const size = 50;
  const body = h("tbody");
  const pager = h("div", { class: "pager" });
  const tree = treeRows(hierarchy(workers)); // nodes, each followed by its ranks, then lone processes
  const renderWorkers = () => {
    clear(body);
    for (const row of tree.slice(page.n * size, (page.n + 1) * size)) body.append(workerRow(row));
    const pages = Math.max(1, Math.ceil(tree.length / size));
    clear(pager).append(h("span", {}, `${workers.length} workers`), h("div", { class: "right" },
      h("button", { class: "btn btn-sm", disabled: page.n === 0, onclick: () => { page.n -= 1; renderWorkers(); } }, "Previous"),
      h("span", {}, `${page.n + 1} / ${pages}`),
      h("button", { class: "btn btn-sm", disabled: page.n >= pages - 1, onclick: () => { page.n += 1; renderWorkers(); } }, "Next")));
  };
  renderWorkers();
  const kv = (obj) => h("dl", { class: "kv" }, Object.entries(obj || {}).flatMap(([k, v]) =>
    [h("dt", {}, k), h("dd", {}, typeof v === "object" ? JSON.stringify(v) : String(v))]));
  const kinds = usage ? Object.entries(usage.kinds) : [];
  const colors = ["#3b82f6", "#10b981", "#f59e0b", "#8b5cf6", "#94a3b8"];
  const total = usage ? usage.bytes + (usage.files ? usage.files.bytes : 0) : 0;
  const usageCard = h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Storage"),
    h("div", { class: "right muted" }, usage ? bytes(total) : "–")),
  h("div", { class: "card-body" }, usage ? [
    h("div", { class: "usage-bar" }, kinds.map(([, v], i) => h("span", { style: { width: `${(100 * v.bytes) / Math.max(1, total)}%`, background: colors[i % colors.length] } })),
      h("span", { style: { width: `${(100 * usage.files.bytes) / Math.max(1, total)}%`, background: "#ec4899" } })),
    h("table", { class: "grid usage" }, h("thead", {}, h("tr", {}, h("th", {}, "Kind"), h("th", { class: "num" }, "Rows"), h("th", { class: "num" }, "On disk"))),
      h("tbody", {}, kinds.map(([k, v], i) => h("tr", {}, h("td", {}, h("span", { class: "legend-dot", style: { background: colors[i % colors.length] } }), k),
        h("td", { class: "num" }, num(v.rows)), h("td", { class: "num" }, bytes(v.bytes)))),
      h("tr", {}, h("td", {}, h("span", { class: "legend-dot", style: { background: "#ec4899" } }), "files"),
        h("td", { class: "num" }, `${num(usage.files.files)} files`), h("td", { class: "num" }, bytes(usage.files.bytes)))))]
    : h("p", { class: "muted" }, "Storage usage is not available.")));
  return h("div", { class: "details-grid" },
    h("div", { style: { display: "grid", gap: "16px" } },
      h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Workers")),
        h("div", { class: "table-wrap" }, h("table", { class: "grid workers" }, h("thead", {}, h("tr", {},
          ["Worker", "Kind", "Host", "Local rank", "Status", "Exit code", "Started", "Ended", ""].map((t) => h("th", {}, t)))),
        body)), pager),
      usageCard),
    h("div", { style: { display: "grid", gap: "16px" } },
      h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Job")), h("div", { class: "card-body" },
        kv({ job: job.job, project: job.project, status: job.status, created: fullTime(job.created),
          started: job.started ? fullTime(job.started) : "–", ended: job.ended ? fullTime(job.ended) : "–",
          leader: job.leader || "–", tags: (job.tags || []).join(", ") || "–" }))),
      h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Instance type")),
        h("div", { class: "card-body" }, Object.keys(job.instance_type || {}).length ? kv(job.instance_type) : h("span", { class: "muted" }, "Not reported"))),
      h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Configuration")),
        h("div", { class: "card-body" }, Object.keys(job.config || {}).length ? kv(job.config) : h("span", { class: "muted" }, "Not reported")))));
}

// -- page -------------------------------------------------------------------------------------

function tabs(panels) {
  const bar = h("div", { class: "tabs", role: "tablist" });
  const select = (name) => {
    for (const [key, panel] of Object.entries(panels)) {
      panel.el.hidden = key !== name;
      bar.querySelector(`[data-tab="${key}"]`).setAttribute("aria-selected", String(key === name));
    }
    if (panels[name].open) panels[name].open();
    if (location.hash.slice(1) !== name) history.replaceState(null, "", `${location.pathname}${location.search}#${name}`);
  };
  for (const [key, panel] of Object.entries(panels)) {
    bar.append(h("button", { type: "button", role: "tab", dataset: { tab: key }, onclick: () => select(key) }, panel.label,
      panel.count !== undefined ? h("span", { class: "count" }, String(panel.count)) : null));
  }
  bar.select = select;
  return bar;
}

async function main() {
  let job;
  let workers;
  try {
    ({ job, workers } = await jobRequest);
  } catch (error) {
    app.append(errorState(error, "Job"));
    done();
    return;
  }
  setTitle(job.name || job.job);
  const usageRequest = api(`${jobPath(JOB)}/usage`).catch(() => null);
  let catalog;
  try {
    catalog = await catalogRequest;
  } catch (error) {
    catalog = { metrics: [] };
    banner(error.message);
  }
  const factsSlot = h("div", {}, facts(job, workers, null));
  const metrics = { label: "Metrics", count: catalog.metrics.length, el: metricsPanel(catalog) };
  let latestWorkers = workers; // as the poll last read them (``workers`` stays the page's first read)
  system = new SystemPanel({ job: JOB, workers: () => latestWorkers, marker: at,
    onTimeClick: (ms) => view.onTimeClick && view.onTimeClick(ms) });
  if (at) {
    system.range = view.range;
  }
  onFindingMarks(() => { for (const chart of view.charts) chart.redraw(); system.setMarker(system.marker); });
  loadFindingMarks(JOB);
  const media = new MediaPanel({ job: JOB });
  const insights = new InsightsPanel({ job: JOB, project: job.project,
    onSelect: (ms) => { view.setMarker(ms); if (system) system.setMarker(ms); } });
  const details = { label: "Details", el: h("div", {}, h("div", { class: "card notice" }, "Loading…")) };
  const panels = {
    metrics,
    system: { label: "System", el: system.el, open: () => system.open() },
    media: { label: "Plots & images", el: media.el, open: () => media.open() },
    insights: { label: "Insights", el: insights.el, open: () => insights.open() },
    details,
  };
  const bar = tabs(panels);
  onFindingMarks((findings) => { // the Insights tab counts the job's findings, open or resolved
    const tab = bar.querySelector('[data-tab="insights"]');
    tab.querySelector(".count")?.remove();
    if (findings.length) tab.append(h("span", { class: "count" }, String(findings.length)));
  });
  els.error = h("div", {}, errorBox(job));
  app.append(header(job), els.error, factsSlot, markerNote() || "", bar,
    ...Object.values(panels).map((p) => p.el));
  const initial = location.hash.slice(1);
  bar.select(panels[initial] ? initial : "metrics");
  view.loadVisible();
  window.addEventListener("hashchange", () => {
    const name = location.hash.slice(1);
    if (panels[name]) bar.select(name);
  });
  done();

  const usage = await usageRequest;
  factsSlot.replaceChildren(facts(job, workers, usage));
  details.el.replaceChildren(detailsPanel(job, workers, usage));

  let ticks = 0;
  const stop = poll(async () => {
    if (stopped) return;
    ticks += 1;
    let fresh;
    try {
      fresh = await api(jobPath(JOB));
    } catch (error) {
      if (error.status === 404) {
        stopped = true;
        stop();
        banner("This job no longer exists: it has been deleted, or your key can no longer see it.");
      }
      return;
    }
    const wasRunning = job.status === "running";
    job = fresh.job;
    latestWorkers = fresh.workers;
    els.badge.replaceWith(els.badge = badge(job.status));
    els.error.replaceChildren(...[errorBox(job)].filter(Boolean));
    els.duration.textContent = duration(jobDuration(effective(job, workers)));
    if (job.status === "running" || wasRunning) {
      view.refresh();
      if (ticks % 3 === 0) system.refresh();
      if (ticks % 6 === 0) loadFindingMarks(JOB);
      const next = await api(`${jobPath(JOB)}/scalars`).catch(() => null);
      if (next && metrics.el.addMetrics) metrics.el.addMetrics(next.metrics);
      else if (next && next.metrics.length) {
        const panel = metricsPanel(next);
        panel.hidden = metrics.el.hidden;
        metrics.el.replaceWith(panel);
        metrics.el = panel;
        view.loadVisible();
      }
    }
  }, 10000);
}

main();
