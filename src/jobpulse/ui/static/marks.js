// Marks drawn over a time chart (chart.js): the job's findings, each a shaded span from its start to its end
// beneath the data, a ribbon along the top and a triangle at its start whose hover names it, and the time
// marker, a dotted vertical line. `marks`: {findings: [{start, end, color, text}], line: ms or null}, times in
// epoch milliseconds, colours as "#rrggbb".

import { alpha, css } from "./theme.js";

const RIBBON = 0.015; // of the plot's height
const TRIANGLE = 6; // half its width, in CSS pixels
const HOVER = 8; // how near the mouse comes to a triangle to name its finding, in CSS pixels

function inPlot(u, ms) {
  const x = u.valToPos(ms, "x", true);
  return { x, left: Math.max(u.bbox.left, Math.min(x, u.bbox.left + u.bbox.width)) };
}

function drawSpans(u, findings, opacity, height) {
  const { ctx, bbox } = u;
  for (const f of findings) {
    const a = inPlot(u, f.start).left;
    const b = inPlot(u, f.end).left;
    if (b <= a) continue;
    ctx.fillStyle = alpha(f.color, opacity);
    ctx.fillRect(a, bbox.top, b - a, height);
  }
}

function drawTriangles(u, findings) {
  const { ctx, bbox } = u;
  const r = TRIANGLE * devicePixelRatio;
  for (const f of findings) {
    const { x } = inPlot(u, f.start);
    if (x < bbox.left - 1 || x > bbox.left + bbox.width + 1) continue;
    ctx.fillStyle = f.color;
    ctx.beginPath();
    ctx.moveTo(x - r, bbox.top);
    ctx.lineTo(x + r, bbox.top);
    ctx.lineTo(x, bbox.top + 1.6 * r);
    ctx.closePath();
    ctx.fill();
  }
}

function drawLine(u, ms) {
  const { ctx, bbox } = u;
  const { x } = inPlot(u, ms);
  if (x < bbox.left || x > bbox.left + bbox.width) return;
  ctx.save();
  ctx.strokeStyle = css("--bad");
  ctx.lineWidth = 1.5 * devicePixelRatio;
  ctx.setLineDash([2 * devicePixelRatio, 3 * devicePixelRatio]);
  ctx.beginPath();
  ctx.moveTo(x, bbox.top);
  ctx.lineTo(x, bbox.top + bbox.height);
  ctx.stroke();
  ctx.restore();
}

// Draws the layer ("below" the data or "above" it) of `marks` on the uPlot chart `u`.
export function drawMarks(u, marks, layer) {
  const findings = marks.findings || [];
  u.ctx.save();
  if (layer === "below") drawSpans(u, findings, 0.1, u.bbox.height);
  else {
    drawSpans(u, findings, 0.7, Math.max(2, u.bbox.height * RIBBON));
    drawTriangles(u, findings);
    if (marks.line) drawLine(u, marks.line);
  }
  u.ctx.restore();
}

// The text of the finding whose triangle is under the cursor (`left`, `top` in the plot's CSS pixels), or null.
export function markTip(u, marks, left, top) {
  if (top > 2 * HOVER) return null;
  const near = (marks.findings || []).find((f) => Math.abs(u.valToPos(f.start, "x") - left) <= HOVER);
  return near ? near.text : null;
}

// What a chart element tells of its marks: each finding's span and text, and the time marker's time.
export function marksSummary(marks) {
  const findings = (marks && marks.findings) || [];
  return { spans: findings.map((f) => [f.start, f.end]), text: findings.map((f) => f.text),
    line: (marks && marks.line) || null };
}
