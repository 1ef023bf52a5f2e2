"""The quickest path of JSON lines: a body read by Arrow's JSON reader and checked as the Arrow form is.

Arrow's reader parses the whole body into typed columns in C++, on every core, and the Arrow form's checks
(``arrow.add_events``) run on those columns. Like the fast path of ``lines_fast.py``, this path decides nothing on its
own: it takes a body only where reading it this way must give what the per-line rules give, and otherwise leaves it
untouched to the next path. It leaves:

- a body whose lines are not one JSON object each, that is not UTF-8 or starts with a byte order mark, or that
  holds more events than a batch may;
- a field the reader types otherwise than the rules read it (it infers each field's type from the body: a whole
  float for ``iter`` or ``ts``, a number for ``device``, text that looks like a date), a field no event of these
  kinds has, and anything the reader refuses (a string among the numbers of ``value``, a duplicated key...);
- a JSON ``null``, since an explicit null means something else per field than a missing one (the reader reads both
  as a null: the body is searched for the word where a column holds a null);
- a body whose first line does not start with ``{`` (pyarrow 26's reader crashes the process on a body that starts
  with ``null``);
- a ``value`` that is not finite (Arrow reads ``NaN`` and ``Infinity`` literals, which are not JSON) or is ``-0``;
- an empty ``project``, events of more than one kind, and any row the checks reject, so that the per-line path
  answers with its own messages, indices and order.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from ..store.series import one_value
from .arrow import add_events
from .batch import Batch

_TEXT = ("kind", "project", "job", "worker", "metric", "variant", "device", "level", "msg")
# the types the reader may give each field; it infers them, which is quicker than converting to a given schema
_TYPES: dict[str, tuple[pa.DataType, ...]] = {
    **{name: (pa.string(),) for name in _TEXT},
    **{name: (pa.int64(),) for name in ("iter", "ts", "seq")},
    "value": (pa.float64(), pa.int64()),
    "model_event": (pa.bool_(),),
}
# the end of one object and the start of the next, around a line break: no JSON value holds a '}' followed by '{'
_BOUNDARY = re.compile(rb"\}[ \t\r]*\n[ \t\r]*\{")
_BLANK = b" \t\r\n"
_NULL = re.compile(rb"null")  # a search by the regular expression engine is quicker than bytes.find here
_LINE_BREAK, _CLOSE, _OPEN = ord("\n"), ord("}"), ord("{")


def read_lines(data: bytes, defaults: dict[str, Any], max_events: int, now_ms: int) -> Batch | None:
    """The batch of a JSON-lines body whose every line is a good scalar, system or log event of one kind; None for
    any other body (see the module's text)."""
    start, end = len(data) - len(data.lstrip(_BLANK)), len(data.rstrip(_BLANK))
    if start >= end or defaults.get("project") == "":
        return None
    if data[start] != _OPEN or data[end - 1] != _CLOSE:
        # not an object a line; this also leaves a byte order mark, which the reader skips and the rules refuse, and
        # a body starting with null, on which the reader crashes the process
        return None
    if not data.isascii():
        try:
            data.decode()  # the reader takes text that is not UTF-8 (an encoded surrogate...) into its strings
        except UnicodeDecodeError:
            return None
    text = np.frombuffer(data, np.uint8, count=end - start, offset=start)
    breaks = np.flatnonzero(text == _LINE_BREAK)
    lines = len(breaks) + 1
    if lines > max_events:
        return None
    # the first and last bytes are not blank, so every line break has a byte on each side
    one_a_line = bool((text[breaks - 1] == _CLOSE).all() and (text[breaks + 1] == _OPEN).all())
    if not one_a_line and len(_BOUNDARY.findall(data, start, end)) != lines - 1:
        return None  # a blank line, or an object across lines: the reader would not count lines as the rules do
    try:
        table = pa_json.read_json(pa.py_buffer(memoryview(data)[start:end]))
    except (pa.ArrowException, ValueError):
        return None
    if table.num_rows != lines:
        return None  # two objects on one line
    # a JSON null is read as a missing field; where no column holds a null, no line holds one (a null inside a
    # list or an object makes a column of a type no field has): the body is searched only otherwise
    if any(column.null_count for column in table.columns) and _NULL.search(data, start, end):
        return None
    table = _typed(table)
    if table is None or not _as_the_rules_read(table):
        return None
    batch = Batch()
    add_events(table, defaults, batch, now_ms)
    return None if batch.errors else batch


def _typed(table: pa.Table) -> pa.Table | None:
    """The table without the fields no line has; None where a field is not an event's, was read as another type
    than the rules read it (a whole float for ``iter``, a date-like string...), or none is left."""
    present = [name for name in table.column_names if not pa.types.is_null(table.schema.field(name).type)]
    if not present:
        return None  # lines of no field at all: a table without columns has no rows
    if any(table.schema.field(name).type not in _TYPES.get(name, ()) for name in present):
        return None
    return table.select(present)


def _as_the_rules_read(table: pa.Table) -> bool:
    """Whether every value the reader made is the one the per-line rules make of the same text."""
    names = table.column_names
    if "kind" in names and one_value(table["kind"]) is None:
        return False  # several kinds: the per-line path orders tables and jobs by the first event of each
    if "project" in names and pc.any(pc.equal(table["project"], "")).as_py():
        return False
    if "value" in names:
        values = pc.fill_null(table["value"], 1.0).combine_chunks().to_numpy()
        if not np.isfinite(values).all() or (np.signbit(values) & (values == 0)).any():
            return False
    return True
