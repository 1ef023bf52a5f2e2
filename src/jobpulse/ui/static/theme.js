// The charts' colours: the series palette, the page theme's colours read from its CSS variables, and the
// charts that follow a change of theme.

import { currentTheme, onThemeChange } from "./shell.js";

export const PALETTE = ["#3b82f6", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#06b6d4", "#ec4899", "#84cc16",
  "#f97316", "#64748b", "#14b8a6", "#a855f7"];

export function color(i) { return PALETTE[i % PALETTE.length]; }

export function alpha(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${a})`;
}

// The value of the page's CSS variable `name` (e.g. "--border").
export function css(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

// Charts that follow the theme: each registers a function that draws it again.
const themed = new Set();
export function followTheme(fn) { themed.add(fn); return () => themed.delete(fn); }
onThemeChange(() => { for (const fn of themed) fn(currentTheme()); });
