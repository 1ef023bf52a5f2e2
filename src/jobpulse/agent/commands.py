"""The ``jobpulse agent`` and ``jobpulse run`` subcommands."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import signal
import sys
import threading
from typing import Any

import orjson

from jobpulse.agent.base import Sample
from jobpulse.agent.hardware import reporting_hardware
from jobpulse.agent.sampler import Sampler, build_collectors
from jobpulse.agent.storage import PathSpec, parse_paths

NODE_RANK_OPTIONS = ("--node_rank", "--node-rank", "--machine_rank", "--machine-rank")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")


def parse_duration(text: str) -> float:
    """Seconds in ``10s``, ``500ms``, ``1m``, ``2`` (seconds)."""
    m = _DURATION.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 10s, 500ms, 1m)")
    value = float(m.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[m.group(2) or "s"]
    if value <= 0:
        raise argparse.ArgumentTypeError("the interval must be positive")
    return value


def _paths(text: str) -> list[PathSpec]:
    try:
        return parse_paths(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _common(p: argparse.ArgumentParser, default_interval: str) -> None:
    p.add_argument("--project", help="project of the job (default: JOBPULSE_PROJECT, else 'default')")
    p.add_argument(
        "--interval",
        type=parse_duration,
        default=parse_duration(default_interval),
        help=f"sampling interval, e.g. 1s, 500ms (default: {default_interval})",
    )
    p.add_argument(
        "--paths",
        type=_paths,
        default=[],
        help="paths to measure as NAME=PATH[:LIMIT], comma-separated, e.g. ephemeral=/tmp,cache=/cache:50G "
        "(reported as NAME_bytes and NAME_util; with a LIMIT the directory's size is summed)",
    )
    p.add_argument(
        "--gpus",
        help="the job's GPUs, named as in CUDA_VISIBLE_DEVICES (default: CUDA_VISIBLE_DEVICES, else all)",
    )
    p.add_argument("--no-gpu", action="store_true", help="do not sample NVIDIA GPUs")
    p.add_argument("--no-npu", action="store_true", help="do not sample Ascend NPUs")
    p.add_argument("--url", help="server URL (default: JOBPULSE_URL, then the credentials file)")
    p.add_argument("--api-key", help="API key (default: JOBPULSE_API_KEY, then the credentials file)")


def register(subparsers: Any) -> None:
    """Add the ``agent`` and ``run`` subcommands to an argparse subparsers object."""
    agent = subparsers.add_parser(
        "agent",
        help="sample one worker's system metrics and send them",
        description="Sample the system metrics of one worker (a container, a process tree or the host) "
        "and send them to the server as system events of the job.",
    )
    agent.add_argument("--job", required=True, help="job id")
    agent.add_argument("--worker", required=True, help="worker name, e.g. worker-0")
    _common(agent, "10s")
    agent.add_argument(
        "--scope",
        choices=("auto", "cgroup", "process", "host"),
        default="auto",
        help="whose CPU, memory and disk I/O: the container's cgroup, the process tree of --pid, or the "
        "host (default auto: process with --pid, else cgroup in a container or under limits, else host)",
    )
    agent.add_argument("--pid", type=int, help="sample this process and its descendants (scope process)")
    agent.add_argument("--cgroup", help="sample this cgroup path (as in /proc/PID/cgroup) instead of the agent's own")
    agent.add_argument("--count", type=int, help="stop after this many samples")
    agent.add_argument("--print", action="store_true", help="print samples as JSON lines instead of sending them")
    agent.add_argument("--flush-timeout", type=float, default=10.0, help="seconds to wait for delivery at exit")
    agent.set_defaults(func=cmd_agent)

    run = subparsers.add_parser(
        "run",
        help="run a command as the node worker of a job: capture its output, sample it, record its exit",
        description="Run COMMAND as the node worker of a job: its output is echoed and sent as the node's log "
        "(less what the ranks it launches capture as their own logs), the node is sampled, and the node worker is "
        "marked completed or failed with the command's exit code. Each rank with the SDK is a worker of its own "
        "under the node. Exits with the command's exit code.",
        usage="jobpulse run [options] -- COMMAND [ARG ...]",
    )
    run.add_argument("--job", help="job id (default: JOBPULSE_JOB, a torchrun or SLURM run id, else a new one)")
    run.add_argument(
        "--worker",
        help="name of the node worker (default: JOBPULSE_NODE, else node-N with N the node rank from GROUP_RANK, "
        "NODE_RANK, PET_NODE_RANK, OMPI_COMM_WORLD_NODE_RANK, SLURM_NODEID or the command's --node_rank, "
        "else node-HOSTNAME)",
    )
    run.add_argument("--name", help="display name of the job when it is created")
    _common(run, "10s")
    run.add_argument("--no-sample", action="store_true", help="do not sample resources")
    run.add_argument("--flush-timeout", type=float, default=10.0, help="seconds to wait for delivery at exit")
    run.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments")
    run.set_defaults(func=cmd_run)


def _outlet(args: argparse.Namespace, project: str, job: str, worker: str) -> Any:
    from jobpulse.agent.outlet import Outlet
    from jobpulse.credentials import load_credentials

    creds = load_credentials(args.url, args.api_key)
    return Outlet(creds.url, creds.api_key, project, job, worker)


def _print_samples(ts_ms: int, samples: list[Sample]) -> None:
    out = sys.stdout.buffer
    for s in samples:
        out.write(orjson.dumps({"ts": ts_ms, "metric": s.metric, "device": s.device, "value": s.value}) + b"\n")
    out.flush()


def cmd_agent(args: argparse.Namespace) -> int:
    from jobpulse.sdk.env import default_project

    logging.basicConfig(level=logging.WARNING, format="jobpulse agent: %(message)s")
    project = args.project or default_project()
    collectors = build_collectors(
        scope=args.scope,
        pid=args.pid,
        cgroup_path=args.cgroup,
        paths=args.paths,
        gpus=args.gpus,
        use_nvml=not args.no_gpu,
        use_npu=False if args.no_npu else None,
    )
    outlet = None if args.print else _outlet(args, project, args.job, args.worker)
    if outlet is None:
        emit = _print_samples
    else:  # the job is registered with the worker's hardware once its first samples show it
        emit = reporting_hardware(outlet.system, lambda found: outlet.register_job(instance_type=found), collectors)
    sampler = Sampler(collectors, emit, args.interval)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, on_signal)
    try:
        sampler.run(stop, max_ticks=args.count)
    finally:
        sampler.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if outlet is not None:
            delivery = outlet.close(args.flush_timeout)
            _report_leftovers(delivery, args.job, outlet.sender.url, args.flush_timeout, "agent")
    return 0


def command_node_rank(command: list[str]) -> int | None:
    """The node rank a launcher's command line gives (torchrun's and DeepSpeed's ``--node_rank``, Accelerate's
    ``--machine_rank``), if any."""
    for i, arg in enumerate(command):
        name, eq, value = arg.partition("=")
        if name not in NODE_RANK_OPTIONS:
            continue
        value = value if eq else (command[i + 1] if i + 1 < len(command) else "")
        if value.isdigit():
            return int(value)
    return None


def cmd_run(args: argparse.Namespace) -> int:
    from jobpulse.agent.wrap import run_wrapped
    from jobpulse.sdk.checks import check_worker
    from jobpulse.sdk.env import default_job, default_project, node_name

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("jobpulse run: no command given (jobpulse run [options] -- COMMAND ...)", file=sys.stderr)
        return 2
    project = args.project or default_project()
    job = args.job or default_job()[0]
    try:
        node = check_worker(args.worker, "--worker") if args.worker else node_name(None, command_node_rank(command))
    except ValueError as exc:
        print(f"jobpulse run: {exc}", file=sys.stderr)
        return 2
    env = dict(os.environ)
    # The ranks the command launches name themselves from their rank, under this node (jobpulse.sdk.env).
    env.update(JOBPULSE_PROJECT=project, JOBPULSE_JOB=job, JOBPULSE_NODE=node)
    if args.url:
        env["JOBPULSE_URL"] = args.url
    if args.api_key:
        env["JOBPULSE_API_KEY"] = args.api_key
    outlet = _outlet(args, project, job, node)
    print(f"jobpulse run: job {job}, node {node}", file=sys.stderr, flush=True)

    def collectors(pid: int) -> list:
        return build_collectors(
            scope="process",
            pid=pid,
            paths=args.paths,
            gpus=args.gpus,
            env=env,
            use_nvml=not args.no_gpu,
            use_npu=False if args.no_npu else None,
        )

    result = run_wrapped(
        command,
        outlet,
        interval=args.interval,
        env=env,
        sample=not args.no_sample,
        collectors_factory=collectors,
        job_name=args.name,
        flush_timeout=args.flush_timeout,
        worker_fields={"kind": "node"},
    )
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    _report_leftovers(result.delivery, job, outlet.sender.url, args.flush_timeout, "run")
    return result.exit_code


def _report_leftovers(delivery: Any, job: str, url: str, wait: float, command: str) -> None:
    from jobpulse.sdk.sync import leftover_message

    message = leftover_message(delivery, job, url, wait) if delivery is not None else None
    if message:
        print(f"jobpulse {command}: {message}", file=sys.stderr, flush=True)
