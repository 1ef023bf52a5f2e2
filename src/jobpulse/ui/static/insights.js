// Insights in the UI: a badge of open findings (job header, jobs list) and the findings panel of a job.

import { api, jobPath } from "./api.js";
import { clear, h } from "./dom.js";
import { dateTime, duration, fullTime, num } from "./format.js";

const TITLES = {
  idle_gpu: "Idle GPU", underused: "Underused GPUs", straggler: "Straggler", hang: "Hang",
  divergence: "Divergence", hardware: "Hardware", lost_worker: "Lost worker",
};
const RANK = { critical: 2, warning: 1, info: 0 };

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

// The job header's badge: filled once the open findings are known, refreshed with ``refresh()``.
export function jobBadge(job) {
  const slot = h("span", { class: "insight-slot" });
  slot.refresh = async () => {
    try {
      const data = await api(`${jobPath(job)}/insights`, { params: { status: "open" } });
      const counts = { open: data.open };
      for (const f of data.findings) counts[f.severity] = (counts[f.severity] || 0) + 1;
      clear(slot).append(findingsBadge(counts, "#insights"));
    } catch {
      clear(slot);
    }
  };
  slot.refresh();
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

function evidenceText(evidence) {
  return Object.entries(evidence || {}).map(([k, v]) => {
    if (Array.isArray(v)) {
      const items = v.map((x) => (typeof x === "object" ? `${x.worker} ${num(x.value)}` : String(x)));
      return `${k}: ${items.join(", ") || "–"}`;
    }
    return `${k}: ${typeof v === "number" ? num(v) : v ?? "–"}`;
  }).join(" · ");
}

function findingRow(f, onSelect) {
  const where = [f.worker, f.device !== "" ? `GPU ${f.device}` : ""].filter(Boolean).join(" · ") || "job";
  const span = f.ended ? duration(f.ended - f.started) : `${duration(Date.now() - f.started)}+`;
  return h("tr", { class: "clickable", title: "Show this time on the charts", onclick: () => onSelect(f.started) },
    h("td", {}, h("span", { class: `insight-badge insight-${f.severity}` }, f.severity)),
    h("td", {}, TITLES[f.kind] || f.kind, f.signal ? h("div", { class: "id" }, f.signal) : null),
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
      this.body, project ? h("div", { class: "card-body" }, new ThresholdsForm({ project }).el) : null);
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
      `${f.job}: ${TITLES[f.kind] || f.kind}`));
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
