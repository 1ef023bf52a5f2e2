"""What the SDK checks at once, in the caller's thread: the names a run reports under, the steps of report
calls, and the server's answer to the job's registration.

A mistake in the code or its environment (a project id the server would refuse, a step that is not a whole
number) raises ``ValueError`` naming the argument or variable, before anything is sent: no retry could fix
it, and a run that records nothing must not look like one that works. The ids follow the server's rules
(``jobpulse.store.jobs``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from jobpulse.sdk.transport import OK, RETRY, Transport
from jobpulse.sdk.values import ITER_MAX, ITER_MIN
from jobpulse.sdk.wire import LEVELS, Request

PROJECT_ID = re.compile(r"^[A-Za-z0-9-]{1,64}$")
JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
WORKER_ID = re.compile(r"^[A-Za-z0-9._:@/-]{1,128}$")


class RefusedError(RuntimeError):
    """The server refused to register the run (a bad key, a key without write access to the project, a job id
    taken by another project, ...). ``status`` is the HTTP status, ``message`` the server's words."""

    def __init__(self, url: str, status: int, message: str) -> None:
        super().__init__(f"the server at {url} refused to register the run (HTTP {status}): {message}")
        self.url = url
        self.status = status
        self.message = message


def _bad(name: str, rule: str, value: Any) -> ValueError:
    return ValueError(f"{name} must be {rule}, got {value!r}")


def check_project(value: Any, name: str = "project") -> str:
    if not isinstance(value, str) or not PROJECT_ID.match(value):
        raise _bad(name, "1-64 letters, digits or '-'", value)
    return value


def check_job(value: Any, name: str = "job") -> str:
    if not isinstance(value, str) or not JOB_ID.match(value):
        raise _bad(name, "1-128 letters, digits or '._:-' starting with a letter or digit", value)
    return value


def check_worker(value: Any, name: str = "worker") -> str:
    if not isinstance(value, str) or not WORKER_ID.match(value):
        raise _bad(name, "1-128 letters, digits or '._:@/-'", value)
    return value


def check_tags(tags: Iterable[str] | None) -> list[str]:
    if tags is None:
        return []
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        raise _bad("tags", "a list of strings", tags)
    found = list(tags)
    for tag in found:
        if not isinstance(tag, str) or not 0 < len(tag) <= 128:
            raise _bad("tags", "strings of 1-128 characters", tag)
    return found


def check_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise _bad("config", "a mapping of names to values", config)
    return dict(config)


def check_step(value: Any, name: str = "step") -> int:
    """A step (iteration): a whole number (``int`` or a numpy integer, not a bool) in [-2^31, 2^53]."""
    if type(value) is not int:
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise _bad(name, "a whole number (int)", value)
        value = value.__index__()
    if not ITER_MIN <= value <= ITER_MAX:
        raise _bad(name, "in [-2^31, 2^53]", value)
    return value


def check_level(level: Any) -> str:
    if level not in LEVELS:
        raise _bad("level", f"one of {', '.join(LEVELS)}", level)
    return level


def check_flag(raw: str | None, name: str) -> bool:
    """An on/off environment variable: 1, true, yes or on; 0, false, no, off or empty."""
    text = (raw or "").strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("", "0", "false", "no", "off"):
        return False
    raise _bad(name, "1/true/yes/on or 0/false/no/off", raw)


def server_message(body: bytes, detail: str) -> str:
    """The message of a native API error answer, else what the transport said of it."""
    try:
        return str(orjson.loads(body)["error"]["message"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return detail


def register(request: Request, url: str, api_key: str | None, timeout: float, never_raise: bool) -> bool:
    """Send the job's registration now and wait for the answer, ``timeout`` seconds at most.

    True when the server took it. False when it could not be reached in time, or was busy (the sender sends
    the registration later, from the spool while the server stays away), and when it refused but the caller
    chose ``never_raise`` (the sender then treats it as any refused request: kept for a key problem, dropped
    and reported for a bad one). Otherwise a refusal raises ``RefusedError`` with the server's message.
    """
    transport = Transport(url, api_key, timeout)
    try:
        answer = transport.send(request, timeout)
    finally:
        transport.close()
    if answer.outcome == OK:
        return True
    if answer.outcome == RETRY or never_raise:
        return False
    raise RefusedError(url, answer.status, server_message(answer.body, answer.detail))
