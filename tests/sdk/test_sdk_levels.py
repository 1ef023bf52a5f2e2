"""The level of a console line: what its text states, else its stream's (jobpulse.sdk.levels), in the SDK's capture."""

from __future__ import annotations

import logging
import sys

import pytest

from jobpulse.sdk.console import Console
from jobpulse.sdk.levels import STDERR, STDOUT, LineLevels, stated_level


@pytest.mark.parametrize(
    ("line", "level"),
    [
        ("WARNING:root:low shared memory", "warning"),  # logging's default format
        ("ERROR:train.loop:loss is NaN", "error"),
        ("INFO:datasets:loading shard 3", "info"),
        ("CRITICAL:root:giving up", "critical"),
        ("DEBUG:urllib3.connectionpool:GET /", "debug"),
        ("ERROR: could not open checkpoint", "error"),
        ("[WARNING] disk almost full", "warning"),
        ("<ERROR> bad batch", "error"),
        ("WARN retrying", "warning"),
        ("FATAL: out of memory", "critical"),
        ("2024-05-01 12:00:00,123 - train - WARNING - lr is high", "warning"),
        ("2024-05-01 12:00:00.123 | ERROR    | __main__:<module>:5 - boom", "error"),
        ("[2024-05-01 12:00:00] [INFO] started", "info"),
        ("2024-05-01T12:00:00Z myapp WARNING slow step", "warning"),
        ("INFO 05-01 12:00:00 llm_engine.py:72] initializing", "info"),
        ("[rank0]: WARNING collective timed out", "warning"),
        ("Warning: option --foo is deprecated", "warning"),
        ("Error: no such file", "error"),
        ("Fatal error: cannot continue", "critical"),
        ("[W 240501 12:00:00 web:12] slow handler", "warning"),  # tornado
        ("E0501 12:00:00.123456  1234 ops.cc:12] kernel failed", "error"),  # glog / absl
        ("node01:1234:1234 [0] NCCL WARN Call to connect returned Connection refused", "warning"),
        ("node01:1234:1234 [0] NCCL INFO Bootstrap : Using eth0", "info"),
        ("/srv/train.py:12: UserWarning: this overload is deprecated", "warning"),  # warnings
        ("Traceback (most recent call last):", "error"),
    ],
)
def test_a_stated_level_is_recognised(line, level):
    assert stated_level(line) == level


@pytest.mark.parametrize(
    "line",
    [
        "epoch 3 step 200 loss=0.41",
        "the ERROR rate of the model is 3%",  # a level word inside a sentence is no level
        "loss WARNING",
        "error: lower case is left alone",
        "Epoch 1: 100%|██████████| 1000/1000 [03:58<00:00, 4.19it/s]",
        "",
    ],
)
def test_a_line_without_a_stated_level_has_none(line):
    assert stated_level(line) is None


def test_stdout_without_a_stated_level_is_info():
    levels = LineLevels(STDOUT)
    assert [levels(x) for x in ["plain", "WARNING:root:careful", "next"]] == ["info", "warning", "info"]


def test_stderr_without_a_stated_level_is_a_warning_but_a_progress_bar_is_info():
    levels = LineLevels(STDERR)
    assert levels("something odd happened") == "warning"
    assert levels(" 45%|####5     | 450/1000 [00:10<00:12, 44.1it/s]") == "info"
    assert levels("INFO:root:fine") == "info"


def test_a_traceback_is_an_error_to_its_last_line_through_chained_exceptions():
    levels = LineLevels(STDOUT)
    text = """Traceback (most recent call last):
  File "train.py", line 3, in <module>
    load()
KeyError: 'lr'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "train.py", line 5, in <module>
RuntimeError: no config
after the traceback"""
    got = [levels(line) for line in text.splitlines()]
    assert got == ["error"] * 10 + ["info"]


def test_an_indented_line_keeps_the_level_of_a_warning_before_it():
    levels = LineLevels(STDOUT)
    assert levels("/srv/train.py:12: UserWarning: deprecated") == "warning"
    assert levels("  warnings.warn('deprecated')") == "warning"
    assert levels("  an indented line after normal output") == "warning"
    assert levels("plain again") == "info"
    assert levels("  indented after info") == "info"


def test_a_stream_is_stdout_or_stderr():
    with pytest.raises(ValueError, match="stream must be"):
        LineLevels("stdlog")


def test_the_console_capture_gives_stderr_and_logging_text_their_levels(capsys):
    got: list[tuple[str, str]] = []
    console = Console(lambda level, msg: got.append((level, msg)))
    console.start()
    try:
        print("plain output")
        sys.stderr.write("WARNING:root:printed as logging prints it\n")
        sys.stderr.write("a diagnostic\n")
        print("ERROR: stated on stdout")
        logging.getLogger("jobpulse-test-levels").warning("a record")
    finally:
        console.stop()
    capsys.readouterr()
    assert ("info", "plain output") in got
    assert ("warning", "WARNING:root:printed as logging prints it") in got
    assert ("warning", "a diagnostic") in got
    assert ("error", "ERROR: stated on stdout") in got
    assert ("warning", "jobpulse-test-levels: a record") in got
