// The native API, same origin, authenticated by the session cookie.

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

const listeners = new Set();
export function onAuthLost(fn) { listeners.add(fn); }

export function query(params) {
  const out = new URLSearchParams();
  for (const [name, value] of Object.entries(params || {})) {
    if (value === null || value === undefined || value === "") continue;
    out.set(name, Array.isArray(value) ? value.join(",") : String(value));
  }
  const text = out.toString();
  return text ? `?${text}` : "";
}

// A request the page's head already started (see head.js), taken over once. The first charts are
// started when the metric list arrives: a chart asked for before then waits for that moment, so it is
// not fetched twice.
async function prefetched(url, method) {
  const started = window.__jpPrefetch;
  if (method !== "GET" || !started) return null;
  if (!started[url] && started.charts && url.includes("/scalars/chart?")) await started.charts;
  if (!started[url]) return null;
  const response = started[url];
  delete started[url];
  return response;
}

export async function api(path, { method = "GET", body, signal, params } = {}) {
  const headers = { Accept: "application/json" };
  let payload;
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const url = path + query(params);
  let response;
  try {
    response = await ((await prefetched(url, method))
      || fetch(url, { method, headers, body: payload, signal, credentials: "same-origin" }));
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "network", "The server cannot be reached. Check that jobpulse is running.");
  }
  let data = null;
  const text = await response.text();
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!response.ok) {
    const err = data && data.error ? data.error : {};
    if (response.status === 401) for (const fn of listeners) fn();
    throw new ApiError(response.status, err.code || "http_error",
      err.message || `The server answered ${response.status} ${response.statusText}`, err.field);
  }
  return data;
}

export const jobPath = (job) => `/jp/v1/jobs/${encodeURIComponent(job)}`;

// Run async tasks with at most `limit` at a time.
export function limiter(limit) {
  let active = 0;
  const queue = [];
  const next = () => {
    if (active >= limit || !queue.length) return;
    active += 1;
    const { task, resolve, reject } = queue.shift();
    task().then(resolve, reject).finally(() => { active -= 1; next(); });
  };
  return (task) => new Promise((resolve, reject) => { queue.push({ task, resolve, reject }); next(); });
}
