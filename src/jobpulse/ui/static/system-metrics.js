// System metrics by name: a human title and the unit each is stored in (DESIGN.md and the agent's table).
// The table between the markers is plain JSON, so the server's tests read the same table the page uses.
// Units: percent (0–100), fraction (0–1, shown as %), bytes, bytes_per_s, cores, seconds, watts, celsius,
// mhz, count, code.

/* metric-table:begin */
export const SYSTEM_METRICS = {
  "cpu_cores": { "title": "CPU in use", "unit": "cores" },
  "cpu_util": { "title": "CPU utilization of limit", "unit": "percent" },
  "cpu_limit_cores": { "title": "CPU limit", "unit": "cores" },
  "cpu_iowait": { "title": "CPU I/O wait of the host", "unit": "percent" },
  "mem_bytes": { "title": "Memory used", "unit": "bytes" },
  "mem_util": { "title": "Memory utilization of limit", "unit": "percent" },
  "mem_limit_bytes": { "title": "Memory limit", "unit": "bytes" },
  "mem_page_cache_bytes": { "title": "Page cache", "unit": "bytes" },
  "net_rx_Bps": { "title": "Network received", "unit": "bytes_per_s" },
  "net_tx_Bps": { "title": "Network sent", "unit": "bytes_per_s" },
  "disk_read_Bps": { "title": "Disk read", "unit": "bytes_per_s" },
  "disk_write_Bps": { "title": "Disk write", "unit": "bytes_per_s" },
  "ephemeral_bytes": { "title": "Ephemeral storage used", "unit": "bytes" },
  "ephemeral_util": { "title": "Ephemeral storage utilization", "unit": "fraction" },
  "cache_bytes": { "title": "Cache storage used", "unit": "bytes" },
  "cache_util": { "title": "Cache storage utilization", "unit": "fraction" },
  "gpu_util": { "title": "GPU utilization", "unit": "percent" },
  "gpu_sm_util": { "title": "GPU SM activity", "unit": "percent" },
  "gpu_mem_bw_util": { "title": "GPU memory bandwidth", "unit": "percent" },
  "gpu_mem_bytes": { "title": "GPU memory used", "unit": "bytes" },
  "gpu_mem_total_bytes": { "title": "GPU memory size", "unit": "bytes" },
  "gpu_mem_util": { "title": "GPU memory utilization", "unit": "percent" },
  "gpu_power_w": { "title": "GPU power", "unit": "watts" },
  "gpu_temp_c": { "title": "GPU temperature", "unit": "celsius" },
  "gpu_sm_clock_mhz": { "title": "GPU SM clock", "unit": "mhz" },
  "gpu_ecc_corrected": { "title": "GPU corrected ECC errors", "unit": "count" },
  "gpu_ecc_uncorrected": { "title": "GPU uncorrected ECC errors", "unit": "count" },
  "gpu_xid_errors": { "title": "GPU XID errors", "unit": "count" },
  "gpu_xid": { "title": "GPU latest XID code", "unit": "code" },
  "gpu_throttle_thermal": { "title": "GPU thermal throttling", "unit": "fraction" },
  "gpu_throttle_power": { "title": "GPU power brake", "unit": "fraction" },
  "gpu_power_capped": { "title": "GPU at its power cap", "unit": "fraction" },
  "npu_util": { "title": "NPU AI Core utilization", "unit": "percent" },
  "npu_aicpu_util": { "title": "NPU AI CPU utilization", "unit": "percent" },
  "npu_ctrlcpu_util": { "title": "NPU control CPU utilization", "unit": "percent" },
  "npu_vector_util": { "title": "NPU vector core utilization", "unit": "percent" },
  "npu_hbm_bw_util": { "title": "NPU HBM bandwidth", "unit": "percent" },
  "npu_ddr_bw_util": { "title": "NPU DDR bandwidth", "unit": "percent" },
  "npu_mem_bytes": { "title": "NPU memory used", "unit": "bytes" },
  "npu_mem_total_bytes": { "title": "NPU memory size", "unit": "bytes" },
  "npu_mem_util": { "title": "NPU memory utilization", "unit": "percent" },
  "npu_power_w": { "title": "NPU power", "unit": "watts" },
  "npu_temp_c": { "title": "NPU temperature", "unit": "celsius" },
  "agent_cpu_seconds": { "title": "Agent CPU time", "unit": "seconds" },
  "agent_cpu_util": { "title": "Agent CPU of one core", "unit": "percent" },
  "agent_rss_bytes": { "title": "Agent memory", "unit": "bytes" }
};
/* metric-table:end */

const BINARY = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

// The largest binary unit in which `top` reads at least 1 (bytes in KiB/MiB/GiB, not SI's k/M/G).
function binaryScale(top) {
  let i = 0;
  while (i < BINARY.length - 1 && Math.abs(top) >= 1024 ** (i + 1)) i += 1;
  return { divisor: 1024 ** i, label: BINARY[i] };
}

function timeScale(top) {
  if (Math.abs(top) >= 7200) return { divisor: 3600, label: "h" };
  if (Math.abs(top) >= 120) return { divisor: 60, label: "min" };
  return { divisor: 1, label: "s" };
}

// For each unit: the stored value's factor to the shown one, and the shown unit for data up to `top`.
const UNITS = {
  percent: { scale: 1, max: 100, at: () => ({ divisor: 1, label: "%" }) },
  fraction: { scale: 100, max: 100, at: () => ({ divisor: 1, label: "%" }) },
  bytes: { scale: 1, at: binaryScale },
  bytes_per_s: { scale: 1, at: (top) => { const s = binaryScale(top); return { ...s, label: `${s.label}/s` }; } },
  cores: { scale: 1, at: () => ({ divisor: 1, label: "cores" }) },
  seconds: { scale: 1, at: timeScale },
  watts: { scale: 1, at: () => ({ divisor: 1, label: "W" }) },
  celsius: { scale: 1, at: () => ({ divisor: 1, label: "°C" }) },
  mhz: { scale: 1, at: () => ({ divisor: 1, label: "MHz" }) },
  count: { scale: 1, integer: true, at: () => ({ divisor: 1, label: "count" }) },
  code: { scale: 1, integer: true, at: () => ({ divisor: 1, label: "" }) },
};

const DEVICE_WORDS = { gpu: "GPU", npu: "NPU", cpu: "CPU", mem: "Memory", net: "Network", disk: "Disk" };

// A metric the table does not hold (a path the agent was told to measure, `--paths scratch=/scratch`, or a
// sender's own name): its unit from the name's suffix, its title from the words of the name.
function guess(metric) {
  const words = metric.split("_");
  const tail = words[words.length - 1];
  const unit = { util: "percent", bytes: "bytes", Bps: "bytes_per_s", cores: "cores", seconds: "seconds", w: "watts",
    c: "celsius", mhz: "mhz", errors: "count" }[tail] || null;
  const head = (unit ? words.slice(0, -1) : words).map((w, i) => (i === 0 ? DEVICE_WORDS[w] || w : w));
  let title = head.join(" ");
  title = title.charAt(0).toUpperCase() + title.slice(1);
  if (tail === "util" && !/^(gpu|npu|cpu|mem|agent)$/.test(words[0])) {
    return { title: `${title} utilization`, unit: "fraction" }; // a configured path's share of its limit
  }
  if (tail === "bytes" && !DEVICE_WORDS[words[0]]) return { title: `${title} used`, unit: "bytes" };
  return { title, unit };
}

function number(value, digits = 3) {
  if (!Number.isFinite(value)) return "–";
  const abs = Math.abs(value);
  if (abs !== 0 && (abs >= 1e6 || abs < 1e-3)) return value.toExponential(2);
  return String(Number(value.toPrecision(digits)));
}

const suffixOf = (label) => (label === "%" ? "%" : label ? ` ${label}` : "");

// How to show `metric`: title, and for data reaching `top` (stored units) the shown unit, the factor from a
// stored value to a plotted one, the axis title and a formatter of stored values.
export function metricInfo(metric, top = 0) {
  const entry = SYSTEM_METRICS[metric] || guess(metric);
  const unit = UNITS[entry.unit] || null;
  if (!unit) {
    return { title: entry.title, unit: "", suffix: "", factor: 1, max: undefined, integer: false, axisTitle: "",
      fmt: (v) => number(v) };
  }
  const shown = unit.at(top * unit.scale);
  const factor = unit.scale / shown.divisor;
  const suffix = suffixOf(shown.label);
  const fmt = (v) => {
    if (v === null || v === undefined || !Number.isFinite(v)) return "–";
    const again = unit.at(Math.abs(v) * unit.scale);
    const value = (v * unit.scale) / again.divisor;
    return `${unit.integer ? Math.round(value) : number(value)}${suffixOf(again.label)}`;
  };
  return { title: entry.title, unit: shown.label, suffix, factor, max: unit.max, integer: !!unit.integer,
    axisTitle: shown.label, fmt };
}

// "GPU memory used (GiB)": the title with the unit the chart shows.
export function titleWithUnit(metric, top = 0) {
  return infoTitle(metricInfo(metric, top));
}

// The title of a metric's ``metricInfo``, with its unit.
export function infoTitle(info) {
  return info.unit ? `${info.title} (${info.unit})` : info.title;
}
