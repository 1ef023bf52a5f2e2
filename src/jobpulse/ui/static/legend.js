// Where Plotly.js puts the entries of a horizontal legend above the plot (orientation "h", x 0, y 1,
// yanchor "bottom"), for preview.js: the order (a trace filled to the one before it reverses it, legend
// groups group it), the rows, and the legend's height, which Plotly's automargin makes room for.

export const ITEM = 40; // an entry's symbol column: item width 30 and a gap of 5 on either side
const GAP = 5; // Plotly's legend item gap: after an entry, and above and below the entries
const GROUP_GAP = 10; // Plotly's tracegroupgap: between rows of groups

// Entries ({trace, width}) in groups, in Plotly's order; `grouped` tells which layout applies.
function entries(traces, measure) {
  let reversed = false;
  let grouped = false;
  for (const t of traces) {
    if (t.visible === false) continue;
    if (t.fill === "tonexty" || t.fill === "tonextx") reversed = true;
    if (t.legendgroup) grouped = true;
  }
  const shown = traces.filter((t) => t.visible !== false && t.showlegend !== false && t.name)
    .map((trace) => ({ trace, width: ITEM + measure(String(trace.name)) }));
  let groups = [shown];
  if (grouped && shown.some((e) => e.trace.legendgroup)) {
    const byName = new Map();
    groups = [];
    shown.forEach((entry) => {
      const key = entry.trace.legendgroup || Symbol("own group");
      if (!byName.has(key)) { byName.set(key, []); groups.push(byName.get(key)); }
      byName.get(key).push(entry);
    });
  }
  if (reversed) groups = groups.map((group) => [...group].reverse());
  return { groups: groups.filter((group) => group.length), grouped };
}

// Entries placed in a legend `width` pixels wide (the plot's): [{trace, x, y}] with y the middle of
// the entry's row from the legend's top, and the legend's height (at most half the chart's).
export function layoutLegend(traces, { measure, fontSize, width, chartHeight }) {
  const { groups, grouped } = entries(traces, measure);
  if (!groups.length) return { items: [], height: 0 };
  const row = Math.max(1.3 * fontSize, 16) + 3;
  const items = [];
  let height;
  if (grouped) {
    // Groups side by side, a group's entries one under another, groups wrapping onto new rows.
    let x = 0;
    let top = 0;
    let tallest = 0;
    for (const group of groups) {
      const step = Math.max(...group.map((e) => e.width)) + GAP;
      const tall = group.length * row;
      if (x > 0 && step + x > width) { x = 0; top += tallest + GROUP_GAP; tallest = tall; }
      else tallest = Math.max(tallest, tall);
      group.forEach((e, k) => items.push({ trace: e.trace, x, y: top + GAP + row / 2 + k * row }));
      x += step;
    }
    height = top + tallest + 2 * GAP;
  } else {
    // One row when all entries fit, else rows of columns as wide as the widest entry.
    const list = groups[0];
    const total = list.reduce((sum, e) => sum + e.width, 0) + (list.length - 1) * GAP;
    const column = Math.max(...list.map((e) => e.width));
    let x = 0;
    let top = 0;
    for (const e of list) {
      const step = (total < width ? e.width : column) + GAP;
      if (step + x - GAP >= width && x > 0) { x = 0; top += row; }
      items.push({ trace: e.trace, x, y: top + GAP + row / 2 });
      x += step;
    }
    height = top + row + 2 * GAP;
  }
  return { items, height: Math.min(Math.ceil(height), Math.max(chartHeight / 2, 30)) };
}
