"""``jobpulse metrics`` and ``jobpulse export``: a job's metrics, one series, or every point to a file.

Points travel a page at a time through the API's cursors and are written as they come, so any size of job
is read in constant memory. Every form of points has the same fields: ``metric``, ``variant``, ``iter``,
``ts`` (epoch milliseconds) and ``value`` (NaN and infinities kept: ``nan``/``inf`` in CSV, ``"NaN"``/
``"Infinity"`` in JSON as the API writes them, floats in Parquet).

A series is named by its key (docs/names.md): the key as the SDK logged it (``train/loss``, stored as metric and
variant both), else ``metric/variant`` (a ClearML title and series, ``loss/train``, or a key the SDK split before
it kept keys whole). KEY arguments also take the web UI's name of a series (``loss · train``), a metric's name
for all its series, and a section: the prefix before a key's first ``/`` (``train``) for every metric under it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..client import Client
from .export import FORMATS, PointWriter, open_output, write_points
from .format import json_text, key_name, number, table, when
from .jobs import latest_values
from .options import client_options, connect, job_path, read_options


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``metrics`` and ``export`` commands."""
    p = sub.add_parser(
        "metrics",
        help="list a job's metrics with their latest values, or print one series",
        description="Without KEY, list the job's metrics with their latest value, step, min, max and point count. "
        "With KEY (as listed: the key as logged, e.g. train/loss, or metric/variant; a metric's name for all its "
        "series; or a section, e.g. train, for every metric under that prefix), print those series at full "
        "resolution.",
    )
    p.add_argument("job", metavar="JOB", help="the job's id")
    p.add_argument("key", nargs="?", metavar="KEY", help="the series to print, as the list names it")
    p.add_argument("--csv", action="store_true", help="print CSV (with a header line) instead of a table")
    read_options(p)
    p.set_defaults(func=cmd_metrics)

    export = sub.add_parser(
        "export",
        help="write every point of a job's metrics to a file (Parquet, CSV or JSON lines)",
        description="Write every point of the job's metrics (or of one, with --metric) at full resolution: columns "
        "metric, variant, iter, ts (epoch milliseconds; a UTC timestamp in Parquet) and value. Streamed a page "
        "at a time: any size of job in constant memory. Parquet needs pyarrow.",
    )
    export.add_argument("job", metavar="JOB", help="the job's id")
    export.add_argument("--format", "-F", choices=FORMATS, default="csv", help="default: csv")
    export.add_argument("--output", "-o", metavar="FILE", help="write to FILE (default: standard output)")
    export.add_argument("--metric", "-m", metavar="KEY", help="only this metric, as 'jobpulse metrics' names it")
    client_options(export)
    export.set_defaults(func=cmd_export)


UI_SEPARATOR = " · "  # the web UI's "metric · variant" (ui/static/names.js)


def series_of(client: Client, job: str, key: str | None) -> list[tuple[str, str | None]]:
    """The (metric, variant) pairs to read: every metric of the job (all its variants), or those ``key`` names,
    in this order of trial: a series as listed (``train/loss``, ``loss/train``) or as the web UI names it
    (``loss · train``); a metric's name (all its variants); a section (``train`` or ``train/``: every metric
    whose name starts with ``train/``). LookupError naming the job's keys when ``key`` names none."""
    catalogue = client.get(f"{job_path(job)}/scalars")["metrics"]
    if key is None:
        return [(m["metric"], None) for m in catalogue]
    pairs = [(m["metric"], v["variant"]) for m in catalogue for v in m["variants"]]
    exact = [(metric, variant) for metric, variant in pairs if key in _names(metric, variant)]
    if exact:
        return exact
    if any(m["metric"] == key for m in catalogue):
        return [(key, None)]
    prefix = key if key.endswith("/") else f"{key}/"
    section = [(m["metric"], None) for m in catalogue if m["metric"].startswith(prefix)]
    if section:
        return section
    names = sorted(key_name(metric, variant) for metric, variant in pairs)
    known = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
    raise LookupError(f"job {job!r} has no metric {key!r}" + (f"; it has {known}" if names else "; it has none"))


def _names(metric: str, variant: str) -> tuple[str, str]:
    """A series' names: as the CLI lists it, and as the web UI shows it."""
    listed = key_name(metric, variant)
    return listed, listed if listed == metric else f"{metric}{UI_SEPARATOR}{variant}"


def cmd_metrics(args: argparse.Namespace) -> int:
    client = connect(args)
    if args.key is None:
        return _list(client, args)
    series = series_of(client, args.job, args.key)
    kind = "jsonl" if args.json else "csv" if args.csv else "table"
    write_points(client, args.job, series, PointWriter.of(kind, sys.stdout))
    return 0


def _list(client: Client, args: argparse.Namespace) -> int:
    client.get(job_path(args.job))  # a job that does not exist is named as such
    rows: list[dict[str, Any]] = latest_values(client, [args.job]).get(args.job, [])
    if args.json:
        print(json_text({"job": args.job, "metrics": rows}))
        return 0
    if args.csv:
        import csv

        writer = csv.writer(sys.stdout, lineterminator="\n")
        fields = ["key", "metric", "variant", "value", "iter", "ts", "min", "max", "points"]
        writer.writerow(fields)
        for row in rows:
            writer.writerow([number(row[f]) if f in ("value", "min", "max") else row[f] for f in fields])
        return 0
    if not rows:
        print(f"job {args.job} has no metrics")
        return 0
    cells = [
        [
            r["key"],
            number(r["value"]),
            str(r["iter"]),
            number(r["min"]),
            number(r["max"]),
            str(r["points"]),
            when(r["ts"]),
        ]
        for r in rows
    ]
    print(table(cells, ["KEY", "VALUE", "STEP", "MIN", "MAX", "POINTS", "AT"]))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    client = connect(args)
    series = series_of(client, args.job, args.metric)
    with open_output(args.output, binary=args.format == "parquet") as out:
        points = write_points(client, args.job, series, PointWriter.of(args.format, out))
    if args.output:
        print(f"wrote {points} point(s) of job {args.job} to {args.output}", file=sys.stderr)
    return 0
