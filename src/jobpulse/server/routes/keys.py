"""API keys: create, list and revoke (admin keys only)."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from ...errors import BadRequest, NotFound
from ...store import ApiKey
from ..context import caller, context
from ..key_pairs import key_pairs
from ..responses import JSON

router = APIRouter(tags=["keys"])


@router.get("/jp/v1/keys", summary="The API keys of the caller's projects (never their secrets)")
def list_keys(request: Request, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    ctx.access.check(key, "admin")
    return JSON({"keys": [k.to_dict() for k in ctx.store.keys.list() if key.manages(k)]})


@router.post(
    "/jp/v1/keys",
    summary="Create a key: {name, projects, role, pair}; its token (or, with pair: true, the access key id and "
    "secret the vendors' SDKs sign with) is shown once",
)
async def create_key(request: Request, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    ctx.access.check(key, "admin")
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}", field="body") from exc
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object", field="body")
    name = body.get("name", "")
    projects = body.get("projects")
    if not isinstance(name, str) or len(name) > 200:
        raise BadRequest("'name' must be a string of at most 200 characters", field="name")
    if not isinstance(projects, list) or not all(isinstance(p, str) for p in projects):
        raise BadRequest("'projects' must be a list of project ids, or [\"*\"] for all", field="projects")
    if not key.allows_project("*") and not all(key.allows_project(p) for p in projects):
        raise BadRequest("a key can only grant projects its creator sees", field="projects")
    pair = body.get("pair", False)
    if not isinstance(pair, bool):
        raise BadRequest("'pair' must be true (an access key pair) or false (a token)", field="pair")
    role = body.get("role", "read")
    if pair:
        created, secret = await run_in_threadpool(key_pairs(request).create, name, projects, role)
        answer = {"key": created.to_dict(), "access_key_id": created.key_id, "access_key_secret": secret}
        return JSON(answer, status_code=201)
    created, token = await run_in_threadpool(ctx.store.keys.create, name, projects, role)
    return JSON({"key": created.to_dict(), "token": token}, status_code=201)


@router.delete(
    "/jp/v1/keys/{key_id}",
    summary="Revoke a key and end its web UI sessions: at once on this server, within key_cache_seconds on others",
)
def revoke_key(request: Request, key_id: str, key: ApiKey = Depends(caller)) -> JSON:
    ctx = context(request)
    ctx.access.check(key, "admin")
    target = ctx.store.keys.find(key_id)
    if target is None or not key.manages(target):
        raise NotFound(f"API key {key_id!r} does not exist", field="key_id")
    revoked = ctx.store.keys.revoke(key_id)
    ctx.access.forget(key_id)
    return JSON({"key": revoked.to_dict()})
