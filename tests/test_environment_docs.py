"""docs/environment.md names every environment variable jobpulse reads."""

from __future__ import annotations

import re
from pathlib import Path

from jobpulse.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "environment.md").read_text()


def _documented() -> set[str]:
    """Variables named in the first column of the document's tables."""
    return set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", DOC, flags=re.MULTILINE))


def test_every_jobpulse_variable_in_the_source_is_documented() -> None:
    named = set()
    for path in (ROOT / "src" / "jobpulse").rglob("*.py"):
        named |= set(re.findall(r"\bJOBPULSE_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    assert named, "no JOBPULSE_ variable found: the scan is broken"
    assert named - _documented() == set()


def test_every_server_setting_is_documented_as_its_variable() -> None:
    variables = {f"JOBPULSE_{setting.name.upper()}" for setting in SETTINGS}
    assert variables - _documented() == set()


def test_the_tables_render_on_a_code_host() -> None:
    """Each table: a header row, a delimiter row of as many cells, rows of as many cells."""
    tables = re.findall(r"((?:^\|.*\|\n)+)", DOC, flags=re.MULTILINE)
    assert len(tables) >= 5
    for table in tables:
        rows = [row.strip().strip("|").split(" | ") for row in table.strip().splitlines()]
        assert all(re.fullmatch(r" ?-{3,} ?", cell) for cell in rows[1]), rows[1]
        assert {len(row) for row in rows} == {len(rows[0])}, table
