"""The web UI: pages for the jobs list, a job, its logs and comparisons.

The pages are plain HTML shells with JavaScript modules (``static/``) that read the native API with the browser's
session cookie. Time series and the heat map are drawn with uPlot, built from npm into ``static/third-party/`` when the
package is set up (``web-assets/build.py``); the Plotly figures a job reports are shown with Plotly.js, built
alike and loaded only there. A page needs nothing beyond this server. A page holds no inline
script (its data travel in JSON blocks), so it runs under the strict policy of ``server/headers.py``.
"""

from __future__ import annotations

from fastapi import FastAPI

from .pages import is_ui_request, render_error, router


def install(app: FastAPI) -> None:
    """Add the UI's pages and assets to ``app``; its errors answer as HTML pages."""
    from ..server.app import add_error_shape

    app.include_router(router)
    add_error_shape(app, is_ui_request, render_error)
