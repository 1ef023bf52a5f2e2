// Small DOM helpers: build elements, escape text, debounce.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") el.className = value;
    else if (name === "text") el.textContent = value;
    else if (name === "html") el.innerHTML = value;
    else if (name === "style" && typeof value === "object") Object.assign(el.style, value);
    else if (name.startsWith("on") && typeof value === "function") el.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function replace(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

export function debounce(fn, ms) {
  let timer = null;
  const wrapped = (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
  wrapped.cancel = () => clearTimeout(timer);
  return wrapped;
}

// A segmented control: options [[value, label]], calls onChange(value).
export function segmented(options, current, onChange, label) {
  const box = h("div", { class: "segmented", role: "group", "aria-label": label });
  const buttons = options.map(([value, text]) =>
    h("button", { type: "button", "aria-pressed": String(value === current), dataset: { value },
      onclick: () => { box.set(value); onChange(value); } }, text));
  box.append(...buttons);
  box.set = (value) => {
    for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.value === String(value)));
  };
  return box;
}

// Run fn when el scrolls into view (once), or at once when IntersectionObserver is missing.
const seen = new WeakMap();
let observer = null;
export function whenVisible(el, fn) {
  if (!("IntersectionObserver" in window)) { fn(); return; }
  if (!observer) {
    observer = new IntersectionObserver((entries) => {
      for (const entry of entries) {
        if (!entry.isIntersecting) continue;
        const callback = seen.get(entry.target);
        observer.unobserve(entry.target);
        seen.delete(entry.target);
        if (callback) callback();
      }
    }, { rootMargin: "300px 0px" });
  }
  seen.set(el, fn);
  observer.observe(el);
}

export function isVisible(el) {
  const r = el.getBoundingClientRect();
  return r.bottom > -300 && r.top < window.innerHeight + 300 && r.width > 0;
}
