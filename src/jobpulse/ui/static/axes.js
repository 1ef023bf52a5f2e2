// Axis ranges, tick values and tick labels computed the way Plotly.js computes them for a cartesian
// axis in auto mode (linear or date), so a chart drawn without Plotly (preview.js) shows the same axes
// as the Plotly chart that replaces it: autorange with its 5% padding, 2-5-10 steps, date units, SI
// suffixes, the date "head" line under the first tick of each day.

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const YEAR = 365.25 * DAY;
const MONTH = YEAR / 12;
const TICK0 = Date.UTC(2000, 0, 1); // Plotly's date tick origin; day steps start on Sunday 2000-01-02
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const SI = ["f", "p", "n", "μ", "m", "", "k", "M", "B", "T"]; // exponent format "B": 1e9 is B, not G
const MINUS = "\u2212";

export const finite = (v) => typeof v === "number" && Number.isFinite(v);

// Plotly's Lib.roundUp: the first entry of `steps` above `value` (a value equal to an entry goes up).
function roundUp(value, steps) {
  let low = 0;
  let high = steps.length - 1;
  while (low < high) {
    const mid = Math.floor((low + high) / 2);
    if (steps[mid] <= value) low = mid + 1;
    else high = mid;
  }
  return steps[low];
}

const roundStep = (rough, base, steps) => base * roundUp(rough / base, steps);

// -- ranges ------------------------------------------------------------------------------------

// What one trace asks of an axis: its smallest and largest finite value, each with a pixel pad and
// whether the axis's 5% padding applies (Plotly's findExtremes on a scatter trace).
export function extremes(values, { pad = 0, padded = true } = {}) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (!finite(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (lo > hi) return null;
  return { min: { val: lo, pad, extra: padded }, max: { val: hi, pad, extra: padded } };
}

// Plotly's getAutoRange: the range in which every extreme keeps its pad in pixels on an axis `length`
// pixels long. Null without data.
export function autorange(list, length) {
  const found = list.filter(Boolean);
  if (!found.length) return null;
  const mins = found.map((e) => e.min);
  const maxs = found.map((e) => e.max);
  const lo = Math.min(...mins.map((c) => c.val));
  const hi = Math.max(...maxs.map((c) => c.val));
  if (lo === hi) return [lo - 1, hi + 1];
  const extra = 0.05 * length;
  const pad = (c) => (c.nopad ? 0 : c.pad + (c.extra ? extra : 0));
  let best = 0;
  let a = null;
  let b = null;
  for (const x of mins) {
    for (const y of maxs) {
      const span = y.val - x.val;
      if (span <= 0) continue;
      const room = length - pad(x) - pad(y);
      if (room > length / 10) {
        if (span / room > best) { a = x; b = y; best = span / room; }
      } else if (span / length > best) {
        a = { val: x.val, nopad: true };
        b = { val: y.val, nopad: true };
        best = span / length;
      }
    }
  }
  const scale = (b.val - a.val) / (length - pad(a) - pad(b));
  return [a.val - scale * pad(a), b.val + scale * pad(b)];
}

// -- ticks -------------------------------------------------------------------------------------

// Plotly's autoTicks: the step between ticks on an axis `length` pixels long (a number of ms or of
// units, or "M<n>" for n months on a date axis) and where steps count from.
function autoStep(range, length, isY, isDate) {
  const count = Math.min(Math.max(length / (isY ? 40 : 80), 4), 9) + 1;
  let rough = Math.abs(range[1] - range[0]) / count;
  const base = () => 10 ** Math.floor(Math.log(rough) / Math.LN10); // of the rough step at the time
  if (!isDate) return { step: roundStep(rough, base(), [2, 5, 10]), tick0: 0 };
  const twice = 2 * rough;
  if (twice > YEAR) {
    rough /= YEAR;
    return { months: 12 * roundStep(rough, base(), [2, 5, 10]), tick0: TICK0 };
  }
  if (twice > MONTH) {
    rough /= MONTH;
    return { months: roundStep(rough, 1, [1, 2, 3, 6, 12]), tick0: TICK0 };
  }
  if (twice > DAY) return { step: roundStep(rough, DAY, [1, 2, 3, 7, 14]), tick0: TICK0 + DAY };
  if (twice > HOUR) return { step: roundStep(rough, HOUR, [1, 2, 3, 6, 12]), tick0: TICK0 };
  if (twice > MINUTE) return { step: roundStep(rough, MINUTE, [1, 2, 5, 10, 15, 30]), tick0: TICK0 };
  if (twice > SECOND) return { step: roundStep(rough, SECOND, [1, 2, 5, 10, 15, 30]), tick0: TICK0 };
  return { step: Math.max(0.1, roundStep(rough, base(), [2, 5, 10])), tick0: TICK0 };
}

function monthIndex(ms) {
  const d = new Date(ms);
  return (d.getUTCFullYear() - 2000) * 12 + d.getUTCMonth();
}

function fromMonthIndex(index) {
  return Date.UTC(2000 + Math.floor(index / 12), ((index % 12) + 12) % 12, 1);
}

// Tick values inside `range` (Plotly keeps ticks up to 1e-4 of the span past either end).
function tickValues(range, spec) {
  const slack = (range[1] - range[0]) * 1e-4;
  const lo = range[0] - slack;
  const hi = range[1] + slack;
  const out = [];
  if (spec.months) {
    let index = Math.floor(monthIndex(lo) / spec.months) * spec.months;
    for (let guard = 0; guard < 1000; guard += 1, index += spec.months) {
      const value = fromMonthIndex(index);
      if (value > hi) break;
      if (value >= lo) out.push(value);
    }
    return out;
  }
  const { step, tick0 } = spec;
  const first = Math.ceil((lo - tick0) / step);
  for (let i = first; out.length < 1000; i += 1) {
    const value = tick0 + i * step;
    if (value > hi) break;
    out.push(value);
  }
  return out;
}

// -- labels ------------------------------------------------------------------------------------

// Plotly's numFormat for linear ticks: digits from the step, an SI suffix from the largest end.
function numberLabels(values, step, range) {
  let digits = 2 - Math.floor(Math.log(step) / Math.LN10 + 0.01);
  const largest = Math.max(Math.abs(range[0]), Math.abs(range[1]));
  const magnitude = Math.floor(Math.log(largest) / Math.LN10 + 0.01);
  let exponent = 0;
  if (Math.abs(magnitude) > 3) {
    exponent = magnitude > 14 || magnitude < -15 ? magnitude : 3 * Math.round((magnitude - 1) / 3);
  }
  return values.map((value) => {
    const zero = Math.abs(value / step) < 1e-6; // zero never carries the exponent
    let round = digits;
    let v = Math.abs(value);
    let text;
    if (v < 10 ** -round / 2) text = "0";
    else {
      if (exponent) { v *= 10 ** -exponent; round += exponent; }
      if (round === 0) text = String(Math.round(v));
      else if (round < 0) { const unit = 10 ** -round; text = String(Math.round(v / unit) * unit); }
      else text = v.toFixed(Math.min(20, round)).replace(/\.?0+$/, "");
      text = separate(text);
    }
    if (exponent && !zero && text !== "0") {
      text += Math.abs(exponent) <= 15 && exponent % 3 === 0 && SI[exponent / 3 + 5] !== undefined
        ? SI[exponent / 3 + 5] : `×10^${exponent}`;
    }
    return value < 0 && text !== "0" ? MINUS + text : text;
  });
}

// Plotly's numSeparate: thousands separators only for integer parts longer than four digits.
function separate(text) {
  const [whole, fraction] = text.split(".");
  let out = whole;
  if (fraction !== undefined || whole.length > 4) {
    while (/(\d+)(\d{3})/.test(out)) out = out.replace(/(\d+)(\d{3})/, "$1,$2");
  }
  return fraction === undefined ? out : `${out}.${fraction}`;
}

const pad2 = (n) => String(n).padStart(2, "0");
const mod = (v, d) => ((v % d) + d) % d;
const dayMonth = (d) => `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()}`;

// Plotly's formatTime: hours and minutes, then seconds to `round` digits unless round is "M".
function clockText(ms, round) {
  const part = mod(ms + 0.05, DAY);
  let text = `${pad2(Math.floor(part / HOUR))}:${pad2(mod(Math.floor(part / MINUTE), 60))}`;
  if (round !== "M") {
    const digits = typeof round === "number" ? round : 0;
    const seconds = Math.min(mod(ms / SECOND, 60), [59, 59.9, 59.99, 59.999, 59.9999][digits]);
    let s = (100 + seconds).toFixed(digits).slice(1);
    if (digits > 0) s = s.replace(/0+$/, "").replace(/\.$/, "");
    text += `:${s}`;
  }
  return text;
}

// Date tick labels as Plotly writes them (values are "plot time": local time read as UTC). A label
// of two lines joins them with "<br>": the second (the date, or the year) only where it changes.
function dateLabels(values, spec) {
  let round;
  if (spec.months) round = spec.months % 12 === 0 ? "y" : "m";
  else if (spec.step >= DAY) round = "d";
  else if (spec.step >= MINUTE) round = "M";
  else if (spec.step >= SECOND) round = "S";
  else {
    const digits = (String(+(spec.step / SECOND).toFixed(6)).split(".")[1] || "").length;
    round = digits > 0 ? digits : 4;
  }
  let previous = "";
  return values.map((value) => {
    const d = new Date(value);
    let text;
    let head;
    if (round === "y") text = String(d.getUTCFullYear());
    else if (round === "m") text = `${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}`;
    else if (round === "d") { text = dayMonth(d); head = String(d.getUTCFullYear()); }
    else { text = clockText(value, round); head = `${dayMonth(d)}, ${d.getUTCFullYear()}`; }
    if (head && head !== previous) { previous = head; text += `<br>${head}`; }
    return text;
  });
}

// The ticks of an axis: [{value, text}] for a range on an axis `length` pixels long.
export function ticks(range, length, { isY = false, isDate = false } = {}) {
  if (!range || !(range[1] > range[0]) || !(length > 0)) return [];
  const spec = autoStep(range, length, isY, isDate);
  const values = tickValues(range, spec);
  const texts = isDate ? dateLabels(values, spec) : numberLabels(values, spec.step, range);
  return values.map((value, i) => ({ value, text: texts[i] }));
}
