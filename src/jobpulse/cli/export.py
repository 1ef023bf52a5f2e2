"""Writers of points (``metric, variant, iter, ts, value``) for ``jobpulse metrics KEY`` and ``jobpulse export``:
a table for people, CSV, JSON lines, and Parquet through pyarrow, each fed a page of the API at a time."""

from __future__ import annotations

import contextlib
import csv
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from ..client import Client
from .format import NONFINITE, key_name, number, when
from .options import job_path

FORMATS = ("csv", "jsonl", "parquet")
FIELDS = ("metric", "variant", "iter", "ts", "value")
PAGE = 100_000
ARROW = "application/vnd.apache.arrow.stream"


class PointWriter:
    """Writes the pages of points of one command to ``out``; ``arrow`` when it wants pages as Arrow tables."""

    arrow = False

    def __init__(self, out: IO) -> None:
        self.out = out

    @staticmethod
    def of(kind: str, out: IO) -> PointWriter:
        writers = {"table": TableWriter, "csv": CsvWriter, "jsonl": JsonLinesWriter, "parquet": ParquetWriter}
        return writers[kind](out)

    def page(self, metric: str, page: Any) -> int:
        """Write one page of ``metric``'s points (a JSON page, or an Arrow table where ``arrow``); answers its size."""
        raise NotImplementedError

    def close(self) -> None:
        self.out.flush()


def _rows(metric: str, page: dict[str, Any]) -> Iterator[tuple[str, str, int, int, Any]]:
    return (
        (metric, v, i, t, x)
        for v, i, t, x in zip(page["variant"], page["iter"], page["ts"], page["value"], strict=True)
    )


class TableWriter(PointWriter):
    def __init__(self, out: IO) -> None:
        super().__init__(out)
        self.out.write(f"{'KEY':<24}  {'STEP':>10}  {'VALUE':>14}  TIME\n")

    def page(self, metric: str, page: Any) -> int:
        lines = [
            f"{key_name(m, v):<24}  {i:>10}  {number(x):>14}  {when(t, millis=True)}\n"
            for m, v, i, t, x in _rows(metric, page)
        ]
        self.out.write("".join(lines))
        return len(lines)


class CsvWriter(PointWriter):
    def __init__(self, out: IO) -> None:
        super().__init__(out)
        self.writer = csv.writer(out, lineterminator="\n")
        self.writer.writerow(FIELDS)

    def page(self, metric: str, page: Any) -> int:
        rows = [(m, v, i, t, _csv_value(x)) for m, v, i, t, x in _rows(metric, page)]
        self.writer.writerows(rows)
        return len(rows)


def _csv_value(value: Any) -> str:
    number_ = NONFINITE[value] if isinstance(value, str) else float(value)
    return repr(number_) if math.isfinite(number_) else str(number_)


class JsonLinesWriter(PointWriter):
    def page(self, metric: str, page: Any) -> int:
        rows = [dict(zip(FIELDS, row, strict=True)) for row in _rows(metric, page)]
        self.out.write("".join(orjson.dumps(row).decode() + "\n" for row in rows))
        return len(rows)


class ParquetWriter(PointWriter):
    arrow = True

    def __init__(self, out: IO) -> None:
        super().__init__(out)
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise ValueError(
                "--format parquet needs pyarrow, which this installation lacks: pip install pyarrow "
                "(or choose --format csv or jsonl)"
            ) from None
        self.pa = pa
        self.schema = pa.schema(
            [
                ("metric", pa.string()),
                ("variant", pa.string()),
                ("iter", pa.int64()),
                ("ts", pa.timestamp("ms", tz="UTC")),
                ("value", pa.float64()),
            ]
        )
        self.writer = pq.ParquetWriter(out, self.schema)

    def page(self, metric: str, page: Any) -> int:
        pa = self.pa
        n = page.num_rows
        columns = {
            "metric": pa.array([metric] * n, pa.string()),
            "variant": page.column("variant").cast(pa.string()),
            "iter": page.column("iter").cast(pa.int64()),
            "ts": page.column("ts").cast(pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
            "value": page.column("value").cast(pa.float64()),
        }
        self.writer.write_table(pa.table(columns, schema=self.schema))
        return n

    def close(self) -> None:
        self.writer.close()
        super().close()


def write_points(client: Client, job: str, series: list[tuple[str, str | None]], writer: PointWriter) -> int:
    """Write every point of ``series`` ((metric, variant or None for all)), a page at a time; answers how many."""
    path = f"{job_path(job)}/scalars/points"
    count = 0
    for metric, variant in series:
        cursor = None
        while True:
            params = {"metric": metric, "variant": variant, "limit": PAGE, "cursor": cursor}
            if writer.arrow:
                page, cursor = _arrow_page(client, path, params)
            else:
                page = client.get(path, **params)
                cursor = page.get("next_cursor")
            count += writer.page(metric, page)
            if not cursor:
                break
    writer.close()
    return count


def _arrow_page(client: Client, path: str, params: dict[str, Any]) -> tuple[Any, str | None]:
    import pyarrow as pa

    table = pa.ipc.open_stream(client.send("GET", path, params=params, accept=ARROW)).read_all()
    meta = table.schema.metadata or {}
    return table, meta.get(b"next_cursor", b"").decode() or None


@contextlib.contextmanager
def open_output(name: str | None, *, binary: bool) -> Iterator[IO]:
    """Standard output, or the file ``name``, written beside it first and put in place only once complete."""
    if name is None or name == "-":
        if binary and sys.stdout.isatty():
            raise ValueError("Parquet is binary: give --output FILE, or send standard output to a file or a pipe")
        yield sys.stdout.buffer if binary else sys.stdout
        return
    final = Path(name)
    part = final.with_name(final.name + ".part")
    try:
        with open(
            part, "wb" if binary else "w", newline="" if not binary else None, encoding=None if binary else "utf-8"
        ) as out:
            yield out
        os.replace(part, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            part.unlink()
