// Plotly.js, for the plots the job reported (Plotly figures, as ClearML's plot events are) and nothing else: loaded
// only when such a plot is shown (served by this server from the plotly package), with layouts in the page's theme.

import { boot } from "./shell.js";
import { css } from "./theme.js";

let loading = null;
export function loadPlotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!loading) {
    loading = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = boot.plotly;
      script.async = true;
      script.addEventListener("load", () => resolve(window.Plotly));
      script.addEventListener("error", () => reject(new Error("the plot library could not be loaded")));
      document.head.append(script);
    });
  }
  return loading;
}

function axisStyle() {
  return { gridcolor: css("--border"), zerolinecolor: css("--border"), linecolor: css("--border-strong"),
    tickcolor: css("--border-strong"), automargin: true, showspikes: false };
}

export function themeColors() {
  const axis = axisStyle();
  return {
    paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
    font: { family: css("--font"), size: 11, color: css("--muted") },
    hoverlabel: { bgcolor: css("--surface"), bordercolor: css("--border-strong"),
      font: { color: css("--text"), family: css("--font"), size: 12 } },
    legend: { font: { color: css("--text-2"), size: 11 } },
    xaxis: axis, yaxis: axis,
  };
}

export function baseLayout(extra = {}) {
  const theme = themeColors();
  return {
    ...theme,
    margin: { l: 56, r: 16, t: 10, b: 34 },
    hovermode: "x unified",
    dragmode: "zoom",
    showlegend: false,
    legend: { ...theme.legend, orientation: "h", x: 0, y: 1.0, yanchor: "bottom", bgcolor: "rgba(0,0,0,0)" },
    ...extra,
    xaxis: { ...theme.xaxis, ...(extra.xaxis || {}) },
    yaxis: { ...theme.yaxis, ...(extra.yaxis || {}) },
  };
}

export const CONFIG = { displaylogo: false, responsive: true, scrollZoom: false,
  modeBarButtonsToRemove: ["lasso2d", "select2d", "autoScale2d", "toggleSpikelines", "hoverClosestCartesian",
    "hoverCompareCartesian"] };
