"""``jobpulse insights``: the findings of a job or a project (idle GPUs, stragglers, hangs...) and GPU waste."""

from __future__ import annotations

import argparse
import urllib.parse
from typing import Any

from ..client import Client
from ..sdk.env import default_project
from .format import duration, json_text, number, table, when
from .options import connect, job_path, read_options

STATUSES = ("open", "resolved", "all")
WEBHOOK_ACTIONS = ("list", "add", "delete", "test")
FORMATS = ("json", "slack")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``insights`` command."""
    p = sub.add_parser(
        "insights",
        help="findings of a job or project: idle or underused GPUs, stragglers, hangs, divergence, hardware",
        description="Show what the detectors found on a job (or, with --project, on every job of a project): "
        "kind, severity, worker and device, when it started and ended, and the numbers that triggered it. "
        "Definitions and thresholds: docs/insights.md. "
        "'jobpulse insights webhooks [--project P] list | add URL [--name N] [--format json|slack] | delete ID | "
        "test ID' lists, adds, deletes and test-sends the project's webhooks (an admin key of the project).",
    )
    p.add_argument("job", metavar="JOB", nargs="?", help="the job's id, or 'webhooks' for the project's webhooks")
    p.add_argument(
        "action",
        metavar="ACTION",
        nargs="?",
        choices=WEBHOOK_ACTIONS,
        help="with 'webhooks': list, add, delete or test",
    )
    p.add_argument("target", metavar="URL|ID", nargs="?", help="with 'webhooks add': the URL; delete, test: the id")
    p.add_argument(
        "--project",
        "-p",
        help="the findings of every job of this project instead; with 'webhooks': "
        "the project (default: JOBPULSE_PROJECT, else 'default')",
    )
    p.add_argument("--status", "-s", choices=STATUSES, default="all", help="open, resolved or all (default)")
    p.add_argument("--evaluate", action="store_true", help="evaluate the job now first (needs a write key)")
    p.add_argument("--waste", action="store_true", help="also the GPU-hours idle and underused")
    p.add_argument("--name", default="", help="with 'webhooks add': the webhook's name")
    p.add_argument("--format", choices=FORMATS, default="json", help="with 'webhooks add': json (default) or slack")
    read_options(p)
    p.set_defaults(func=cmd_insights)


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
    """A finding's evidence as ``name=value`` pairs: numbers rounded, workers by name, the times a cause was seen
    (``started``, ``ended``) as times, a nested record (``cause_evidence``: per cause, what showed it) in
    parentheses."""
    return " ".join(f"{name}={_evidence_value(name, value)}" for name, value in evidence.items())


def _evidence_value(name: str, value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(
            f"{k}({_evidence_value(k, v)})" if isinstance(v, dict) else f"{k}={_evidence_value(k, v)}"
            for k, v in value.items()
        )
    if isinstance(value, list):
        return ",".join(v["worker"] if isinstance(v, dict) else str(v) for v in value) or "-"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return when(int(value), seconds=False).replace(" ", "T") if name in ("started", "ended") else str(number(value))
    return "-" if value is None else str(value)


def cmd_insights(args: argparse.Namespace) -> int:
    if args.job == "webhooks":
        return cmd_webhooks(args)
    if args.action or args.target:
        raise ValueError(f"unexpected argument {args.action or args.target!r} after the job (did you mean 'webhooks'?)")
    if bool(args.job) == bool(args.project):
        raise ValueError("name a JOB or a --project (one of them)")
    client = connect(args)
    if args.project:
        found = client.get(f"/jp/v1/projects/{urllib.parse.quote(args.project)}/insights", status=args.status)
        waste = _project_waste(client, args.project) if args.waste else None
    else:
        if args.evaluate:
            client.request("POST", job_path(args.job) + "/insights/evaluate")
        found = client.get(job_path(args.job) + "/insights", status=args.status)
        waste = client.get(job_path(args.job) + "/insights/waste") if args.waste else None
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


def cmd_webhooks(args: argparse.Namespace) -> int:
    """``jobpulse insights webhooks [--project P] list|add URL|delete ID|test ID``."""
    project = args.project or default_project()
    path = f"/jp/v1/projects/{urllib.parse.quote(project, safe='')}/insights/webhooks"
    if args.action is None:
        raise ValueError(f"name what to do with the webhooks: {', '.join(WEBHOOK_ACTIONS)}")
    if (args.action == "list") != (args.target is None):
        raise ValueError("'list' takes no argument" if args.action == "list" else f"'{args.action}' needs its URL|ID")
    client = connect(args)
    if args.action == "list":
        hooks = client.get(path)["webhooks"]
        print(json_text({"webhooks": hooks}) if args.json else webhooks_table(project, hooks))
        return 0
    if args.action == "add":
        body = {"url": args.target, "format": args.format, "name": args.name}
        hook = client.request("POST", path, json=body)["webhook"]
        print(json_text(hook) if args.json else f"added webhook {hook['webhook_id']} ({hook['format']}) {hook['url']}")
        return 0
    hook_path = f"{path}/{urllib.parse.quote(args.target, safe='')}"
    if args.action == "delete":
        client.request("DELETE", hook_path)
        print(f"deleted webhook {args.target}")
        return 0
    sent = client.request("POST", hook_path + "/test")
    if args.json:
        print(json_text(sent))
    elif sent["delivered"]:
        print(f"test alert delivered to {args.target}: HTTP {sent['status']}")
    else:
        print(f"test alert not delivered to {args.target}: {sent.get('error') or 'HTTP ' + str(sent.get('status'))}")
    return 0 if sent["delivered"] else 1


def webhooks_table(project: str, hooks: list[dict[str, Any]]) -> str:
    """A project's webhooks as a text table."""
    if not hooks:
        return f"No webhooks in project {project}."
    rows = [[h["webhook_id"], h["name"] or "-", h["format"], when(h["created"]), h["url"]] for h in hooks]
    return table(rows, ["ID", "NAME", "FORMAT", "CREATED", "URL"])
