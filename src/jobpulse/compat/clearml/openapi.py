"""The ClearML endpoints in the server's OpenAPI document.

ClearML calls are routed by name (``/<service>.<action>``, see :mod:`.versions`), so FastAPI cannot describe
them on its own. :func:`install` adds one operation per registered endpoint to ``/openapi.json`` (and so to
``/docs``): its path without a version (the newest one answers; ``/v2.23/...`` works the same way), the JSON
object of fields the call takes, and the ``{"meta", "data"}`` envelope every answer has, errors included.
``events.add_batch`` is documented with a JSON array of events, which it accepts as well as JSON lines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from .versions import Registry, fmt

# Fields ClearML calls take, across its services; each endpoint reads the ones its ClearML document names.
FIELDS = (
    "task",
    "tasks",
    "id",
    "ids",
    "model",
    "project",
    "name",
    "names",
    "type",
    "status",
    "status_reason",
    "status_message",
    "force",
    "metric",
    "metrics",
    "variant",
    "iter",
    "iters",
    "iteration",
    "key",
    "event_type",
    "order",
    "scroll_id",
    "batch_size",
    "navigate_earlier",
    "navigate_current_metric",
    "refresh",
    "no_scroll",
    "samples",
    "from_timestamp",
    "only_fields",
    "page",
    "page_size",
    "order_by",
    "search_hidden",
    "tags",
    "system_tags",
    "hyperparams",
    "configuration",
    "replace_hyperparams",
    "replace_configuration",
    "artifacts",
    "metadata",
    "requirements",
    "uri",
    "ready",
    "publish",
    "allow_locked",
    "threshold_sec",
    "expiration_sec",
    "description",
    "comment",
)
EVENT_FIELDS = ("type", "task", "metric", "variant", "iter", "timestamp", "worker", "value", "values", "plot_str")
EVENT_FIELDS += ("url", "key", "msg", "level", "model_event", "allow_locked")

_ENVELOPE = {
    "type": "object",
    "required": ["meta", "data"],
    "properties": {
        "meta": {
            "type": "object",
            "required": ["result_code", "result_subcode", "result_msg", "endpoint"],
            "properties": {
                "id": {"type": "string"},
                "trx": {"type": "string"},
                "endpoint": {"type": "object"},
                "result_code": {"type": "integer"},
                "result_subcode": {"type": "integer"},
                "result_msg": {"type": "string"},
                "error_stack": {"type": "string"},
                "error_data": {"type": "object"},
            },
        },
        "data": {},
    },
}
_REQUEST = {
    "type": "object",
    "description": "The fields of the call, as ClearML's API reference names them; fields a call does not "
    "take are ignored.",
    "properties": {name: {} for name in FIELDS},
}
_EVENT = {
    "type": "object",
    "description": "One event: training_stats_scalar, training_stats_vector, plot, training_debug_image or log.",
    "properties": {name: {} for name in EVENT_FIELDS},
}
_SCHEMAS = {"ClearmlResponse": _ENVELOPE, "ClearmlRequest": _REQUEST, "ClearmlEvent": _EVENT}


def install(app: FastAPI, registry: Registry) -> None:
    """Describe every endpoint of ``registry`` in ``app``'s OpenAPI document."""
    generate: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()
        if "/events.add" not in schema["paths"]:
            schema["paths"].update(paths(registry))
            schema.setdefault("components", {}).setdefault("schemas", {}).update(_SCHEMAS)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def paths(registry: Registry) -> dict[str, Any]:
    """One ``POST /<service>.<action>`` operation per endpoint of ``registry``."""
    return {f"/{name}": {"post": _operation(registry, name)} for name in registry.names()}


def _operation(registry: Registry, name: str) -> dict[str, Any]:
    endpoint = registry.endpoints[name]
    versions = ", ".join(fmt(v) for v in endpoint.versions)
    credentials = (
        "Send the access key and secret key as HTTP Basic credentials; the answer's token is then sent as "
        "'Authorization: Bearer <token>'."
        if not endpoint.auth
        else "Authorization: Bearer <token from auth.login>, Basic <access key:secret key>, or Bearer <jobpulse key>."
    )
    body: dict[str, Any] = {"$ref": "#/components/schemas/ClearmlRequest"}
    if name == "events.add":
        body = {"$ref": "#/components/schemas/ClearmlEvent"}
    elif name == "events.add_batch":
        body = {"type": "array", "items": {"$ref": "#/components/schemas/ClearmlEvent"}}
    envelope = {"application/json": {"schema": {"$ref": "#/components/schemas/ClearmlResponse"}}}
    return {
        "tags": ["ClearML"],
        "summary": f"ClearML {name}",
        "description": f"Documented versions: {versions}; also served as /v<version>/{name} and with GET. "
        f"{credentials}",
        "operationId": f"clearml_{name.replace('.', '_')}",
        "requestBody": {"required": False, "content": {"application/json": {"schema": body}}},
        "responses": {
            "200": {"description": "The call's answer in 'data'", "content": envelope},
            "default": {"description": "An error: ClearML's result code and subcode in 'meta'", "content": envelope},
        },
    }
