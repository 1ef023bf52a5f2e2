// The jobs list: projects, status filter, search, last values of key metrics, paging, live refresh.

import { api, jobPath, limiter } from "./api.js";
import { clear, debounce, h, replace } from "./dom.js";
import { ago, badge, dateTime, duration, fullTime, jobDuration, num } from "./format.js";
import { markJobs, projectStrip } from "./insights.js";
import { seriesLabel } from "./names.js";
import { app, done, poll } from "./shell.js";

const PAGE = 50;
const STATUSES = ["running", "completed", "failed", "stopped", "created"];
const KEY_HINTS = [/loss/i, /acc|top1/i, /f1|auc|map|iou|bleu|score/i, /reward|return/i, /ppl|perplex/i];
const params = new URLSearchParams(location.search);
const state = { project: params.get("project") || "", status: params.get("status") || "", q: params.get("q") || "",
  cursors: [null], page: 0, selected: new Set() };
const workerCounts = new Map();
const workerSlot = limiter(4);
let jobs = [];
let latest = {};
let nextCursor = null;
let loadToken = 0;

const projectsBox = h("nav", { class: "card projects", "aria-label": "Projects" });
const table = h("table", { class: "grid jobs-table" });
const pager = h("div", { class: "pager" });
const live = h("span", { class: "live" }, "Live");
const compareBtn = h("a", { class: "btn", "aria-disabled": "true", href: "#" }, "Compare");
const searchInput = h("input", { type: "search", placeholder: "Search jobs by name or id", "aria-label": "Search jobs",
  value: state.q });
const statusSelect = h("select", { "aria-label": "Status" }, h("option", { value: "" }, "All statuses"),
  STATUSES.map((s) => h("option", { value: s }, s[0].toUpperCase() + s.slice(1))));
statusSelect.value = state.status;
const body = h("div", { class: "table-wrap" }, table);
const insightStrip = projectStrip();

function syncUrl() {
  const url = new URL(location.href);
  for (const name of ["project", "status", "q"]) {
    if (state[name]) url.searchParams.set(name, state[name]);
    else url.searchParams.delete(name);
  }
  history.replaceState(null, "", url);
}

function restart() {
  state.cursors = [null];
  state.page = 0;
  syncUrl();
  load();
}

searchInput.addEventListener("input", debounce(() => { state.q = searchInput.value.trim(); restart(); }, 250));
statusSelect.addEventListener("change", () => { state.status = statusSelect.value; restart(); });

async function loadProjects() {
  const { projects } = await api("/jp/v1/projects");
  const total = projects.reduce((sum, p) => sum + p.jobs, 0);
  const button = (value, label, count, running) => h("button", { type: "button", "aria-pressed": String(state.project === value),
    title: running ? `${running} running` : "", onclick: () => { state.project = value; restart(); loadProjects(); } },
  h("span", {}, label), h("span", { class: "count" }, num(count)));
  replace(projectsBox, h("h3", {}, "Projects"), button("", "All projects", total),
    projects.map((p) => button(p.project, p.project, p.jobs, p.running)));
}

// Up to three metric/variant pairs for the list, each named as names.js names a series ("val/acc",
// "loss · train"): loss- and accuracy-like metrics first, one variant of each metric before a second one,
// then what most jobs on the page report.
const keyOf = (row) => seriesLabel(row.metric, row.variant);

function keyMetrics() {
  const counts = new Map();
  for (const rows of Object.values(latest)) {
    for (const row of rows) {
      const entry = counts.get(keyOf(row)) || { key: keyOf(row), metric: row.metric, variant: row.variant, n: 0 };
      entry.n += 1;
      counts.set(entry.key, entry);
    }
  }
  const rank = (e) => {
    const hint = KEY_HINTS.findIndex((re) => re.test(e.metric));
    return hint === -1 ? KEY_HINTS.length : hint;
  };
  const sorted = [...counts.values()].sort((a, b) => rank(a) - rank(b) || b.n - a.n
    || /train/.test(b.variant) - /train/.test(a.variant) || a.key.localeCompare(b.key));
  const firsts = [];
  const rest = [];
  const seen = new Set();
  for (const e of sorted) {
    if (rank(e) < KEY_HINTS.length && !seen.has(e.metric)) { firsts.push(e); seen.add(e.metric); } else rest.push(e);
  }
  const hinted = rest.filter((e) => rank(e) < KEY_HINTS.length);
  const others = rest.filter((e) => rank(e) === KEY_HINTS.length);
  return [...firsts, ...hinted, ...others].slice(0, 3).map((e) => e.key);
}

function valueOf(job, key) {
  const rows = latest[job] || [];
  return rows.find((r) => keyOf(r) === key) || null;
}

function render() {
  const metrics = keyMetrics();
  clear(table).append(h("thead", {}, h("tr", {},
    h("th", { style: { width: "32px" } }, ""), h("th", {}, "Status"), h("th", {}, "Job"), h("th", {}, "Project"),
    h("th", { class: "num" }, "Workers"), h("th", {}, "Started"), h("th", { class: "num" }, "Duration"),
    metrics.map((m) => h("th", { class: "num metric-head", title: `last value of ${m}` }, m)),
    h("th", {}, "Updated"))));
  const tbody = h("tbody");
  const now = Date.now();
  for (const job of jobs) {
    const href = `/jobs/${encodeURIComponent(job.job)}`;
    const check = h("input", { type: "checkbox", "aria-label": `Select ${job.job} to compare`, checked: state.selected.has(job.job),
      onclick: (event) => event.stopPropagation(),
      onchange: () => { if (check.checked) state.selected.add(job.job); else state.selected.delete(job.job); updateCompare(); } });
    const workers = workerCounts.get(job.job);
    tbody.append(h("tr", { class: "clickable", dataset: { job: job.job }, onclick: (event) => {
      if (event.target.closest("a, input")) return;
      if (event.metaKey || event.ctrlKey) window.open(href, "_blank"); else location.assign(href);
    } },
    h("td", {}, check), h("td", {}, badge(job.status)),
    h("td", { class: "job-cell" }, h("a", { class: "name", href }, job.name || job.job), h("div", { class: "id" }, job.job)),
    h("td", {}, job.project),
    h("td", { class: "num workers-cell" }, workers === undefined ? "…" : num(workers)),
    h("td", { title: fullTime(job.started || job.created) }, dateTime(job.started || job.created)),
    h("td", { class: "num" }, duration(jobDuration(job, now))),
    metrics.map((m) => {
      const row = valueOf(job.job, m);
      return h("td", { class: "num", title: row ? `step ${num(row.iter)} · min ${num(row.min)} · max ${num(row.max)}` : "" },
        row ? num(row.value) : h("span", { class: "faint" }, "–"));
    }),
    h("td", { class: "muted", title: fullTime(job.updated) }, ago(job.updated, now))));
  }
  table.append(tbody);
  markJobs(tbody);
  insightStrip.show(state.project);
  if (!jobs.length) {
    table.append(h("tbody", {}, h("tr", {}, h("td", { colspan: 9 + metrics.length }, h("div", { class: "empty-state" },
      h("h2", {}, state.q || state.status || state.project ? "No jobs match" : "No jobs yet"),
      h("p", { class: "muted" }, state.q || state.status || state.project
        ? "Change the search or the filters to see more jobs."
        : "Jobs appear here as soon as they send data: jobpulse.init(project, job) in the training code, " +
          "or jobpulse run -- python train.py on each node."))))));
  }
  const from = state.page * PAGE + 1;
  clear(pager).append(h("span", {}, jobs.length ? `${num(from)}–${num(from + jobs.length - 1)}` : "0 jobs"),
    h("div", { class: "right" },
      h("button", { class: "btn btn-sm", type: "button", disabled: state.page === 0, onclick: () => { state.page -= 1; load(); } }, "Previous"),
      h("button", { class: "btn btn-sm", type: "button", disabled: !nextCursor, onclick: () => {
        state.cursors[state.page + 1] = nextCursor; state.page += 1; load();
      } }, "Next")));
}

function updateCompare() {
  const chosen = [...state.selected];
  compareBtn.textContent = chosen.length ? `Compare ${chosen.length}` : "Compare";
  compareBtn.setAttribute("aria-disabled", String(chosen.length < 2));
  compareBtn.href = chosen.length >= 2 ? `/compare?jobs=${chosen.map(encodeURIComponent).join(",")}` : "#";
}
compareBtn.addEventListener("click", (event) => { if (compareBtn.getAttribute("aria-disabled") === "true") event.preventDefault(); });

async function loadWorkers(refreshRunning) {
  await Promise.all(jobs.map((job) => {
    if (typeof job.workers === "number") return null;  // the list carries the count
    if (workerCounts.has(job.job) && !(refreshRunning && job.status === "running")) return null;
    return workerSlot(() => api(`${jobPath(job.job)}/workers`)).then((data) => {
      workerCounts.set(job.job, data.workers.length);
      const cell = table.querySelector(`tr[data-job="${CSS.escape(job.job)}"] .workers-cell`);
      if (cell) cell.textContent = num(data.workers.length);
    }).catch(() => {});
  }));
}

async function load({ quiet = false, refreshWorkers = false } = {}) {
  const token = ++loadToken;
  if (!quiet) body.style.opacity = "0.6";
  try {
    const data = await api("/jp/v1/jobs", { params: { project: state.project, status: state.status, q: state.q,
      limit: PAGE, cursor: state.cursors[state.page] } });
    if (token !== loadToken) return;
    jobs = data.jobs;
    for (const job of jobs) workerCounts.set(job.job, job.workers);
    nextCursor = data.next_cursor;
    latest = jobs.length ? (await api("/jp/v1/scalars/latest", { method: "POST", body: { jobs: jobs.map((j) => j.job) } })).jobs : {};
    if (token !== loadToken) return;
    render();
    loadWorkers(refreshWorkers);
  } catch (error) {
    clear(table).append(h("tbody", {}, h("tr", {}, h("td", {}, h("div", { class: "notice error-message" }, error.message)))));
  } finally {
    body.style.opacity = "";
  }
}

app.append(
  h("div", { class: "page-head" }, h("div", { class: "title" }, h("h1", {}, "Jobs"),
    h("div", { class: "sub" }, "Training runs reporting to this server")),
  h("div", { class: "actions" }, live, compareBtn)),
  h("div", { class: "jobs-layout" }, projectsBox,
    h("section", { class: "card" },
      h("div", { class: "card-head toolbar" }, h("div", { class: "search" }, searchInput), statusSelect),
      insightStrip, body, pager)));
done();
updateCompare();
loadProjects().catch(() => {});
load();
let ticks = 0;
poll(async () => {
  ticks += 1;
  await load({ quiet: true, refreshWorkers: ticks % 6 === 0 });
  if (ticks % 3 === 0) await loadProjects();
}, 5000);
