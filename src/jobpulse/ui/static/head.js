// The one classic script of every page, run in its head before the first paint (the pages allow no inline
// script). It applies the saved theme, so a dark-theme user never sees a white flash, and starts the
// page's first API requests, named by the page's "prefetch" data block, while its modules load; api.js
// takes the responses over. On the job page's default view it also asks for the first charts as soon as
// the metric list arrives.
(() => {
  try {
    const theme = localStorage.getItem("jp-theme");
    if (theme) document.documentElement.dataset.theme = theme;
  } catch { /* private mode */ }

  const block = document.getElementById("prefetch");
  if (!block) return;
  const { paths, byHash, catalog, buckets } = JSON.parse(block.textContent);
  const started = (window.__jpPrefetch = {});
  const get = (path) => fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
  for (const path of [...paths, ...(byHash[location.hash] || [])]) started[path] = get(path);

  if (!catalog || location.search || (location.hash && location.hash !== "#metrics")) return;
  started.charts = started[catalog]
    .then((response) => (response.ok ? response.clone().json() : null))
    .then((list) => {
      if (!list) return;
      for (const { metric } of list.metrics.slice(0, 2)) {
        const path = `${catalog}/chart?${new URLSearchParams({ metric, axis: "iter", buckets: String(buckets) })}`;
        started[path] = get(path);
      }
    })
    .catch(() => {});
})();
