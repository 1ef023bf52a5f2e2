// A virtual log viewer: holds a window of lines fetched page by page with cursors, draws only the
// rows on screen, pages earlier or later as the user scrolls, and follows new lines live (SSE).

import { api, jobPath, query } from "./api.js";
import { esc, h } from "./dom.js";
import { clock, fullTime } from "./format.js";

export const ROW = 20;
const PAGE = 500;
const KEEP = 20000;
const OVERSCAN = 20;

function highlight(text, needle) {
  if (!needle) return esc(text);
  const lower = text.toLowerCase();
  const n = needle.toLowerCase();
  let out = "";
  let from = 0;
  for (let i = lower.indexOf(n); i !== -1 && n; i = lower.indexOf(n, from)) {
    out += `${esc(text.slice(from, i))}<mark>${esc(text.slice(i, i + n.length))}</mark>`;
    from = i + n.length;
  }
  return out + esc(text.slice(from));
}

export class LogView {
  constructor({ job, workers = [], onStatus = () => {} }) {
    this.job = job;
    this.workerIndex = new Map(workers.map((w, i) => [w, i]));
    this.onStatus = onStatus;
    this.filter = { worker: "", level: [], q: "" };
    this.lines = [];
    this.hasBefore = false;
    this.hasAfter = false;
    this.busy = false;
    this.follow = false;
    this.source = null;
    this.unseen = 0;
    this.generation = 0;
    this.rows = new Map();
    this.inner = h("div", { class: "logrows" });
    this.edgeTop = h("div", { class: "logs-edge" });
    this.scroller = h("div", { class: "logview", tabindex: "0", role: "log", "aria-live": "off" }, this.edgeTop, this.inner);
    this.newBtn = h("button", { class: "btn btn-primary btn-sm new-lines", type: "button", hidden: true,
      onclick: () => this.scrollToEnd() }, "");
    this.el = h("div", { class: "logs-wrap" }, this.scroller, this.newBtn);
    this.scroller.addEventListener("scroll", () => this.onScroll(), { passive: true });
    new ResizeObserver(() => this.render(true)).observe(this.scroller);
  }

  params(extra = {}) {
    const { worker, level, q } = this.filter;
    return { worker, level: level.join(","), q, ...extra };
  }

  async fetch(extra) {
    return api(`${jobPath(this.job)}/logs`, { params: this.params(extra) });
  }

  atBottom() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < ROW * 2;
  }

  // mode: {tail: true} | {head: true} | {at: ms} | {context: line}
  async open(mode = { tail: true }) {
    const generation = ++this.generation;
    this.stopFollow();
    this.busy = true;
    this.onStatus({ loading: true });
    let before = [];
    let after = [];
    let focus = null;
    try {
      if (mode.at !== undefined) {
        [before, after] = await Promise.all([
          this.fetch({ start: "tail", until: Math.round(mode.at) - 1, limit: PAGE / 2 }).then((p) => p.lines),
          this.fetch({ start: "head", since: Math.round(mode.at), limit: PAGE / 2 }).then((p) => p.lines)]);
        this.hasBefore = before.length === PAGE / 2;
        this.hasAfter = after.length === PAGE / 2;
        focus = before.length;
      } else if (mode.context) {
        const line = mode.context;
        const [b, a] = await Promise.all([
          this.fetch({ before: line.cursor, limit: PAGE / 2 }).then((p) => p.lines),
          this.fetch({ after: line.cursor, limit: PAGE / 2 }).then((p) => p.lines)]);
        before = [...b, line];
        after = a;
        this.hasBefore = b.length === PAGE / 2;
        this.hasAfter = a.length === PAGE / 2;
        focus = b.length;
      } else if (mode.head) {
        after = (await this.fetch({ start: "head", limit: PAGE })).lines;
        this.hasBefore = false;
        this.hasAfter = after.length === PAGE;
        focus = 0;
      } else {
        before = (await this.fetch({ start: "tail", limit: PAGE })).lines;
        this.hasBefore = before.length === PAGE;
        this.hasAfter = false;
      }
    } catch (error) {
      if (generation === this.generation) {
        this.busy = false;
        this.onStatus({ error });
      }
      return;
    }
    if (generation !== this.generation) return;
    this.lines = [...before, ...after];
    this.busy = false;
    this.render(true);
    if (focus === null) this.scrollToEnd();
    else this.scrollToLine(focus, true);
    this.maybeFollow();
    this.onStatus({});
  }

  scrollToEnd() {
    this.scroller.scrollTop = this.scroller.scrollHeight;
    this.unseen = 0;
    this.newBtn.hidden = true;
    this.render();
  }

  scrollToLine(index, flash = false) {
    this.scroller.scrollTop = Math.max(0, this.edgeTop.offsetHeight + index * ROW - this.scroller.clientHeight / 3);
    this.render(true);
    if (flash) this.rows.get(index)?.classList.add("flash");
  }

  setFollow(on) {
    this.follow = on;
    if (on) {
      if (this.hasAfter) this.open({ tail: true });
      else this.maybeFollow();
    } else {
      this.stopFollow();
    }
    this.onStatus({});
  }

  maybeFollow() {
    if (!this.follow || this.hasAfter || this.source) return;
    const last = this.lines[this.lines.length - 1];
    const url = `${jobPath(this.job)}/logs/follow${query(this.params({ after: last ? last.cursor : "" }))}`;
    const source = new EventSource(url);
    this.source = source;
    source.addEventListener("lines", (event) => {
      if (this.source !== source) return;
      this.append(JSON.parse(event.data).lines);
    });
    source.addEventListener("open", () => this.onStatus({}));
    source.addEventListener("error", () => this.onStatus({}));
  }

  stopFollow() {
    if (this.source) this.source.close();
    this.source = null;
  }

  following() {
    return Boolean(this.source && this.source.readyState !== EventSource.CLOSED);
  }

  append(lines) {
    if (!lines.length || this.hasAfter) return;
    const stick = this.atBottom();
    this.lines.push(...lines);
    this.trim("start");
    this.render(true);
    if (stick) this.scrollToEnd();
    else {
      this.unseen += lines.length;
      this.newBtn.textContent = `${this.unseen} new line${this.unseen === 1 ? "" : "s"} ↓`;
      this.newBtn.hidden = false;
    }
    this.onStatus({});
  }

  trim(side) {
    const extra = this.lines.length - KEEP;
    if (extra <= 0) return;
    if (side === "start") {
      this.lines.splice(0, extra);
      this.hasBefore = true;
      this.scroller.scrollTop -= extra * ROW;
    } else {
      this.lines.splice(this.lines.length - extra, extra);
      this.hasAfter = true;
      this.stopFollow();
    }
  }

  async loadBefore() {
    if (this.busy || !this.hasBefore || !this.lines.length) return;
    this.busy = true;
    const generation = this.generation;
    try {
      const page = await this.fetch({ before: this.lines[0].cursor, limit: PAGE });
      if (generation !== this.generation) return;
      this.hasBefore = page.lines.length === PAGE;
      this.lines.unshift(...page.lines);
      const top = this.scroller.scrollTop;
      this.trim("end");
      this.render(true);
      this.scroller.scrollTop = top + page.lines.length * ROW;
    } catch (error) {
      this.onStatus({ error });
    } finally {
      if (generation === this.generation) this.busy = false;
    }
    this.render();
    this.onStatus({});
  }

  async loadAfter() {
    if (this.busy || !this.hasAfter || !this.lines.length) return;
    this.busy = true;
    const generation = this.generation;
    try {
      const page = await this.fetch({ after: this.lines[this.lines.length - 1].cursor, limit: PAGE });
      if (generation !== this.generation) return;
      this.hasAfter = page.lines.length === PAGE;
      this.lines.push(...page.lines);
      this.trim("start");
      this.render(true);
      this.maybeFollow();
    } catch (error) {
      this.onStatus({ error });
    } finally {
      if (generation === this.generation) this.busy = false;
    }
    this.onStatus({});
  }

  onScroll() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = null;
      this.render();
      const s = this.scroller;
      if (s.scrollTop < ROW * 10) this.loadBefore();
      if (s.scrollHeight - s.scrollTop - s.clientHeight < ROW * 10) this.loadAfter();
      if (this.atBottom() && this.unseen) { this.unseen = 0; this.newBtn.hidden = true; }
    });
  }

  rowHtml(line) {
    const job = encodeURIComponent(this.job);
    const index = this.workerIndex.has(line.worker) ? this.workerIndex.get(line.worker) : this.workerIndex.size;
    if (!this.workerIndex.has(line.worker)) this.workerIndex.set(line.worker, index);
    const context = this.filter.q || this.filter.level.length || this.filter.worker
      ? `<a class="ctx" href="#" data-context="1">show in context</a>` : "";
    return `<span class="t"><a href="/jobs/${job}?at=${line.ts}#metrics" title="${fullTime(line.ts)} · open the charts at this time">${clock(line.ts, true)}</a></span>`
      + `<span class="w worker-color-${index % 8}" title="${esc(line.worker)}">${esc(line.worker)}</span>`
      + `<span class="l lvl-${esc(line.level)}">${esc(line.level)}</span>`
      + `<span class="m">${highlight(line.msg, this.filter.q)}</span>${context}`;
  }

  render(full = false) {
    const total = this.lines.length;
    this.inner.style.height = `${total * ROW}px`;
    this.edgeTop.textContent = !total && !this.busy ? "No log lines match." : this.hasBefore ? "Loading earlier lines…" : "Start of the log";
    this.edgeTop.style.height = `${ROW * 1.5}px`;
    const offset = this.edgeTop.offsetHeight;
    const top = Math.max(0, this.scroller.scrollTop - offset);
    const first = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
    const last = Math.min(total - 1, Math.ceil((top + this.scroller.clientHeight) / ROW) + OVERSCAN);
    if (full) {
      for (const row of this.rows.values()) row.remove();
      this.rows.clear();
    }
    for (const [i, row] of this.rows) {
      if (i < first || i > last) { row.remove(); this.rows.delete(i); }
    }
    const fragment = document.createDocumentFragment();
    for (let i = first; i <= last; i += 1) {
      if (this.rows.has(i)) continue;
      const line = this.lines[i];
      const row = document.createElement("div");
      row.className = `logrow${line.level === "error" || line.level === "critical" ? " is-error" : ""}`;
      row.style.top = `${i * ROW}px`;
      row.dataset.index = String(i);
      row.innerHTML = this.rowHtml(line);
      const ctx = row.querySelector(".ctx");
      if (ctx) ctx.addEventListener("click", (event) => { event.preventDefault(); this.onContext?.(line); });
      this.rows.set(i, row);
      fragment.append(row);
    }
    this.inner.append(fragment);
  }

  visibleRange() {
    const top = Math.max(0, this.scroller.scrollTop - this.edgeTop.offsetHeight);
    const first = Math.floor(top / ROW);
    const last = Math.min(this.lines.length, Math.ceil((top + this.scroller.clientHeight) / ROW));
    return [this.lines[first], this.lines[Math.max(first, last - 1)]];
  }
}
