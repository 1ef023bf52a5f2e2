"""The vendor API tests share one real server holding the jobs of ``compat_data``."""

from __future__ import annotations

import pytest
from compat_data import Dataset, build


@pytest.fixture(scope="session")
def dataset(server) -> Dataset:  # noqa: ANN001 - the session's ServerProcess
    return build(server)
