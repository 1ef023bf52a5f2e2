// Plots (Plotly figures), debug images and vectors of a job, one card per metric and variant,
// each with step navigation: previous, next, or any step on a slider.

import { api, jobPath } from "./api.js";
import { clear, debounce, h } from "./dom.js";
import { num } from "./format.js";
import { baseLayout, CONFIG, loadPlotly, themeColors } from "./plot.js";
import { color, followTheme } from "./theme.js";

const KINDS = [["plot", "Plot"], ["image", "Image"], ["vector", "Vector"]];

export class MediaPanel {
  constructor({ job }) {
    this.job = job;
    this.el = h("div", { class: "media" });
    this.loaded = false;
    this.cards = [];
  }

  async open() {
    if (this.loaded) return;
    this.loaded = true;
    clear(this.el).append(h("div", { class: "card notice" }, "Loading plots and images…"));
    let lists;
    try {
      lists = await Promise.all(KINDS.map(([kind]) => api(`${jobPath(this.job)}/events/${kind}/metrics`)));
    } catch (error) {
      this.loaded = false;
      clear(this.el).append(h("div", { class: "card notice error-message" }, error.message));
      return;
    }
    clear(this.el);
    const grid = h("div", { class: "media-grid" });
    KINDS.forEach(([kind], i) => {
      for (const entry of lists[i].metrics) {
        const card = new MediaCard(this.job, kind, entry);
        this.cards.push(card);
        grid.append(card.el);
      }
    });
    if (!this.cards.length) {
      this.el.append(h("div", { class: "card empty-state" }, h("h2", {}, "No plots or images"),
        h("p", { class: "muted" }, "Plots, debug images and vectors a job reports appear here, with navigation by step.")));
      return;
    }
    this.el.append(grid);
  }
}

// An image's URL is what its sender reported: link to it only when it is a web address (http or https,
// this server's paths included), never to another scheme.
function imageLink(event) {
  let url = null;
  try {
    url = new URL(event.url, location.href);
  } catch { /* not a URL */ }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
    return h("div", { class: "muted" }, "This image's address is not a web address.");
  }
  return h("a", { href: event.url, target: "_blank", rel: "noopener" },
    h("img", { src: event.url, alt: `${event.metric} ${event.variant} step ${event.iter}`, loading: "lazy" }));
}

class MediaCard {
  constructor(job, kind, entry) {
    this.job = job;
    this.kind = kind;
    this.entry = entry;
    this.iter = null;
    this.body = h("div", { class: "media-body" }, h("div", { class: "muted" }, "Loading…"));
    this.stepText = h("span", { class: "num step-text" }, "");
    this.slider = h("input", { type: "range", min: entry.first_iter, max: entry.last_iter, value: entry.last_iter,
      "aria-label": "Step", disabled: entry.first_iter === entry.last_iter });
    this.prevBtn = h("button", { class: "btn btn-sm", type: "button", title: "Previous step", "aria-label": "Previous step",
      onclick: () => this.go("prev") }, "‹");
    this.nextBtn = h("button", { class: "btn btn-sm", type: "button", title: "Next step", "aria-label": "Next step",
      onclick: () => this.go("next") }, "›");
    const onSlide = debounce(() => this.go("at", Number(this.slider.value)), 150);
    this.slider.addEventListener("input", () => { this.stepText.textContent = `step ${num(Number(this.slider.value))}`; onSlide(); });
    const name = entry.variant ? `${entry.metric} / ${entry.variant}` : entry.metric;
    this.el = h("section", { class: "card media-card", dataset: { kind, metric: entry.metric, variant: entry.variant } },
      h("div", { class: "card-head" }, h("h2", { class: "mono", title: name }, name),
        h("div", { class: "right" }, h("span", { class: "tag" }, KINDS.find((k) => k[0] === kind)[1]))),
      h("div", { class: "stepper" }, this.prevBtn, this.slider, this.nextBtn, this.stepText),
      this.body);
    this.unfollow = followTheme(() => this.render());
    this.go("last");
  }

  async go(where, value) {
    const base = { metric: this.entry.metric, variant: this.entry.variant, limit: 50 };
    let params;
    if (where === "last") params = { ...base, last: 1 };
    else if (where === "prev") params = { ...base, iter_max: this.iter - 1, last: 1 };
    else if (where === "next") params = { ...base, iter_min: this.iter + 1 };
    else params = { ...base, iter_max: value, last: 1 };
    let events;
    try {
      events = (await api(`${jobPath(this.job)}/events/${this.kind}`, { params })).events;
      if (!events.length && where === "at") {
        events = (await api(`${jobPath(this.job)}/events/${this.kind}`, { params: { ...base, iter_min: value } })).events;
      }
    } catch (error) {
      clear(this.body).append(h("div", { class: "error-message" }, error.message));
      return;
    }
    if (!events.length) { this.updateStepper(); return; }
    const iter = Math.min(...events.map((e) => e.iter));
    this.events = events.filter((e) => e.iter === iter);
    this.iter = iter;
    this.updateStepper();
    this.render();
  }

  updateStepper() {
    const { first_iter: first, last_iter: last } = this.entry;
    this.prevBtn.disabled = this.iter === null || this.iter <= first;
    this.nextBtn.disabled = this.iter === null || this.iter >= last;
    if (this.iter !== null) {
      this.slider.value = String(this.iter);
      this.stepText.textContent = `step ${num(this.iter)}`;
      this.el.dataset.iter = String(this.iter);
    }
  }

  async render() {
    if (!this.events) return;
    const event = this.events[0];
    if (this.kind === "image") {
      clear(this.body).append(h("div", { class: "images" }, this.events.map((e) =>
        h("figure", { style: { margin: "0", textAlign: "center" } }, imageLink(e),
          this.events.length > 1 ? h("figcaption", { class: "muted" }, e.key) : null))));
      return;
    }
    const Plotly = await loadPlotly();
    let div = this.body.querySelector(".plot");
    if (!div) { div = h("div", { class: "plot" }); clear(this.body).append(div); }
    if (this.kind === "plot") {
      const figure = event.plot || {};
      const theme = themeColors();
      const layout = { ...(figure.layout || {}) };
      layout.paper_bgcolor = theme.paper_bgcolor;
      layout.plot_bgcolor = theme.plot_bgcolor;
      layout.font = { ...theme.font, ...(layout.font || {}), color: theme.font.color };
      layout.margin = layout.margin || { l: 60, r: 20, t: layout.title ? 40 : 16, b: 50 };
      if (layout.title && typeof layout.title === "object") layout.title = { ...layout.title, font: { color: themeColors().legend.font.color } };
      await Plotly.react(div, figure.data || [], layout, CONFIG);
    } else {
      const values = event.values || [];
      await Plotly.react(div, [{ type: "bar", x: values.map((_, i) => i), y: values, marker: { color: color(0) },
        hovertemplate: "%{x}: %{y:.4~g}<extra></extra>" }], baseLayout({ hovermode: "closest",
        xaxis: { title: { text: "index" } } }), CONFIG);
    }
  }
}
