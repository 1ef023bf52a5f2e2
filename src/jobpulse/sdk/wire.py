"""Records queued by the caller, and their encoding into ingest requests.

The caller side of the SDK only appends tuples to a deque; everything else is done
here, in the sender thread: numbers are converted and checked, ``run.log`` keys become
their series (metric and variant: the key as written), scalars and log lines are grouped into the columnar
form of docs/ingest.md (one series per metric/variant, one per log level), and the
body is encoded with orjson and compressed with zstd; where pyarrow can be imported,
scalars go as an Arrow stream instead (``jobpulse.sdk.arrow``). Iterations are checked
by ``jobpulse.sdk.values``; a request the server finds too large is split by
``jobpulse.sdk.split``.

Queued records (the first item is the tag):

- ``(LOG_DICT, ts_ns, step, {key: value})`` from ``run.log``
- ``(SCALAR, ts_ns, metric, variant, iter, value)``
- ``(VECTOR, ts_ns, metric, variant, iter, values)``
- ``(PLOT, ts_ns, metric, variant, iter, plot)`` where ``plot`` is JSON bytes
- ``(IMAGE, ts_ns, metric, variant, iter, key, source)``; handled by the sender
- ``(LINE, ts_ms, seq, level, msg)`` console lines, logging records, ``run.text``
- ``(REQUEST, Request)`` a prepared HTTP request (job and worker registration, status)
- ``(MARK, threading.Event)`` set once every record queued before it is sent or spooled

``run.log`` records cost little to add: a record whose values are all finite floats is
kept as it is, with the consecutive records that have the same keys (a "block": their
steps, times and dicts); a block is turned into one column per key only when the batch
is encoded (or before a scalar of another kind is added, so points keep their order).

A batch knows whether it is "fresh": every scalar above the highest iteration already
stored (or sent) for its series, by the ``frontier`` it was given (None: not known, so
not fresh). The server stores fresh points cheaply in any number; points that replace
stored ones cost it more the more there are in one request, so the sender sends only
fresh batches larger than its normal size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from urllib.parse import urlencode

import orjson

from jobpulse.sdk.arrow import CONTENT_TYPE as ARROW_TYPE
from jobpulse.sdk.arrow import ArrowScalars
from jobpulse.sdk.values import ITER_MAX, ITER_MIN, JSON_OPTS, check_iter

LOG_DICT, SCALAR, VECTOR, PLOT, IMAGE, LINE, REQUEST, MARK = range(8)

MAX_MSG_CHARS = 32_768
MAX_NAME_CHARS = 255
LEVELS = ("debug", "info", "warning", "error", "critical")

_FLOAT = {float}
_NONE = ITER_MIN - 1  # below every iteration: the frontier of a series with nothing stored


@dataclass
class Request:
    """One HTTP request to the server; what a spool file holds."""

    method: str
    path: str
    body: bytes = b""
    content_type: str = "application/json"
    encoding: str = ""  # "" or "zstd"
    events: int = 0  # events carried, for reports
    kind: str = "ingest"  # ingest | file | job | worker
    meta: dict = field(default_factory=dict)


def wire_number(value: object) -> float | str:
    """A JSON-ready number; non-finite values become "NaN", "Infinity", "-Infinity".

    Raises TypeError/ValueError for values that are not numbers (the sender reports them).
    """
    if type(value) is not float:
        if isinstance(value, str):
            raise TypeError("a string is not a number")
        value = float(value)  # int, bool, numpy and 0-d tensor scalars, Decimal
    if value - value == 0.0:
        return value
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def key_series(key: str) -> tuple[str, str]:
    """The (metric, variant) a ``run.log`` key is stored as: the key as written, twice.

    ``"train/loss"`` -> ``("train/loss", "train/loss")``; ``"loss"`` -> ``("loss", "loss")``. Each key is a
    chart of its own, named as written; the part before its first ``/`` is only the chart's section in the
    UI (docs/names.md).
    """
    return key, key


Problem = Callable[[str, str], None]  # (kind of problem, message) -> None


class _Block:
    """Consecutive ``run.log`` records with the same keys, kept as they came."""

    __slots__ = ("view", "keys", "floor", "iters", "tss", "dicts")

    def __init__(self, view, keys: list[tuple[object, tuple[str, str]]], floor: int) -> None:
        self.view = view  # the keys of its first dict, to compare the next record's with
        self.keys = keys  # (key, (metric, variant)) of its valid keys
        self.floor = floor  # a step above it is fresh for every series of the block
        self.iters: list[int] = []
        self.tss: list[int] = []
        self.dicts: list[dict] = []


class Batch:
    """Accumulates records of one job/worker and encodes them as ingest requests."""

    def __init__(
        self, project: str, job: str, worker: str, problem: Problem, frontier: dict[tuple[str, str], int] | None = None
    ) -> None:
        self.project = project
        self.job = job
        self.worker = worker
        self.problem = problem
        self.frontier = frontier  # (metric, variant) -> highest iteration stored or sent; None: unknown
        self.fresh = True  # no scalar at or below its series' frontier (see the module docstring)
        self.scalars: dict[tuple[str, str], tuple[list, list, list]] = {}
        self.lines: dict[str, tuple[list, list, list]] = {}
        self.others: list[dict] = []
        self.points = 0
        self.size = 0  # rough uncompressed size in bytes
        self._blocks: list[_Block] = []  # run.log records not yet in ``scalars``, in order
        self._block: _Block | None = None  # the last of them
        self._names: dict[object, tuple[str, str]] = {}  # run.log key -> (metric, variant)

    def __bool__(self) -> bool:
        return self.points > 0

    # -- adding ---------------------------------------------------------------------------

    def _scalar(self, metric: str, variant: str, it: int, ts: int, value: object) -> None:
        try:
            number = wire_number(value)
        except (TypeError, ValueError, OverflowError):
            self.problem(
                "not-a-number",
                f"value of {metric}/{variant} is not a number ({type(value).__name__}); such values are dropped",
            )
            return
        if self._blocks:
            self._columns()  # the run.log points before this one come first
        if self.fresh and (self.frontier is None or it <= self.frontier.get((metric, variant), _NONE)):
            self.fresh = False
        cols = self.scalars.get((metric, variant))
        if cols is None:
            cols = self.scalars[(metric, variant)] = ([], [], [])
        cols[0].append(it)
        cols[1].append(ts)
        cols[2].append(number)
        self.points += 1
        self.size += 24

    def add_dict(self, ts_ns: int, step: object, values: dict) -> None:
        if type(step) is not int or not ITER_MIN <= step <= ITER_MAX:
            try:
                step = check_iter(step)
            except (TypeError, ValueError, OverflowError) as exc:
                self.problem("bad-step", f"run.log step {step!r} is not a valid iteration ({exc}); dropped")
                return
        numbers = values.values()
        if set(map(type, numbers)) != _FLOAT or (total := sum(numbers)) - total != 0.0:
            values = self._numbers(values)  # not all finite floats (a finite sum has no NaN or infinity)
        block = self._block
        if block is None or values.keys() != block.view:
            if not values:
                return
            block = self._open(values)
        width = len(block.keys)
        if width:
            if step <= block.floor:
                self.fresh = False
            block.iters.append(step)
            block.tss.append(ts_ns // 1_000_000)
            block.dicts.append(values)
            self.points += width
            self.size += 24 * width

    def _numbers(self, values: dict) -> dict:
        """``values`` as wire numbers; what is not a number is reported and left out."""
        out = {}
        for key, value in values.items():
            try:
                out[key] = wire_number(value)
            except (TypeError, ValueError, OverflowError):
                self.problem(
                    "not-a-number",
                    f"value of {key!r} is not a number ({type(value).__name__}); such values are dropped",
                )
        return out

    def _open(self, values: dict) -> _Block:
        names = self._names
        keys = []
        for key in values:
            found = names.get(key)
            if found is None:
                if not isinstance(key, str) or not key:
                    self.problem("bad-key", f"run.log key {key!r} is not a non-empty string; dropped")
                    continue
                found = names[key] = key_series(key[:MAX_NAME_CHARS])
            keys.append((key, found))
        frontier = self.frontier
        # with no frontier known, nothing is fresh
        floor = ITER_MAX if frontier is None else max((frontier.get(n, _NONE) for _, n in keys), default=_NONE)
        block = self._block = _Block(values.keys(), keys, floor)
        self._blocks.append(block)
        return block

    def _columns(self) -> None:
        """Move the kept ``run.log`` records into the per-series columns, in order."""
        scalars = self.scalars
        for block in self._blocks:
            for key, names in block.keys:
                cols = scalars.get(names)
                if cols is None:
                    cols = scalars[names] = ([], [], [])
                cols[0].extend(block.iters)
                cols[1].extend(block.tss)
                cols[2].extend(map(itemgetter(key), block.dicts))
        self._blocks = []
        self._block = None

    def add_scalar(self, ts_ns: int, metric: str, variant: str, it: object, value: object) -> None:
        try:
            step = check_iter(it)
        except (TypeError, ValueError, OverflowError) as exc:
            self.problem("bad-step", f"scalar iteration {it!r} is not valid ({exc}); dropped")
            return
        self._scalar(str(metric), str(variant), step, ts_ns // 1_000_000, value)

    def add_line(self, ts_ms: int, seq: int, level: str, msg: str) -> None:
        if len(msg) > MAX_MSG_CHARS:
            msg = msg[:MAX_MSG_CHARS]
        cols = self.lines.get(level)
        if cols is None:
            cols = self.lines[level] = ([], [], [])
        cols[0].append(seq)
        cols[1].append(ts_ms)
        cols[2].append(msg)
        self.points += 1
        self.size += 40 + len(msg)

    def add_event(self, event: dict, size: int = 100) -> None:
        """A vector, plot or image event (sent as JSON lines)."""
        self.others.append(event)
        self.points += 1
        self.size += size

    def add_vector(self, ts_ns: int, metric: str, variant: str, it: object, values: list) -> None:
        try:
            step = check_iter(it)
            numbers = [wire_number(v) for v in values]
        except (TypeError, ValueError, OverflowError) as exc:
            self.problem("bad-vector", f"vector {metric}/{variant} is not a list of numbers ({exc}); dropped")
            return
        event = {"kind": "vector", "metric": metric, "variant": variant, "iter": step}
        event.update(ts=ts_ns // 1_000_000, values=numbers)
        self.add_event(event, 60 + 12 * len(numbers))

    def add_plot(self, ts_ns: int, metric: str, variant: str, it: object, plot: bytes) -> None:
        try:
            step = check_iter(it)
        except (TypeError, ValueError, OverflowError) as exc:
            self.problem("bad-step", f"plot iteration {it!r} is not valid ({exc}); dropped")
            return
        event = {"kind": "plot", "metric": metric, "variant": variant, "iter": step}
        event.update(ts=ts_ns // 1_000_000, plot=orjson.Fragment(plot))
        self.add_event(event, 200 + len(plot))

    # -- encoding -------------------------------------------------------------------------

    def requests(self, compress: Callable[[bytes], bytes] | None, arrow: ArrowScalars | None = None) -> list[Request]:
        """The requests carrying this batch: scalars as an Arrow stream where ``arrow`` is given, else with the
        lines in the columnar form; JSON lines for the rest."""
        if self._blocks:
            self._columns()
        out: list[Request] = []
        series: list[dict] = []
        head = {"project": self.project, "job": self.job, "worker": self.worker}
        body = self._arrow_body(arrow) if arrow is not None and self.scalars else None
        if body is not None:
            path = f"/jp/v1/ingest?{urlencode({**head, 'kind': 'scalar'})}"
            out.append(Request("POST", path, body, ARROW_TYPE, "", self._scalar_points(), "ingest"))
        else:
            for (metric, variant), (iters, tss, values) in self.scalars.items():
                series.append(
                    {"kind": "scalar", "metric": metric, "variant": variant, "iter": iters, "ts": tss, "value": values}
                )
        for level, (seqs, tss, msgs) in self.lines.items():
            series.append({"kind": "log", "level": level, "seq": seqs, "ts": tss, "msg": msgs})
        if series:
            count = sum(len(s["ts"]) for s in series)
            body = orjson.dumps({**head, "series": series}, option=JSON_OPTS)
            out.append(self._request(body, "application/json", count, compress))
        if self.others:
            lines = []
            for event in self.others:
                event.update(head)
                lines.append(orjson.dumps(event, option=JSON_OPTS))
            body = b"\n".join(lines) + b"\n"
            out.append(self._request(body, "application/x-ndjson", len(self.others), compress))
        return out

    def _arrow_body(self, arrow: ArrowScalars) -> bytes | None:
        try:
            return arrow.body(self.scalars)
        except Exception as exc:  # pyarrow failing here: the columnar form carries the points instead
            self.problem("arrow-error", f"scalars could not be encoded as Arrow ({exc!r}); sending JSON")
            return None

    def _scalar_points(self) -> int:
        return sum(len(iters) for iters, _, _ in self.scalars.values())

    def advance(self, frontier: dict[tuple[str, str], int]) -> None:
        """Raise ``frontier`` to the highest iteration of each series of this (encoded) batch."""
        for key, (iters, _, _) in self.scalars.items():
            if iters:
                top = max(iters)
                if top > frontier.get(key, _NONE):
                    frontier[key] = top

    def _request(self, body: bytes, ctype: str, count: int, compress: Callable[[bytes], bytes] | None) -> Request:
        encoding = ""
        if compress is not None and len(body) > 256:
            body = compress(body)
            encoding = "zstd"
        return Request("POST", "/jp/v1/ingest", body, ctype, encoding, count, "ingest")
