"""Server description, and the web UI's login (one-time link or API key) and logout."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse

from ...errors import BadRequest
from ...store import ApiKey
from ...version import __version__
from ..access import SESSION_COOKIE
from ..context import caller, context
from ..origin import local_target
from ..responses import JSON

router = APIRouter(tags=["server"])


@router.get("/jp/v1/server", summary="Version, store transport and schema version")
def server_info(request: Request, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    return JSON(
        {
            "version": __version__,
            "store": ctx.store.engine.name,
            "schema_version": ctx.store.schema_version,
            "caller": key.to_dict(),
        }
    )


def _session_response(request: Request, cookie: str, target: object) -> RedirectResponse:
    """Set the session cookie and go to ``target`` if it is a path on this server, else to ``/``."""
    ctx = context(request)
    response = RedirectResponse(local_target(target), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=ctx.settings.session_hours * 3600,
        httponly=True,
        samesite="lax",
        secure=_secure(request),
    )
    return response


def _secure(request: Request) -> bool:
    """Whether the browser reaches this server over TLS (directly, or through a proxy at the public URL)."""
    return request.url.scheme == "https" or context(request).settings.url.startswith("https://")


@router.get("/login", summary="Open a UI session with a one-time login link's token, then show 'next' (a path)")
def login_link(request: Request, token: str, next: str = "/") -> RedirectResponse:
    ctx = context(request)
    return _session_response(request, ctx.access.redeem_login(token), next)


@router.post(
    "/jp/v1/session",
    summary="Open a UI session with an API key (form field 'api_key'), then show 'next' (a path on this server)",
)
async def login_key(request: Request) -> RedirectResponse:
    ctx = context(request)
    # a sign-in posted by another site would sign the browser in as the sender's key (login CSRF)
    ctx.access.require_same_origin(request, proof_required=False)
    form = await request.form(max_files=0, max_fields=16, max_part_size=16 << 10)  # a key and a path, no more
    token = form.get("api_key")
    if not isinstance(token, str) or not token.strip():
        raise BadRequest("'api_key' is required", field="api_key")
    key = await run_in_threadpool(ctx.access.authenticate, token.strip())
    cookie = await run_in_threadpool(ctx.access.session_for, key.key_id)
    return _session_response(request, cookie, form.get("next"))


@router.post("/jp/v1/session/logout", summary="Close the UI session: it ends in the store, for every replica")
def logout(request: Request) -> RedirectResponse:
    ctx = context(request)
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        ctx.access.require_same_origin(request)
        ctx.access.end_session(cookie)
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="lax", secure=_secure(request))
    return response


@router.post("/jp/v1/login-links", summary="A new one-time web UI login link for the calling key")
def new_login_link(request: Request, key: ApiKey = Depends(caller)) -> JSON:
    return JSON({"url": context(request).access.login_url(key.key_id)})
