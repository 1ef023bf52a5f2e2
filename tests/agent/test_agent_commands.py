import argparse
import subprocess
import sys

import orjson
import pytest

from jobpulse.agent.base import Sample
from jobpulse.agent.commands import cmd_run, command_node_rank, parse_duration, register
from jobpulse.agent.outlet import system_body


def _parser():
    parser = argparse.ArgumentParser(prog="jobpulse")
    register(parser.add_subparsers(dest="command"))
    return parser


def test_durations():
    assert parse_duration("10s") == 10.0
    assert parse_duration("500ms") == 0.5
    assert parse_duration("1m") == 60.0
    assert parse_duration("2") == 2.0
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration("fast")


def test_agent_options():
    args = _parser().parse_args(
        ["agent", "--job", "J", "--worker", "W", "--interval", "1s", "--paths", "ephemeral=/tmp,cache=/c:1G"]
    )
    assert (args.job, args.worker, args.interval) == ("J", "W", 1.0)
    assert [p.name for p in args.paths] == ["ephemeral", "cache"] and args.paths[1].limit == 1 << 30
    assert args.func.__name__ == "cmd_agent"


def test_run_keeps_the_command_options_apart():
    args = _parser().parse_args(["run", "--job", "J", "--", "python", "train.py", "--job", "other"])
    assert args.job == "J"
    assert args.command == ["--", "python", "train.py", "--job", "other"]
    assert args.func.__name__ == "cmd_run"


@pytest.mark.parametrize(
    ("command", "rank"),
    [
        (["torchrun", "--nnodes=2", "--node_rank=1", "train.py"], 1),
        (["torchrun", "--node-rank", "3", "train.py"], 3),
        (["accelerate", "launch", "--machine_rank", "2", "train.py"], 2),
        (["torchrun", "--nproc_per_node=2", "train.py"], None),
        (["torchrun", "--node_rank"], None),
    ],
)
def test_the_node_rank_a_launchers_command_line_gives(command, rank):
    assert command_node_rank(command) == rank


def test_run_refuses_a_bad_node_worker_name(capsys):
    args = _parser().parse_args(["run", "--worker", "a b", "--", "true"])
    assert cmd_run(args) == 2 and "--worker" in capsys.readouterr().err


def test_agent_requires_job_and_worker(capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["agent", "--job", "J"])


def test_system_body_is_columnar_ingest():
    samples = [Sample("gpu_util", "3", 97.5), Sample("mem_bytes", "", 1.0)]
    body = system_body("p", "j", "w", 1700000000000, samples)
    assert body == {
        "project": "p",
        "job": "j",
        "worker": "w",
        "series": [
            {"kind": "system", "metric": "gpu_util", "device": "3", "ts": [1700000000000], "value": [97.5]},
            {"kind": "system", "metric": "mem_bytes", "device": "", "ts": [1700000000000], "value": [1.0]},
        ],
    }


def test_agent_prints_samples_without_a_server():
    argv = [
        sys.executable,
        "-m",
        "jobpulse",
        "agent",
        "--job",
        "J",
        "--worker",
        "W",
        "--print",
        "--count",
        "2",
    ]
    done = subprocess.run([*argv, "--interval", "100ms", "--no-gpu", "--no-npu"], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = [orjson.loads(line) for line in done.stdout.splitlines()]
    metrics = {r["metric"] for r in rows}
    assert {"mem_bytes", "cpu_cores", "agent_rss_bytes"} <= metrics
    assert len({r["ts"] for r in rows}) == 2


def test_run_without_a_command_is_an_error(capsys):
    args = _parser().parse_args(["run", "--job", "J"])
    assert args.func(args) == 2
    assert "no command" in capsys.readouterr().err


def test_the_agents_outlet_does_not_load_pyarrow(tmp_path):
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from jobpulse.agent.outlet import Outlet\n"
        f"outlet = Outlet('http://127.0.0.1:9', 'k', 'p', 'j', 'w', spool_root=Path({str(tmp_path)!r}))\n"
        "outlet.system(0, [])\n"
        "time.sleep(0.3)\n"
        "outlet.close(0.1)\n"
        "print('pyarrow' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"  # installed here (the server's dependency), not needed by the agent
