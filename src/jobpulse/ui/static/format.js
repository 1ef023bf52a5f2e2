// Formatting of numbers, sizes, times, durations and statuses.

import { h } from "./dom.js";

// One formatter each, made once: toLocaleString with options builds a new one per call, which costs
// a chart of 600 buckets (three numbers per bucket for its hover text) a few hundred milliseconds.
const INTEGER = new Intl.NumberFormat("en-US");
const DECIMAL = new Intl.NumberFormat("en-US", { maximumFractionDigits: 6 });

export function num(value, digits = 4) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "string") return value; // "NaN", "Infinity"
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (Number.isInteger(value) && abs < 1e15) return INTEGER.format(value);
  if (abs !== 0 && (abs >= 1e6 || abs < 1e-3)) return value.toExponential(2);
  return DECIMAL.format(Number(value.toPrecision(digits)));
}

export function bytes(value) {
  if (value === null || value === undefined) return "–";
  const units = ["B", "KB", "MB", "GB", "TB", "PB"];
  let v = Math.abs(value);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return `${value < 0 ? "-" : ""}${v >= 100 || i === 0 ? v.toFixed(0) : v.toFixed(1)} ${units[i]}`;
}

export function duration(ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return "–";
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
  const hr = Math.floor(m / 60);
  if (hr < 48) return `${hr}h ${String(m % 60).padStart(2, "0")}m`;
  return `${Math.floor(hr / 24)}d ${hr % 24}h`;
}

const pad = (n, w = 2) => String(n).padStart(w, "0");

export function dateTime(ms) {
  if (!ms) return "–";
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export function clock(ms, millis = false) {
  const d = new Date(ms);
  const base = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return millis ? `${base}.${pad(d.getMilliseconds(), 3)}` : base;
}

export function fullTime(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${clock(ms, true)}`;
}

export function ago(ms, now = Date.now()) {
  if (!ms) return "–";
  const s = Math.round((now - ms) / 1000);
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

export function jobDuration(job, now = Date.now()) {
  const start = job.started || job.created;
  if (!start) return null;
  return (job.ended || (job.status === "running" ? now : job.updated || now)) - start;
}

export function badge(status) {
  return h("span", { class: `badge badge-${status || "created"}`, title: `status: ${status}` }, status || "unknown");
}

// Natural order: worker-2 before worker-10.
export function natural(a, b) {
  return String(a).localeCompare(String(b), "en", { numeric: true });
}
