"""Static files of the UI (uPlot and Plotly.js among them, built from npm into ``static/third-party/``), answered by
``static_files.answer``; the modules a page imports.
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

from ..errors import NotFound

STATIC_DIR = Path(__file__).parent / "static"
# uPlot, the charts' library: ``web-assets/build.py`` copies it from npm (git ignores it)
UPLOT = "third-party/uPlot.esm.js"
UPLOT_CSS = "third-party/uPlot.min.css"
PLOTLY = "third-party/plotly.min.js"  # Plotly.js, for the Plotly figures jobs report, built with uPlot
BUILD_HINT = "python web-assets/build.py"


def static_path(name: str) -> Path:
    path = (STATIC_DIR / name).resolve()
    if STATIC_DIR.resolve() not in path.parents or not path.is_file():
        raise NotFound(f"no UI file {name!r}", field="name")
    return path


_IMPORT = re.compile(r'^\s*import\s[^;]*?from\s+"\./([\w./-]+\.js)"', re.MULTILINE)


@functools.cache
def module_deps(entry: str) -> tuple[str, ...]:
    """Every module ``entry`` imports, directly or not, so a page can ask for all of them at once (a module missing
    from the package among them: see :func:`missing`)."""
    seen: list[str] = []
    todo = [entry]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        if (STATIC_DIR / name).is_file():
            todo.extend(_IMPORT.findall((STATIC_DIR / name).read_text()))
    return tuple(sorted(seen[1:]))


def missing(names: tuple[str, ...]) -> tuple[str, ...]:
    """Those of ``names`` not in the package (uPlot before ``web-assets/build.py`` has run)."""
    return tuple(name for name in names if not (STATIC_DIR / name).is_file())


@functools.cache
def version() -> str:
    """A short hash of the static files, to make their URLs change when they change."""
    digest = hashlib.sha256()
    for path in sorted(STATIC_DIR.rglob("*")):
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:12]
