"""``jobpulse run`` gives each line of the command's output the level its text states, else its stream's."""

from __future__ import annotations

import sys

from jobpulse.agent.wrap import run_wrapped


class Lines:
    """The part of an outlet that takes log lines; the rest does nothing."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def line(self, ts_ms: int, seq: int, level: str, msg: str) -> None:
        self.lines.append((level, msg))

    def system(self, ts_ms: int, samples: list) -> None:
        pass

    def register_job(self, name: str | None = None, tags: list[str] | None = None) -> None:
        pass

    def worker_status(
        self, status: str, exit_code: int | None = None, host: str | None = None, fields: dict | None = None
    ) -> None:
        pass

    def close(self, timeout: float = 10.0) -> None:
        pass


SCRIPT = """
import logging, sys
logging.basicConfig()  # logging's default format, on stderr
print("step 1 loss=0.5")
logging.warning("shared memory is low")
logging.getLogger("data").error("shard 3 is corrupt")
print("something odd", file=sys.stderr)
print("ERROR: said on stdout", flush=True)
raise RuntimeError("diverged")
"""


def test_levels_of_a_commands_output_follow_the_shared_rule():
    outlet = Lines()
    result = run_wrapped([sys.executable, "-c", SCRIPT], outlet, sample=False, echo=False)
    assert result.status == "failed"
    level = dict((msg, lvl) for lvl, msg in outlet.lines)
    assert level["step 1 loss=0.5"] == "info"
    assert level["WARNING:root:shared memory is low"] == "warning"
    assert level["ERROR:data:shard 3 is corrupt"] == "error"
    assert level["something odd"] == "warning"  # stderr stating no level
    assert level["ERROR: said on stdout"] == "error"
    traceback = [(lvl, msg) for lvl, msg in outlet.lines if msg.startswith(("Traceback", "  ", "RuntimeError"))]
    assert traceback[0] == ("error", "Traceback (most recent call last):")
    assert traceback[-1] == ("error", "RuntimeError: diverged")
    assert {lvl for lvl, _ in traceback} == {"error"}


def test_a_command_that_cannot_start_says_so_as_an_error():
    outlet = Lines()
    run_wrapped(["/nonexistent/command"], outlet, sample=False, echo=False)
    assert outlet.lines == [("error", "jobpulse run: cannot start '/nonexistent/command': No such file or directory")]
