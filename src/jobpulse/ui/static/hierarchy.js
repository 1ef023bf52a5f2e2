// The job → nodes → ranks hierarchy of a job's workers (as GET /jp/v1/jobs/{job} lists them, with kind,
// node, rank and local_rank): nodes with their ranks, and the lone processes that belong to no node.

import { natural } from "./format.js";

const byRank = (a, b) => (a.rank ?? Infinity) - (b.rank ?? Infinity) || natural(a.worker, b.worker);

// { nodes: [{ name, worker (the node worker, or null when none registered), ranks: [workers] }], lone: [workers],
//   ranks: the number of rank workers }
export function hierarchy(workers) {
  const nodes = new Map();
  const nodeOf = (name) => {
    if (!nodes.has(name)) nodes.set(name, { name, worker: null, ranks: [] });
    return nodes.get(name);
  };
  for (const w of workers) if (w.kind === "node") nodeOf(w.worker).worker = w;
  const lone = [];
  let ranks = 0;
  for (const w of workers) {
    if (w.kind === "node") continue;
    if (w.kind === "rank") ranks += 1;
    if (w.node) nodeOf(w.node).ranks.push(w);
    else lone.push(w);
  }
  const list = [...nodes.values()].sort((a, b) => natural(a.name, b.name));
  for (const node of list) node.ranks.sort(byRank);
  return { nodes: list, lone: lone.sort((a, b) => natural(a.worker, b.worker)), ranks };
}

// "2 nodes × 4 ranks" (ranks per node) where every node has as many, else "2 nodes · 7 ranks"; null for a job
// without ranks.
export function shapeText(tree) {
  if (!tree.ranks) return null;
  const n = tree.nodes.length;
  const nodes = `${n} node${n === 1 ? "" : "s"}`;
  const counts = new Set(tree.nodes.map((node) => node.ranks.length));
  if (counts.size === 1) {
    const m = [...counts][0];
    return `${nodes} × ${m} rank${m === 1 ? "" : "s"}`;
  }
  return `${nodes} · ${tree.ranks} ranks`;
}

// The workers whose lines or samples are a node's: the node worker itself (where registered) and its ranks.
export function members(node) {
  return [...(node.worker ? [node.worker.worker] : []), ...node.ranks.map((w) => w.worker)];
}

// Each node that has any of the workers in ``present`` (a Set of names), with those of its members (its own and its
// ranks'), and the set of every worker so placed: ``{ groups: [{ node, names }], placed }``.
export function nodeGroups(tree, present) {
  const groups = [];
  const placed = new Set();
  for (const node of tree.nodes) {
    const names = members(node).filter((w) => present.has(w));
    if (!names.length) continue;
    names.forEach((w) => placed.add(w));
    groups.push({ node, names });
  }
  return { groups, placed };
}

// The tree's rows in display order: each node, then its ranks (depth 1), then the lone processes.
export function rows(tree) {
  const out = [];
  for (const node of tree.nodes) {
    out.push({ node, worker: node.worker, depth: 0 });
    for (const w of node.ranks) out.push({ node, worker: w, depth: 1 });
  }
  for (const w of tree.lone) out.push({ node: null, worker: w, depth: 0 });
  return out;
}
