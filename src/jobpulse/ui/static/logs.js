// The logs page: tail, live follow, paging back through the whole log, filters, search, download.

import { api, jobPath, query } from "./api.js";
import { debounce, h } from "./dom.js";
import { badge, bytes, fullTime, num } from "./format.js";
import { hierarchy, nodeGroups, shapeText } from "./hierarchy.js";
import { LogView } from "./logview.js";
import { app, banner, boot, done, errorState, setTitle } from "./shell.js";

const JOB = boot.job;
const LEVELS = ["debug", "info", "warning", "error", "critical"];
const params = new URLSearchParams(location.search);

async function main() {
  let job;
  let workers;
  let registered;
  try {
    [{ job, workers: registered }, { workers }] = await Promise.all([api(jobPath(JOB)), api(`${jobPath(JOB)}/logs/workers`)]);
  } catch (error) {
    app.append(errorState(error, "Job"));
    done();
    return;
  }
  setTitle(`Logs · ${job.name || job.job}`);
  const names = workers.map((w) => w.worker);
  const totalLines = workers.reduce((sum, w) => sum + w.lines, 0);
  const totalBytes = workers.reduce((sum, w) => sum + w.bytes, 0);

  const status = h("span", { class: "logs-count" });
  const followState = h("span", { class: "live paused" }, "Not following");
  const position = h("span", { class: "num" });
  const view = new LogView({ job: JOB, workers: names, onStatus: (s) => update(s) });
  const tree = hierarchy(registered);
  const nodes = nodeSelections(tree, workers);
  view.filter.worker = params.get("node") && nodes.has(params.get("node")) ? nodes.get(params.get("node")).join(",")
    : params.get("worker") || "";
  view.filter.level = (params.get("level") || "").split(",").filter((l) => LEVELS.includes(l));
  view.filter.q = params.get("q") || "";

  // -- toolbar ------------------------------------------------------------------------------
  const workerControl = names.length <= 500
    ? h("select", { "aria-label": "Worker" }, h("option", { value: "" }, `All workers (${names.length})`),
      nodes.size ? workerGroups(tree, workers) : workers.map((w) => workerOption(w.worker, w.lines)))
    : h("input", { type: "text", list: "worker-list", placeholder: "All workers", "aria-label": "Worker" });
  const datalist = names.length > 500 ? h("datalist", { id: "worker-list" },
    [...nodes.keys()].map((n) => h("option", { value: `node:${n}` })), names.map((n) => h("option", { value: n }))) : null;
  // the choice: a node ("node:<name>", its own lines and its ranks') or a worker
  const selected = () => {
    const value = workerControl.value.trim();
    return value.startsWith("node:") && nodes.has(value.slice(5)) ? { node: value.slice(5) } : { worker: value };
  };
  workerControl.value = params.get("node") && nodes.has(params.get("node")) ? `node:${params.get("node")}` : view.filter.worker;
  workerControl.addEventListener("change", () => {
    const { node, worker } = selected();
    view.filter.worker = node ? nodes.get(node).join(",") : worker;
    reload();
  });

  const levelChips = LEVELS.map((level) => h("button", { type: "button", class: "chip", dataset: { level },
    "aria-pressed": String(view.filter.level.includes(level)),
    onclick: (event) => {
      const on = event.currentTarget.getAttribute("aria-pressed") !== "true";
      event.currentTarget.setAttribute("aria-pressed", String(on));
      view.filter.level = LEVELS.filter((l) => levelChips.find((c) => c.dataset.level === l).getAttribute("aria-pressed") === "true");
      reload();
    } }, level));
  const search = h("input", { type: "search", placeholder: "Search all workers", "aria-label": "Search logs", value: view.filter.q });
  const onSearch = debounce(() => { view.filter.q = search.value.trim(); reload(); }, 350);
  search.addEventListener("input", onSearch);
  search.addEventListener("keydown", (event) => { if (event.key === "Enter") { onSearch.cancel(); view.filter.q = search.value.trim(); reload(); } });

  const followBox = h("input", { type: "checkbox", id: "follow", checked: job.status === "running" });
  followBox.addEventListener("change", () => view.setFollow(followBox.checked));
  const download = h("a", { class: "btn", download: "" }, "Download");
  const toStart = h("button", { class: "btn btn-sm", type: "button", onclick: () => { followBox.checked = false; view.follow = false; view.open({ head: true }); } }, "Start");
  const toEnd = h("button", { class: "btn btn-sm", type: "button", onclick: () => (view.hasAfter ? view.open({ tail: true }) : view.scrollToEnd()) }, "End");
  const chartsLink = h("a", { class: "btn btn-sm", href: `/jobs/${encodeURIComponent(JOB)}` }, "Charts at this time");

  view.onContext = (line) => {
    view.filter = { worker: "", level: [], q: "" };
    search.value = "";
    workerControl.value = "";
    for (const chip of levelChips) chip.setAttribute("aria-pressed", "false");
    syncUrl();
    followBox.checked = false;
    view.follow = false;
    view.open({ context: line });
    refreshCount();
  };

  function syncUrl(at = null) {
    const { worker, level, q } = view.filter;
    const chosen = selected();
    const next = `${location.pathname}${query({ ...chosen, level: level.join(","), q, at })}`;
    history.replaceState(null, "", next);
    download.href = `${jobPath(JOB)}/logs/download${query({ worker, level: level.join(","), q })}`;
  }

  let countToken = 0;
  async function refreshCount() {
    const token = ++countToken;
    const { worker, level, q } = view.filter;
    if (!worker && !level.length && !q) {
      status.textContent = `${num(totalLines)} lines · ${bytes(totalBytes)} across ${names.length} workers`;
      return;
    }
    status.textContent = "Counting…";
    try {
      const { lines } = await api(`${jobPath(JOB)}/logs/count`, { params: view.params() });
      if (token !== countToken) return;
      status.textContent = q ? `${num(lines)} line${lines === 1 ? "" : "s"} match “${q}”` : `${num(lines)} lines match the filters`;
      status.dataset.matches = String(lines);
    } catch (error) {
      if (token === countToken) status.textContent = error.message;
    }
  }

  let checking = false;
  async function checkJob() {
    if (checking) return;
    checking = true;
    try {
      await api(jobPath(JOB));
    } catch (error) {
      if (error.status === 404) {
        view.setFollow(false);
        followBox.checked = false;
        banner("This job no longer exists: it has been deleted, or your key can no longer see it.");
      }
    } finally {
      checking = false;
    }
  }

  function update(state) {
    if (state.error) {
      if (state.error.status === 404) checkJob(); else banner(state.error.message);
    }
    if (view.follow && view.source && view.source.readyState === EventSource.CLOSED) checkJob();
    const live = view.following();
    followState.className = `live${live ? "" : " paused"}`;
    followState.textContent = live ? "Following new lines" : view.follow && view.hasAfter ? "Follow resumes at the end" : "Not following";
    const [first, last] = view.visibleRange();
    position.textContent = first ? `${fullTime(first.ts)} – ${fullTime(last.ts).slice(11)}` : "";
    if (first) chartsLink.href = `/jobs/${encodeURIComponent(JOB)}?at=${first.ts}#metrics`;
  }
  view.scroller.addEventListener("scroll", debounce(() => update({}), 100), { passive: true });

  function reload() {
    syncUrl();
    refreshCount();
    view.open({ tail: true });
  }

  app.append(
    h("div", { class: "crumbs" }, h("a", { href: "/" }, "Jobs"), "/",
      h("a", { href: `/?project=${encodeURIComponent(job.project)}` }, job.project), "/",
      h("a", { href: `/jobs/${encodeURIComponent(JOB)}` }, job.job), "/", h("span", {}, "Logs")),
    h("div", { class: "page-head" },
      h("div", { class: "title" }, h("h1", {}, h("span", {}, job.name || job.job), badge(job.status)),
        h("div", { class: "sub" }, h("span", { class: "mono" }, job.job), ` · ${names.length} workers`,
          shapeText(tree) ? ` · ${shapeText(tree)}` : "")),
      h("div", { class: "actions" }, h("a", { class: "btn", href: `/jobs/${encodeURIComponent(JOB)}` }, "Charts"), download)),
    h("section", { class: "card logs-card" },
      h("div", { class: "toolbar logs-toolbar" },
        h("div", { class: "search" }, search), workerControl, datalist,
        h("div", { class: "toolbar", role: "group", "aria-label": "Levels", style: { gap: "6px" } }, levelChips),
        h("div", { class: "spacer" }),
        h("label", { class: "field", for: "follow" }, followBox, "Follow")),
      view.el,
      h("div", { class: "logs-status" }, status, position,
        h("div", { class: "right" }, followState, chartsLink, toStart, toEnd))));
  done();

  syncUrl(params.get("at"));
  refreshCount();
  view.follow = followBox.checked;
  if (params.has("at")) {
    view.follow = false;
    followBox.checked = false;
    await view.open({ at: Number(params.get("at")) });
  } else {
    await view.open({ tail: true });
  }
  update({});
}

// Each node of the job, by name: the workers whose lines are the node's (its own and its ranks').
function nodeSelections(tree, withLines) {
  const { groups } = nodeGroups(tree, new Set(withLines.map((w) => w.worker)));
  return new Map(groups.map(({ node, names }) => [node.name, names]));
}

function workerOption(worker, lines, text = worker) {
  return h("option", { value: worker }, `${text} · ${num(lines)} lines`);
}

// A group per node: the whole node (its own lines and its ranks'), the node's own lines, each rank; then the
// workers of no node.
function workerGroups(tree, withLines) {
  const lines = new Map(withLines.map((w) => [w.worker, w.lines]));
  const { groups: found, placed } = nodeGroups(tree, new Set(lines.keys()));
  const groups = [];
  for (const { node, names } of found) {
    const total = names.reduce((sum, w) => sum + lines.get(w), 0);
    const ranks = node.ranks.filter((w) => lines.has(w.worker));
    groups.push(h("optgroup", { label: node.name },
      h("option", { value: `node:${node.name}` }, `${node.name} · node and its ${ranks.length} rank${ranks.length === 1 ? "" : "s"} · ${num(total)} lines`),
      node.worker && lines.has(node.name) ? workerOption(node.name, lines.get(node.name), `${node.name} · node only`) : null,
      ranks.map((w) => workerOption(w.worker, lines.get(w.worker), w.rank == null ? w.worker : `${w.worker} · rank ${w.rank}`))));
  }
  const rest = withLines.filter((w) => !placed.has(w.worker)).map((w) => workerOption(w.worker, w.lines));
  return [...groups, ...rest];
}

main();
