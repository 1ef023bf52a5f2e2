"""Endpoint paths and API versions.

A ClearML endpoint is called as ``/<service>.<action>`` or ``/v<major>.<minor>/<service>.<action>`` under the
API host. A path without a version asks for the newest one, :data:`MAX_VERSION` (the newest a ClearML server
serves today: 2.31, which the events service needs for its newer fields). Each endpoint answers with the
newest of its documented versions that is not newer than the one asked for (a version older than the
endpoint's first answers with its first), and the answer names both in ``meta.endpoint``. As on a ClearML
server, a version above the newest is served as the newest (a client newer than the server keeps working);
one below :data:`MIN_VERSION` (the lowest in the events document), or not of the form ``<major>.<minor>``,
gets 400/2; an unknown endpoint 404.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .envelope import ENDPOINT_NOT_FOUND, INVALID_VERSION, ClearmlError

Version = tuple[int, int]
MIN_VERSION: Version = (1, 5)
MAX_VERSION: Version = (2, 31)

# Services a ClearML client may call; their paths are routed here, other names are left to other routes.
SERVICES = (
    "auth",
    "events",
    "tasks",
    "projects",
    "models",
    "queues",
    "workers",
    "users",
    "server",
    "organization",
    "pipelines",
    "reports",
    "storage",
    "login",
    "debug",
    "serving",
    "datasets",
    "dataviews",
    "frames",
    "apps",
)
PATH = re.compile(r"^/(?:v(?P<version>[^/]+)/)?(?P<name>[A-Za-z_]\w*\.[A-Za-z_]\w*)/?$")


def parse_version(text: str) -> Version:
    match = re.fullmatch(r"(\d+)\.(\d+)", text)
    if not match:
        raise ClearmlError(
            INVALID_VERSION, f"request path has invalid version: {text!r} (expected e.g. v2.23)", version=text
        )
    version = (int(match.group(1)), int(match.group(2)))
    if version < MIN_VERSION:
        raise ClearmlError(
            INVALID_VERSION,
            f"invalid API version {text} (the oldest served is {fmt(MIN_VERSION)}, the newest {fmt(MAX_VERSION)})",
            version=text,
        )
    return version


def served(version: Version) -> Version:
    """The version that serves a request for ``version``: itself, or the newest when it is newer still."""
    return min(version, MAX_VERSION)


def fmt(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


def at_least(version: Version, text: str) -> bool:
    """Whether ``version`` is ``text`` or newer."""
    major, minor = text.split(".")
    return version >= (int(major), int(minor))


@dataclass
class Endpoint:
    name: str
    versions: list[Version]
    handler: Callable[..., Any]
    auth: bool = True


@dataclass
class Registry:
    endpoints: dict[str, Endpoint] = field(default_factory=dict)

    def add(self, name: str, versions: str, handler: Callable[..., Any], *, auth: bool = True) -> None:
        """Register ``handler`` for ``name`` at the space-separated documented ``versions``."""
        parsed = sorted(tuple(int(p) for p in v.split(".")) for v in versions.split())
        self.endpoints[name] = Endpoint(name, parsed, handler, auth)  # type: ignore[arg-type]

    def resolve(self, name: str, requested: Version) -> tuple[Endpoint, Version]:
        """The endpoint and the version that answers a call of ``name`` at ``requested``."""
        endpoint = self.endpoints.get(name)
        if endpoint is None:
            raise ClearmlError(
                ENDPOINT_NOT_FOUND,
                f"Unable to find endpoint for name {name} and version {fmt(requested)}",
                endpoint=name,
            )
        answering = endpoint.versions[0]
        for version in endpoint.versions:
            if version <= requested:
                answering = version
        return endpoint, answering

    def names(self) -> list[str]:
        return sorted(self.endpoints)


def route_paths() -> list[str]:
    """The route patterns of every service: ``/<service>.{action}`` with and without a version."""
    paths = []
    for service in SERVICES:
        paths.append(f"/{service}.{{action}}")
        paths.append(f"/v{{version}}/{service}.{{action}}")
    return paths
