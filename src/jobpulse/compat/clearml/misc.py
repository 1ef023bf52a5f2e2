"""Small calls ClearML clients make besides tasks, projects, models and events.

``server.info``, ``users.get_current_user`` and ``users.get_vaults`` answer; queues and workers are answered
as empty (``queues.get_all``, ``workers.get_all``) or 400/1 not supported, since jobpulse runs no agents.
"""

from __future__ import annotations

from typing import Any

from ...version import __version__
from .auth import SERVER_VERSION
from .dispatch import Call
from .envelope import NOT_SUPPORTED, ClearmlError
from .versions import MAX_VERSION, Registry, fmt


def server_info(call: Call) -> dict[str, Any]:
    return {
        "version": SERVER_VERSION,
        "build": f"jobpulse-{__version__}",
        "commit": "",
        "uid": "jobpulse",
        "api_version": fmt(MAX_VERSION),
    }


def current_user(call: Call) -> dict[str, Any]:
    key = call.caller
    return {
        "user": {
            "id": key.key_id,
            "name": key.name or key.key_id,
            "company": {"id": "jobpulse", "name": "jobpulse"},
            "role": "admin" if key.role == "admin" else "user",
            "preferences": {},
        },
        "getting_started": {},
        "settings": {},
    }


def get_vaults(call: Call) -> dict[str, Any]:
    return {"vaults": [], "total": 0}


def empty_queues(call: Call) -> dict[str, Any]:
    return {"queues": []}


def empty_workers(call: Call) -> dict[str, Any]:
    return {"workers": []}


def not_supported(call: Call) -> dict[str, Any]:
    raise ClearmlError(
        NOT_SUPPORTED,
        f"{call.name} is not supported: jobpulse has no queues, workers or agents (it records what scripts report)",
    )


def install(registry: Registry) -> None:
    registry.add("server.info", "2.1", server_info, auth=False)
    registry.add("users.get_current_user", "2.1", current_user)
    registry.add("users.get_vaults", "2.15", get_vaults)
    registry.add("queues.get_all", "2.1", empty_queues)
    registry.add("queues.get_all_ex", "2.1", empty_queues)
    registry.add("workers.get_all", "2.1", empty_workers)
    for name in (
        "queues.get_default",
        "queues.get_by_id",
        "queues.create",
        "queues.add_task",
        "queues.get_next_task",
        "queues.get_num_entries",
        "workers.register",
        "workers.status_report",
        "workers.unregister",
    ):
        registry.add(name, "2.1", not_supported)
