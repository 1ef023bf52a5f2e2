"""``jobpulse insights``: the findings of a job or a project (idle GPUs, stragglers, hangs...) and GPU waste."""

from __future__ import annotations

import argparse
import urllib.parse
from typing import Any

from ..client import Client
from .format import duration, json_text, number, table, when
from .options import connect, read_options

STATUSES = ("open", "resolved", "all")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``insights`` command."""
    p = sub.add_parser(
        "insights",
        help="findings of a job or project: idle or underused GPUs, stragglers, hangs, divergence, hardware",
        description="Show what the detectors found on a job (or, with --project, on every job of a project): "
        "kind, severity, worker and device, when it started and ended, and the numbers that triggered it. "
        "Definitions and thresholds: docs/insights.md.",
    )
    p.add_argument("job", metavar="JOB", nargs="?", help="the job's id")
    p.add_argument("--project", "-p", help="the findings of every job of this project instead")
    p.add_argument("--status", "-s", choices=STATUSES, default="all", help="open, resolved or all (default)")
    p.add_argument("--evaluate", action="store_true", help="evaluate the job now first (needs a write key)")
    p.add_argument("--waste", action="store_true", help="also the GPU-hours idle and underused")
    read_options(p)
    p.set_defaults(func=cmd_insights)


def _path(job: str) -> str:
    return f"/jp/v1/jobs/{urllib.parse.quote(job, safe='')}/insights"


def findings_table(findings: list[dict[str, Any]]) -> str:
    """The findings as a text table, oldest first."""
    rows = []
    for f in findings:
        where = " ".join(p for p in (f["worker"], f"gpu {f['device']}" if f["device"] else "") if p) or "job"
        lasted = duration(f["ended"] - f["started"]) if f["ended"] is not None else "ongoing"
        rows.append(
            [
                f["severity"],
                f["kind"] + (f"/{f['signal']}" if f["signal"] else ""),
                where,
                when(f["started"]),
                lasted,
                f["status"],
                evidence_text(f["evidence"]),
            ]
        )
    return table(rows, ["SEVERITY", "FINDING", "WHERE", "STARTED", "LASTED", "STATUS", "EVIDENCE"])


def evidence_text(evidence: dict[str, Any]) -> str:
    parts = []
    for name, value in evidence.items():
        if isinstance(value, list):
            value = ",".join(v["worker"] if isinstance(v, dict) else str(v) for v in value) or "-"
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            value = number(value)
        parts.append(f"{name}={value}")
    return " ".join(parts)


def cmd_insights(args: argparse.Namespace) -> int:
    if bool(args.job) == bool(args.project):
        raise ValueError("name a JOB or a --project (one of them)")
    client = connect(args)
    if args.project:
        found = client.get(f"/jp/v1/projects/{urllib.parse.quote(args.project)}/insights", status=args.status)
        waste = _project_waste(client, args.project) if args.waste else None
    else:
        if args.evaluate:
            client.request("POST", _path(args.job) + "/evaluate")
        found = client.get(_path(args.job), status=args.status)
        waste = client.get(_path(args.job) + "/waste") if args.waste else None
    findings = found["findings"]
    if args.json:
        print(json_text({"findings": findings, **({"waste": waste} if waste is not None else {})}))
        return 0
    print(findings_table(findings) if findings else "No findings.")
    if waste is not None:
        print(
            f"\nGPU-hours: {number(waste['gpu_hours'])} in all, {number(waste['idle_gpu_hours'])} idle, "
            f"{number(waste['underused_gpu_hours'])} underused, {number(waste['unused_gpu_hours'])} unused"
        )
    return 0


def _project_waste(client: Client, project: str) -> dict[str, Any]:
    return client.get(f"/jp/v1/projects/{urllib.parse.quote(project)}/insights/waste")
