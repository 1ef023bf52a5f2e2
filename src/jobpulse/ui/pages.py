"""Routes of the UI: the pages, their static files (uPlot among them) and Plotly.js, and the UI's error page."""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import quote

from fastapi import APIRouter, Request
from starlette.responses import HTMLResponse, Response

from .. import static_files
from ..errors import Forbidden, Unauthorized
from ..server.context import context
from ..store import ApiKey
from ..store.identity import check_job
from . import assets, html

router = APIRouter(include_in_schema=False)

_PAGE = re.compile(r"^/(?:$|jobs(?:/|$)|compare/?$|keys/?$|ui/|login$)")
_NO_STORE = {"Cache-Control": "no-store"}


def is_ui_request(request: Request) -> bool:
    """Whether ``request`` is for a page or asset of the UI (its errors then answer as HTML)."""
    return bool(_PAGE.match(request.url.path))


def static_prefix() -> str:
    return f"/ui/static/{assets.version()}"


def plotly_url() -> str:
    """Plotly.js, for the Plotly figures a job reported (built from npm with uPlot: ``web-assets/``)."""
    return f"{static_prefix()}/{assets.PLOTLY}"


def render_error(status: int, code: str, message: str, field: str | None) -> Response:
    """The UI's single error shape: an HTML page with the status and a plain message."""
    if status >= 500:
        message = "The server failed to answer this page."
    body = html.error_page(static=static_prefix(), status=status, message=message)
    return HTMLResponse(body, status_code=status, headers=_NO_STORE)


def _key(request: Request) -> ApiKey | None:
    try:
        return context(request).access.native_key(request)
    except Unauthorized:
        return None


def _login(request: Request) -> HTMLResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    message = "Your session has ended; sign in again." if request.cookies.get("jobpulse_session") else ""
    return HTMLResponse(
        html.login_page(static=static_prefix(), next_url=target, message=message), status_code=401, headers=_NO_STORE
    )


def _page(
    title: str,
    page: str,
    boot: dict,
    plots: bool = False,
    prefetch: Sequence[str] = (),
    charts_of: str | None = None,
    by_hash: dict[str, list[str]] | None = None,
    key: ApiKey | None = None,
) -> HTMLResponse:
    modules = assets.module_deps(f"{page}.js")
    admin = key is not None and key.can("admin")
    missing = assets.missing(modules)
    if missing:
        body = html.unbuilt_page(
            title=title, static=static_prefix(), missing=missing, command=assets.BUILD_HINT, admin=admin
        )
        return HTMLResponse(body, status_code=503, headers=_NO_STORE)
    body = html.shell(
        title=title,
        page=page,
        static=static_prefix(),
        boot=boot,
        plotly=plotly_url() if plots else None,  # the plots a job reported
        modules=modules,
        styles=[assets.UPLOT_CSS] if assets.UPLOT in modules else [],
        prefetch=prefetch,
        charts_of=charts_of,
        by_hash=by_hash,
        admin=admin,
    )
    return HTMLResponse(body, headers=_NO_STORE)


@router.get("/")
def jobs_page(request: Request) -> Response:
    key = _key(request)
    if key is None:
        return _login(request)
    first = ["/jp/v1/jobs?limit=50", "/jp/v1/projects"] if not request.url.query else []
    return _page("Jobs", "jobs", {}, prefetch=first, key=key)


def _job_or_raise(request: Request, key: ApiKey, job: str) -> dict:
    check_job(job)
    found = context(request).access.job(key, job)
    return {"job": found.job, "project": found.project, "name": found.name}


@router.get("/jobs/{job}")
def job_page(request: Request, job: str) -> Response:
    key = _key(request)
    if key is None:
        return _login(request)
    boot = _job_or_raise(request, key, job)
    api = f"/jp/v1/jobs/{quote(job, safe='')}"
    return _page(
        boot["name"] or job,
        "job",
        boot,
        prefetch=[api, f"{api}/scalars"],
        plots=True,
        charts_of=f"{api}/scalars",
        by_hash={"#system": [f"{api}/system"]},
        key=key,
    )


@router.get("/jobs/{job}/logs")
def logs_page(request: Request, job: str) -> Response:
    key = _key(request)
    if key is None:
        return _login(request)
    boot = _job_or_raise(request, key, job)
    api = f"/jp/v1/jobs/{quote(job, safe='')}"
    first = [api, f"{api}/logs/workers"] + ([] if request.url.query else [f"{api}/logs?start=tail&limit=500"])
    return _page(f"Logs of {boot['name'] or job}", "logs", boot, prefetch=first, key=key)


@router.get("/compare")
def compare_page(request: Request, jobs: str = "") -> Response:
    key = _key(request)
    if key is None:
        return _login(request)
    return _page("Compare", "compare", {"jobs": [j for j in jobs.split(",") if j]}, key=key)


@router.get("/keys")
def keys_page(request: Request) -> Response:
    """API keys and access key pairs of the signed-in admin's projects: list, create, revoke."""
    key = _key(request)
    if key is None:
        return _login(request)
    if not key.can("admin"):
        raise Forbidden("the keys page is for admins only: sign in with a key of the admin role", field="role")
    boot = {"projects": key.projects, "self": key.key_id}
    return _page("API keys", "keys", boot, prefetch=["/jp/v1/keys"], key=key)


@router.get("/jobs")
def jobs_alias() -> Response:
    return Response(status_code=307, headers={"Location": "/"})


@router.get("/ui/static/{release}/{name:path}")
def static_file(request: Request, release: str, name: str) -> Response:
    current = release == assets.version()
    cache = "public, max-age=31536000, immutable" if current else "no-cache"
    return static_files.answer(request, f"static:{name}", assets.static_path(name), cache)
