// What every page shares: boot data, theme switch, banners, polling while visible.

import { onAuthLost } from "./api.js";
import { h } from "./dom.js";

export const boot = JSON.parse(document.getElementById("boot")?.textContent || "{}");
export const app = document.getElementById("app");

const themeListeners = new Set();
export function onThemeChange(fn) { themeListeners.add(fn); }

export function currentTheme() {
  const set = document.documentElement.dataset.theme;
  if (set) return set;
  return window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

function setTheme(theme) {
  document.documentElement.dataset.theme = theme;
  try { localStorage.setItem("jp-theme", theme); } catch { /* private mode */ }
  for (const fn of themeListeners) fn(theme);
}

document.getElementById("theme-toggle")?.addEventListener("click", () => {
  setTheme(currentTheme() === "dark" ? "light" : "dark");
});

let bannerEl = null;
export function banner(message, kind = "bad", action = null) {
  if (!bannerEl) {
    bannerEl = h("div", { class: "banner", role: "alert" });
    app.before(bannerEl);
  }
  bannerEl.replaceChildren();
  if (!message) return;
  bannerEl.append(h("div", { class: "page", style: { paddingBottom: "0" } },
    h("div", { class: `alert alert-${kind}` }, h("div", {}, message, action ? [" ", action] : null))));
}

// A failure in the page's code is named in a banner; the page never shows a stack trace.
function failed(error) {
  const message = error && error.message ? error.message : String(error || "unknown error");
  if (message.includes("ResizeObserver loop")) return; // benign: a layout settled a frame later
  banner(`Something went wrong on this page: ${message}`, "bad", h("a", { href: location.href }, "Reload"));
}
window.addEventListener("error", (event) => failed(event.error || event.message));
window.addEventListener("unhandledrejection", (event) => {
  if (event.reason && event.reason.name === "AbortError") return;
  failed(event.reason);
});

onAuthLost(() => {
  banner("Your session has ended.", "warn",
    h("a", { href: location.pathname + location.search }, "Sign in again"));
});

// Call fn every `ms` while the tab is visible; fn may return a promise. Returns a stop function.
export function poll(fn, ms) {
  let timer = null;
  let stopped = false;
  const tick = async () => {
    if (stopped) return;
    if (document.visibilityState === "visible") {
      try { await fn(); } catch (error) { console.warn("refresh failed", error); }
    }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  timer = setTimeout(tick, ms);
  return () => { stopped = true; clearTimeout(timer); };
}

export function done() {
  app.removeAttribute("aria-busy");
}

export function setTitle(text) {
  document.title = `${text} · jobpulse`;
}

export function errorState(error, what) {
  return h("div", { class: "card empty-state" },
    h("h2", {}, error.status === 404 ? `${what} not found` : `Could not load ${what.toLowerCase()}`),
    h("p", { class: "error-message" }, error.message),
    h("p", {}, h("a", { class: "btn", href: "/" }, "Back to all jobs")));
}
