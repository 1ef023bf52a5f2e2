"""``jobpulse jobs`` and ``jobpulse show``: the jobs a key sees, and one job in full."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

from ..client import Client
from .format import duration, job_times, json_text, key_name, number, table, when
from .insights import findings_table
from .options import connect, job_path, read_options

STATUSES = ("created", "running", "completed", "failed", "stopped")
PAGE = 1000  # the most jobs the API answers at once
LATEST_COLUMNS = 3  # latest values shown by default in the jobs table


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``jobs`` and ``show`` commands."""
    p = sub.add_parser(
        "jobs",
        help="list jobs, newest first",
        description="List the jobs the API key sees, newest first, with their latest values: by default the "
        f"{LATEST_COLUMNS} metrics most of the listed jobs have (--metric picks them).",
    )
    p.add_argument("--project", "-p", help="only jobs of this project")
    p.add_argument(
        "--status", "-s", choices=STATUSES, metavar="STATUS", help=f"only jobs in this status: {', '.join(STATUSES)}"
    )
    p.add_argument("--tag", "-t", help="only jobs with this tag")
    p.add_argument("--name", "-n", help="only jobs whose id or name contains this text")
    p.add_argument("--limit", "-l", type=_positive, default=50, help="at most this many jobs (default: 50)")
    p.add_argument(
        "--metric", "-m", action="append", metavar="KEY", help="show the latest value of this metric (repeat)"
    )
    read_options(p)
    p.set_defaults(func=cmd_jobs)

    show = sub.add_parser(
        "show",
        help="show one job: status, times, hardware, workers, latest values",
        description="Show one job: its status and times, instance type, tags, error, workers and the latest "
        "value of each metric.",
    )
    show.add_argument("job", metavar="JOB", help="the job's id")
    read_options(show)
    show.set_defaults(func=cmd_show)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def list_jobs(client: Client, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The jobs the filters select, newest first, paging through the API until ``args.limit``."""
    found: list[dict[str, Any]] = []
    cursor = None
    while len(found) < args.limit:
        page = client.get(
            "/jp/v1/jobs",
            project=args.project,
            status=args.status,
            tag=args.tag,
            q=args.name,
            limit=min(PAGE, args.limit - len(found)),
            cursor=cursor,
        )
        found.extend(page["jobs"])
        cursor = page.get("next_cursor")
        if not cursor:
            break
    return found


def latest_values(client: Client, jobs: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The latest value of every metric of ``jobs``, each row with its ``key`` (how people name it)."""
    if not jobs:
        return {}
    answer = client.request("POST", "/jp/v1/scalars/latest", json={"jobs": jobs})["jobs"]
    for rows in answer.values():
        for row in rows:
            row["key"] = key_name(row["metric"], row["variant"])
    return answer


def _columns(latest: dict[str, list[dict[str, Any]]], asked: list[str] | None) -> list[str]:
    if asked:
        return asked
    counts = Counter(row["key"] for rows in latest.values() for row in rows)
    return [key for key, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:LATEST_COLUMNS]]


def cmd_jobs(args: argparse.Namespace) -> int:
    client = connect(args)
    jobs = list_jobs(client, args)
    latest = latest_values(client, [j["job"] for j in jobs])
    if args.json:
        print(json_text({"jobs": [dict(j, latest=latest.get(j["job"], [])) for j in jobs]}))
        return 0
    if not jobs:
        print("no jobs" + (" match" if any((args.project, args.status, args.tag, args.name)) else ""))
        return 0
    keys = _columns(latest, args.metric)
    now = int(time.time() * 1000)
    rows = []
    for job in jobs:
        started, _, lasted = job_times(job, now_ms=now)
        values = {row["key"]: row["value"] for row in latest.get(job["job"], [])}
        rows.append(
            [
                job["job"],
                job["project"],
                job["status"],
                when(started, seconds=False),
                duration(lasted),
                str(job.get("workers", "")),
                *[number(values.get(key)) for key in keys],
                job.get("name") if job.get("name") not in (None, "", job["job"]) else "",
            ]
        )
    header = ["JOB", "PROJECT", "STATUS", "STARTED", "DURATION", "WORKERS", *[k.upper() for k in keys], "NAME"]
    print(table(rows, header))
    return 0


def _instance(it: dict[str, Any]) -> str:
    """An instance type for people: its name, then what a worker has (accelerators, CPU, memory)."""
    parts = []
    if it.get("gpu_count"):
        memory = f" {number(it['gpu_memory_limit_mib'] / 1024)} GiB" if it.get("gpu_memory_limit_mib") else ""
        parts.append(f"{it['gpu_count']} x {it.get('gpu_type') or 'GPU'}{memory}")
    if it.get("millicpu_limit"):
        parts.append(f"{number(it['millicpu_limit'] / 1000)} CPU cores")
    if it.get("memory_limit_mib"):
        parts.append(f"{number(it['memory_limit_mib'] / 1024)} GiB memory")
    name = str(it.get("name") or it.get("id") or "")
    detail = ", ".join(parts) + " per worker" if parts else ""
    if name and detail:
        return f"{name} ({detail})"
    return name or detail or "-"


def cmd_show(args: argparse.Namespace) -> int:
    client = connect(args)
    found = client.get(job_path(args.job))
    job, workers = found["job"], found["workers"]
    latest = latest_values(client, [job["job"]]).get(job["job"], [])
    findings = client.get(job_path(args.job) + "/insights", status="open")["findings"]
    if args.json:
        print(json_text({"job": job, "workers": workers, "latest": latest, "findings": findings}))
        return 0
    started, ended, lasted = job_times(job, workers)
    facts = [
        ("Job", job["job"] + (f"  ({job['name']})" if job.get("name") not in (None, "", job["job"]) else "")),
        ("Project", job["project"]),
        ("Status", job["status"]),
        ("Started", when(started)),
        ("Ended", when(ended)),
        ("Duration", duration(lasted)),
        ("Instance", _instance(job.get("instance_type") or {})),
        ("Tags", ", ".join(job.get("tags") or []) or "-"),
    ]
    if job.get("error_message"):
        facts.append(("Error", job["error_message"]))
    width = max(len(k) for k, _ in facts) + 1
    print("\n".join(f"{k + ':':<{width}} {v}" for k, v in facts))
    if workers:
        rows = [
            [w["worker"], w["status"], w.get("host") or "-", _code(w), when(w.get("started")), when(w.get("ended"))]
            for w in workers
        ]
        print(f"\nWorkers ({len(workers)}):")
        print(_indent(table(rows, ["WORKER", "STATUS", "HOST", "EXIT", "STARTED", "ENDED"])))
    if latest:
        rows = [[r["key"], number(r["value"]), str(r["iter"]), number(r["min"]), number(r["max"])] for r in latest]
        print(f"\nLatest values ({len(latest)}):")
        print(_indent(table(rows, ["KEY", "VALUE", "STEP", "MIN", "MAX"])))
    if findings:
        print(f"\nOpen findings ({len(findings)}):")
        print(_indent(findings_table(findings)))
    return 0


def _code(worker: dict[str, Any]) -> str:
    return "-" if worker.get("exit_code") is None else str(worker["exit_code"])


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
