"""Health, server description, and the web UI's login (one-time link or API key) and logout."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.responses import RedirectResponse

from ...errors import BadRequest
from ...store import ApiKey
from ...version import __version__
from ..access import SESSION_COOKIE
from ..context import caller, context
from ..responses import JSON

router = APIRouter(tags=["server"])


@router.get("/healthz", summary="Liveness and store reachability")
def health(request: Request) -> JSON:
    ctx = context(request)
    ctx.store.engine.query("SELECT 1 AS ok")
    return JSON({"status": "ok"})


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


def _session_response(request: Request, cookie: str, target: str) -> RedirectResponse:
    ctx = context(request)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=ctx.settings.session_hours * 3600,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )
    return response


@router.get("/login", summary="Open a UI session with a one-time login link's token")
def login_link(request: Request, token: str) -> RedirectResponse:
    ctx = context(request)
    return _session_response(request, ctx.access.redeem_login(token), "/")


@router.post("/jp/v1/session", summary="Open a UI session with an API key (form or JSON field 'api_key')")
async def login_key(request: Request) -> RedirectResponse:
    ctx = context(request)
    form = await request.form()
    token = form.get("api_key")
    if not isinstance(token, str) or not token:
        raise BadRequest("'api_key' is required", field="api_key")
    key = ctx.access.authenticate(token.strip())
    return _session_response(request, ctx.access.session_for(key.key_id), str(form.get("next") or "/"))


@router.post("/jp/v1/session/logout", summary="Close the UI session")
def logout(request: Request) -> RedirectResponse:
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(SESSION_COOKIE)
    return response


@router.post("/jp/v1/login-links", summary="A new one-time web UI login link for the calling key")
def new_login_link(request: Request, key: ApiKey = Depends(caller)) -> JSON:
    return JSON({"url": context(request).access.login_url(key.key_id)})
