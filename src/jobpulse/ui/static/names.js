// How scalar names are shown to people, on every page (docs/names.md).
//
// A key logged through the SDK is stored as written, as both metric and variant ("train/loss",
// "train/loss"); ClearML's title and series arrive as metric and variant ("loss", "train"). A chart is
// drawn per metric, with a series per variant; the charts sit in sections by the metric's prefix before
// its first "/" ("train/loss" and "train/lr" in "train"), metrics without one in a first section.

import { h } from "./dom.js";

export const SEPARATOR = " · ";
const UNGROUPED = "Charts";

// A series named on its own (jobs list, compare table): the metric where the variant repeats it or is
// empty ("train/loss", "lr"), else the metric and the variant ("loss · train").
export function seriesLabel(metric, variant) {
  return !variant || variant === metric ? metric : `${metric}${SEPARATOR}${variant}`;
}

// The section a metric's chart belongs to: its prefix before the first "/", "" for none.
export function sectionOf(metric) {
  const cut = metric.indexOf("/");
  return cut > 0 ? metric.slice(0, cut) : "";
}

// Sections in order: the one without a prefix first, then by name.
export function sectionOrder(a, b) {
  if (a === b) return 0;
  if (a === "") return -1;
  if (b === "") return 1;
  return a.localeCompare(b);
}

// Charts in collapsible sections by their metric's prefix; sections are made as their first chart arrives.
export class ChartSections {
  // onOpen() runs when a collapsed section is opened again (its charts may now need their data).
  constructor({ onOpen = null } = {}) {
    this.el = h("div", { class: "chart-sections" });
    this.sections = new Map();
    this.onOpen = onOpen;
  }

  add(metric, chartEl) {
    const section = this.section(sectionOf(metric));
    section.grid.append(chartEl);
    section.count.textContent = String(section.grid.children.length);
  }

  section(name) {
    const found = this.sections.get(name);
    if (found) return found;
    const count = h("span", { class: "count" });
    const grid = h("div", { class: "chart-grid" });
    const el = h("details", { class: "chart-section", open: true, dataset: { section: name } },
      h("summary", {}, h("span", { class: "section-name" }, name || UNGROUPED), count), grid);
    el.addEventListener("toggle", () => { if (el.open && this.onOpen) this.onOpen(); });
    const section = { name, el, grid, count };
    const next = [...this.sections.values()].find((s) => sectionOrder(name, s.name) < 0);
    this.el.insertBefore(el, next ? next.el : null);
    this.sections.set(name, section);
    return section;
  }

  // A section whose charts are all hidden (by a filter) is hidden with them.
  sync() {
    for (const { el, grid } of this.sections.values()) el.hidden = [...grid.children].every((c) => c.hidden);
  }

  clear() {
    this.el.replaceChildren();
    this.sections.clear();
  }
}
