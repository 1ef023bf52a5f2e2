// Insights in the UI: a badge of open findings (job header, jobs list) and the findings panel of a job.

import { api, jobPath } from "./api.js";
import { clear, h } from "./dom.js";
import { dateTime, duration, fullTime, num } from "./format.js";
import { css } from "./theme.js";

const TITLES = {
  idle_gpu: "Idle GPU", underused: "Underused GPUs", straggler: "Straggler", hang: "Hang",
  divergence: "Divergence", hardware: "Hardware", lost_worker: "Lost worker",
};
const RANK = { critical: 2, warning: 1, info: 0 };
const findingTitle = (f) => TITLES[f.kind] || f.kind;
const findingWhere = (f) => [f.worker, f.device !== "" ? `GPU ${f.device}` : ""].filter(Boolean).join(" · ") || "job";

function worst(counts) {
  return Object.keys(RANK).sort((a, b) => RANK[b] - RANK[a]).find((s) => counts[s]) || "info";
}

// A badge "N findings" coloured by the worst open severity; empty (hidden) while there is none.
export function findingsBadge(counts, href) {
  if (!counts || !counts.open) return h("span", { class: "insight-badge", hidden: true });
  const severity = worst(counts);
  const text = `${counts.open} finding${counts.open > 1 ? "s" : ""}`;
  const attrs = { class: `insight-badge insight-${severity}`, title: `${text} open (worst: ${severity})` };
  return href ? h("a", { ...attrs, href }, text) : h("span", attrs, text);
}

// The job header's badge: the open findings (those not ended) among the job's findings, kept with the marks
// (``loadFindingMarks``), so the page asks for them once.
export function jobBadge() {
  const slot = h("span", { class: "insight-slot" });
  onFindingMarks((findings) => {
    const open = findings.filter((f) => f.ended == null);
    const counts = { open: open.length };
    for (const f of open) counts[f.severity] = (counts[f.severity] || 0) + 1;
    clear(slot).append(findingsBadge(counts, "#insights"));
  });
  return slot;
}

// Add a badge to each row of the jobs list (rows carry ``data-job``) whose job has open findings.
export async function markJobs(tbody) {
  const rows = [...tbody.querySelectorAll("tr[data-job]")];
  if (!rows.length) return;
  let summary;
  try {
    summary = await api("/jp/v1/insights/summary", { params: { jobs: rows.map((r) => r.dataset.job) } });
  } catch {
    return;
  }
  for (const row of rows) {
    const counts = summary.jobs[row.dataset.job];
    const cell = row.children[1];
    if (counts && cell) cell.append(" ", findingsBadge(counts, `/jobs/${encodeURIComponent(row.dataset.job)}#insights`));
  }
}

// The job's findings as marks on its time charts (metrics on a time axis, system charts, the heat map; drawn by
// marks.js): a shaded span from each finding's start to its end (or now) and a triangle at its start whose hover
// names it. A chart on an iteration axis shows none: its points carry no time to place them by.
const marks = { findings: [], key: "", listeners: new Set() };

// Call ``fn`` whenever the job's findings change (to redraw the charts).
export function onFindingMarks(fn) { marks.listeners.add(fn); }

export function setFindingMarks(findings) {
  const key = JSON.stringify(findings.map((f) => [f.finding_id, f.started, f.ended, f.severity]));
  if (key === marks.key) return;
  Object.assign(marks, { findings, key });
  for (const fn of marks.listeners) fn(findings);
}

// Fetch the findings of ``job`` (open and resolved) for the marks.
export async function loadFindingMarks(job) {
  try {
    setFindingMarks((await api(`${jobPath(job)}/insights`)).findings);
  } catch {
    // no marks rather than a broken chart: the Insights tab says what went wrong
  }
}

function severityColor(severity) {
  const value = css(severity === "critical" ? "--bad" : severity === "warning" ? "--warn" : "--idle");
  return /^#[0-9a-f]{6}$/i.test(value) ? value : "#b45309";
}

// What a finding's mark names: what it found, where, its severity and how long it lasted.
function findingText(f, now) {
  const span = f.ended ? `${duration(f.ended - f.started)}, resolved` : `open for ${duration(now - f.started)}`;
  return `${findingTitle(f)}${f.signal ? ` (${f.signal})` : ""} · ${findingWhere(f)} — ${f.severity} · ${span}`;
}

// The marks of the job's findings for marks.js: [{start, end, color, text}], times in epoch milliseconds.
export function findingMarks() {
  const now = Date.now();
  return marks.findings.map((f) => ({ start: f.started, end: f.ended ?? now, color: severityColor(f.severity),
    text: findingText(f, now) }));
}

// One value of a finding's evidence as text: numbers rounded, the times a cause was seen (``started``, ``ended``)
// as dates, workers with their values, and a nested record (``cause_evidence``: per cause, what showed it) as its
// fields in parentheses.
function evidenceValue(name, value) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "number") return (name === "started" || name === "ended") ? dateTime(value) : num(value);
  if (Array.isArray(value)) {
    const items = value.map((x) => (x && typeof x === "object" && "worker" in x ? `${x.worker} ${num(x.value)}`
      : evidenceValue("", x)));
    return items.join(", ") || "–";
  }
  if (typeof value === "object") {
    return Object.entries(value).map(([k, v]) => (v && typeof v === "object" && !Array.isArray(v)
      ? `${k} (${evidenceValue(k, v)})` : `${k} ${evidenceValue(k, v)}`)).join(", ");
  }
  return String(value);
}

function evidenceText(evidence) {
  return Object.entries(evidence || {}).map(([k, v]) => `${k}: ${evidenceValue(k, v)}`).join(" · ");
}

function findingRow(f, onSelect) {
  const where = findingWhere(f);
  const span = f.ended ? duration(f.ended - f.started) : `${duration(Date.now() - f.started)}+`;
  return h("tr", { class: "clickable", title: "Show this time on the charts", onclick: () => onSelect(f.started) },
    h("td", {}, h("span", { class: `insight-badge insight-${f.severity}` }, f.severity)),
    h("td", {}, findingTitle(f), f.signal ? h("div", { class: "id" }, f.signal) : null),
    h("td", { class: "mono" }, where),
    h("td", { title: fullTime(f.started) }, dateTime(f.started)),
    h("td", {}, f.ended ? h("span", { title: fullTime(f.ended) }, `resolved · ${span}`) : h("b", {}, `open · ${span}`)),
    h("td", { class: "muted evidence" }, evidenceText(f.evidence)));
}

// The findings panel of a job: its findings, newest first, its GPU waste, and "Evaluate now".
export class InsightsPanel {
  constructor({ job, project, onSelect }) {
    this.job = job;
    this.onSelect = onSelect || (() => {});
    this.body = h("div", { class: "card-body" }, h("div", { class: "notice" }, "Loading…"));
    this.waste = h("span", { class: "muted" });
    this.button = h("button", { class: "btn btn-sm", type: "button", onclick: () => this.evaluate() }, "Evaluate now");
    this.el = h("section", { class: "card insights-panel" },
      h("div", { class: "card-head" }, h("h2", {}, "Findings"), this.waste, h("div", { class: "right" }, this.button)),
      this.body, project ? h("div", { class: "card-body" }, new ThresholdsForm({ project }).el,
        new WebhooksForm({ project }).el) : null);
    this.loaded = false;
  }

  open() {
    if (!this.loaded) this.refresh();
  }

  async refresh() {
    this.loaded = true;
    try {
      const [data, waste] = await Promise.all([
        api(`${jobPath(this.job)}/insights`),
        api(`${jobPath(this.job)}/insights/waste`).catch(() => null),
      ]);
      this.render(data.findings, waste);
      setFindingMarks(data.findings);
    } catch (error) {
      clear(this.body).append(h("div", { class: "notice error-message" }, error.message));
    }
  }

  render(findings, waste) {
    if (waste) {
      this.waste.textContent = ` · ${num(waste.idle_gpu_hours)} GPU-h idle, ${num(waste.underused_gpu_hours)} GPU-h underused` +
        ` of ${num(waste.gpu_hours)}`;
    }
    if (!findings.length) {
      clear(this.body).append(h("div", { class: "empty-state" }, h("h2", {}, "No findings"),
        h("p", { class: "muted" }, "Idle or underused GPUs, stragglers, hangs, divergence, hardware trouble and lost " +
          "workers show here when the detectors see them.")));
      return;
    }
    const sorted = [...findings].sort((a, b) => b.started - a.started);
    clear(this.body).append(h("div", { class: "table-wrap" }, h("table", { class: "grid findings" },
      h("thead", {}, h("tr", {}, ["Severity", "Finding", "Where", "Started", "State", "Evidence"].map((t) => h("th", {}, t)))),
      h("tbody", {}, sorted.map((f) => findingRow(f, this.onSelect))))));
  }

  async evaluate() {
    this.button.disabled = true;
    try {
      await api(`${jobPath(this.job)}/insights/evaluate`, { method: "POST" });
      await this.refresh();
    } catch (error) {
      clear(this.body).append(h("div", { class: "notice error-message" }, error.message));
    } finally {
      this.button.disabled = false;
    }
  }
}

// The jobs list's strip for one project: its GPU-hours idle and underused over the last 7 days and its open
// findings, newest first. ``show(project)`` fills it (again at most once a minute); hidden for "All projects".
export function projectStrip() {
  const strip = h("div", { class: "insight-strip", hidden: true });
  let shown = { project: null, at: 0 };
  strip.show = async (project) => {
    if (!project) {
      strip.hidden = true;
      shown = { project: null, at: 0 };
      return;
    }
    if (shown.project === project && Date.now() - shown.at < 60000) return;
    shown = { project, at: Date.now() };
    const path = `/jp/v1/projects/${encodeURIComponent(project)}/insights`;
    try {
      const [waste, open] = await Promise.all([api(`${path}/waste`), api(path, { params: { status: "open", limit: 5 } })]);
      const findings = open.findings.map((f) => h("a", { class: `insight-badge insight-${f.severity}`,
        href: `/jobs/${encodeURIComponent(f.job)}#insights`, title: evidenceText(f.evidence) },
      `${f.job}: ${findingTitle(f)}`));
      clear(strip).append(h("span", { class: "muted" }, `Last 7 days: ${num(waste.idle_gpu_hours)} GPU-h idle, ` +
        `${num(waste.underused_gpu_hours)} GPU-h underused of ${num(waste.gpu_hours)}`),
      ...(findings.length ? [" · open findings: ", ...findings] : [h("span", { class: "muted" }, " · no open findings")]));
      strip.hidden = false;
    } catch {
      strip.hidden = true;
    }
  };
  return strip;
}

// The thresholds of a project's detectors, as a form: each field shows the project's value (a changed one in
// bold) and the threshold's meaning; "Save" sends the values that differ from what the project has.
export class ThresholdsForm {
  constructor({ project }) {
    this.project = project;
    this.message = h("span", { class: "muted" });
    this.fields = h("div", { class: "threshold-fields" });
    this.el = h("details", { class: "thresholds" },
      h("summary", {}, `Thresholds of project ${project}`),
      h("form", { onsubmit: (event) => { event.preventDefault(); this.save(); } }, this.fields,
        h("div", { class: "toolbar" }, h("button", { class: "btn btn-sm", type: "submit" }, "Save"), this.message)));
    this.el.addEventListener("toggle", () => { if (this.el.open && !this.inputs) this.load(); });
  }

  path() {
    return `/jp/v1/projects/${encodeURIComponent(this.project)}/insights/thresholds`;
  }

  async load() {
    try {
      const [table, current] = await Promise.all([api("/jp/v1/insights/thresholds"), api(this.path())]);
      this.current = current.thresholds;
      this.inputs = new Map();
      clear(this.fields).append(...table.thresholds.map((t) => {
        const value = current.thresholds[t.name];
        const input = h("input", { name: t.name, value: Array.isArray(value) ? value.join(",") : String(value),
          "aria-label": t.name, size: 12 });
        this.inputs.set(t.name, { input, list: Array.isArray(t.default) });
        return h("label", { class: "field", title: t.help },
          h("span", { class: t.name in current.changed ? "changed" : "" }, t.name), input, h("small", { class: "muted" }, t.help));
      }));
    } catch (error) {
      clear(this.fields).append(h("div", { class: "notice error-message" }, error.message));
    }
  }

  async save() {
    const body = {};
    for (const [name, { input, list }] of this.inputs) {
      const text = input.value.trim();
      const number = Number(text);
      // a text that is no number goes as it is, for the server to refuse naming the field
      const value = list ? text.split(",").map((s) => s.trim()).filter(Boolean)
        : (text === "" ? null : (Number.isFinite(number) ? number : text));
      if (JSON.stringify(value) !== JSON.stringify(this.current[name])) body[name] = value;
    }
    try {
      const saved = await api(this.path(), { method: "PUT", body });
      this.current = saved.thresholds;
      this.message.textContent = "Saved.";
      this.message.className = "muted";
    } catch (error) {
      this.message.textContent = error.message;
      this.message.className = "error-message";
      const field = error.field && this.inputs.get(error.field);
      if (field) field.input.focus();
    }
  }
}

// A project's webhooks (an admin key of the project): listed, added (name, URL, format), test-sent and deleted.
export class WebhooksForm {
  constructor({ project }) {
    this.project = project;
    this.list = h("div", { class: "webhook-list" });
    this.message = h("span", { class: "muted" });
    this.url = h("input", { name: "url", type: "text", placeholder: "https://…", "aria-label": "URL", size: 40 });
    this.name = h("input", { name: "name", type: "text", placeholder: "name", "aria-label": "Name", size: 16 });
    this.format = h("select", { name: "format", "aria-label": "Format" },
      h("option", { value: "json" }, "JSON"), h("option", { value: "slack" }, "Slack"));
    this.form = h("form", { class: "toolbar", onsubmit: (event) => { event.preventDefault(); this.add(); } },
      this.name, this.url, this.format, h("button", { class: "btn btn-sm", type: "submit" }, "Add webhook"), this.message);
    this.el = h("details", { class: "webhooks" }, h("summary", {}, `Webhooks of project ${project}`),
      h("p", { class: "muted" }, "Each webhook gets a POST when a finding of the project opens and when it resolves."),
      this.list, this.form);
    this.el.addEventListener("toggle", () => { if (this.el.open && !this.loaded) this.load(); });
  }

  path(id = "") {
    return `/jp/v1/projects/${encodeURIComponent(this.project)}/insights/webhooks${id ? `/${encodeURIComponent(id)}` : ""}`;
  }

  say(text, isError = false) {
    this.message.textContent = text;
    this.message.className = isError ? "error-message" : "muted";
  }

  async load() {
    try {
      const { webhooks } = await api(this.path());
      this.loaded = true;
      this.render(webhooks);
    } catch (error) {
      clear(this.list).append(h("div", { class: "notice error-message" }, error.status === 403
        ? `Webhooks need an admin key of project ${this.project}.` : error.message));
      this.form.hidden = error.status === 403;
    }
  }

  render(webhooks) {
    if (!webhooks.length) {
      clear(this.list).append(h("p", { class: "muted" }, "No webhooks yet."));
      return;
    }
    clear(this.list).append(h("table", { class: "grid webhooks-table" },
      h("thead", {}, h("tr", {}, ["Name", "URL", "Format", "Added", ""].map((t) => h("th", {}, t)))),
      h("tbody", {}, webhooks.map((w) => this.row(w)))));
  }

  row(w) {
    const outcome = h("span", { class: "muted webhook-outcome" });
    const test = h("button", { class: "btn btn-sm", type: "button", onclick: () => this.test(w, test, outcome) }, "Test");
    const remove = h("button", { class: "btn btn-sm", type: "button", onclick: () => this.remove(w) }, "Delete");
    return h("tr", { dataset: { webhook: w.webhook_id } }, h("td", {}, w.name || "–"), h("td", { class: "mono" }, w.url),
      h("td", {}, w.format), h("td", { title: fullTime(w.created) }, dateTime(w.created)),
      h("td", {}, test, " ", remove, " ", outcome));
  }

  async add() {
    try {
      await api(this.path(), { method: "POST",
        body: { url: this.url.value.trim(), name: this.name.value.trim(), format: this.format.value } });
      this.url.value = "";
      this.name.value = "";
      this.say("Added.");
      await this.load();
    } catch (error) {
      this.say(error.message, true);
      if (error.field === "url" || error.field === "name") this[error.field].focus();
    }
  }

  async test(w, button, outcome) {
    button.disabled = true;
    outcome.textContent = "Sending…";
    try {
      const sent = await api(`${this.path(w.webhook_id)}/test`, { method: "POST" });
      outcome.textContent = sent.delivered ? `Delivered (HTTP ${sent.status})`
        : `Not delivered: ${sent.error || `HTTP ${sent.status}`}`;
      outcome.className = sent.delivered ? "muted webhook-outcome" : "error-message webhook-outcome";
    } catch (error) {
      outcome.textContent = error.message;
      outcome.className = "error-message webhook-outcome";
    } finally {
      button.disabled = false;
    }
  }

  async remove(w) {
    if (!window.confirm(`Delete the webhook ${w.name || w.url}?`)) return;
    try {
      await api(this.path(w.webhook_id), { method: "DELETE" });
      this.say("Deleted.");
      await this.load();
    } catch (error) {
      this.say(error.message, true);
    }
  }
}
