"""Fixtures of the SDK tests: a real server process shared by the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def server() -> Iterator:
    from jobpulse.testing import running_server

    with running_server() as srv:
        yield srv
