"""The API documentation: Swagger UI at ``/docs`` and ReDoc at ``/redoc``, from this server only.

Their scripts and styles come from npm (``web-assets/``, pinned by its lock file) and are copied into the
package at set-up and wheel-build time (``docs-static/``); they are served under ``/docs/assets/``. Swagger UI
is started by a script of this server (no inline script), so the pages run under a policy of ``'self'``
(``headers.py``); the one thing it stops is the logo of ReDoc's sidebar credit, which ReDoc loads from its
CDN and drops when it fails. When the assets were not built, both pages say how to build them.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from fastapi import APIRouter, FastAPI
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from .. import static_files
from .responses import error_response

ASSETS = Path(__file__).resolve().parent / "docs-static"
ASSETS_URL = "/docs/assets"
_SERVED = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png", "redoc.standalone.js")

# Starts Swagger UI on the element #swagger-ui with the spec named by its data-spec attribute.
_SWAGGER_INIT = """\
(function () {
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.spec,
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  });
})();
"""

_MISSING = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title} — API documentation not built</title></head>
<body><h1>The API documentation's assets are not built</h1>
<p>This server serves Swagger UI and ReDoc from its own files, which are taken from npm when jobpulse is set up.
They are missing from this installation. Build them (the npm registry must be reachable) and restart the server:</p>
<pre>python web-assets/build.py</pre>
<p>(<code>scripts/setup</code> runs it too.) Meanwhile the API's description is at
<a href="{openapi}">{openapi}</a>.</p></body></html>
"""


def assets_built(directory: Path = ASSETS) -> bool:
    """Whether Swagger UI's and ReDoc's files are in the package."""
    return all((directory / name).is_file() for name in _SERVED)


def swagger_page(title: str, openapi_url: str) -> str:
    """Swagger UI's page: local styles and scripts, started by ``swagger-init.js``."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)} — Swagger UI</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="{ASSETS_URL}/favicon-32x32.png">
<link rel="stylesheet" href="{ASSETS_URL}/swagger-ui.css"></head>
<body><div id="swagger-ui" data-spec="{escape(openapi_url)}"></div>
<script src="{ASSETS_URL}/swagger-ui-bundle.js"></script>
<script src="{ASSETS_URL}/swagger-init.js"></script></body></html>
"""


def redoc_page(title: str, openapi_url: str) -> str:
    """ReDoc's page: its standalone bundle renders the ``<redoc>`` element, no inline script."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)} — ReDoc</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="{ASSETS_URL}/favicon-32x32.png"></head>
<body><redoc spec-url="{escape(openapi_url)}" disable-search="false"></redoc>
<script src="{ASSETS_URL}/redoc.standalone.js"></script></body></html>
"""


def install(app: FastAPI, assets: Path = ASSETS) -> None:
    """Serve ``/docs``, ``/redoc`` and their assets on ``app`` (whose own docs routes are turned off)."""
    router = APIRouter(include_in_schema=False)
    title, openapi_url = app.title, app.openapi_url or "/openapi.json"

    def page(html: str) -> HTMLResponse:
        if not assets_built(assets):
            return HTMLResponse(_MISSING.format(title=escape(title), openapi=escape(openapi_url)), status_code=503)
        return HTMLResponse(html, headers={"Cache-Control": "no-cache"})

    @router.get("/docs")
    async def swagger_ui() -> HTMLResponse:
        return page(swagger_page(title, openapi_url))

    @router.get("/redoc")
    async def redoc() -> HTMLResponse:
        return page(redoc_page(title, openapi_url))

    @router.get(ASSETS_URL + "/swagger-init.js")
    async def swagger_init() -> Response:
        return Response(_SWAGGER_INIT, media_type=static_files.TYPES[".js"], headers={"Cache-Control": "no-cache"})

    @router.get(ASSETS_URL + "/{name}")
    async def asset(request: Request, name: str) -> Response:
        if name not in _SERVED or not (assets / name).is_file():
            return error_response(404, "not_found", f"no such documentation asset: {name}", "name")
        return static_files.answer(request, f"docs:{assets / name}", assets / name, "public, max-age=86400")

    app.include_router(router)
