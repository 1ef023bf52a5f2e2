"""Console capture: line cutting, progress bar collapse, levels."""

from __future__ import annotations

import logging
import sys

from jobpulse.sdk.console import Console, LineSplitter, collapse, level_name


def split(chunks):
    lines = []
    splitter = LineSplitter(lines.append)
    for chunk in chunks:
        splitter.write(chunk)
    splitter.close()
    return lines


def test_plain_lines_are_cut_at_newlines_across_writes():
    assert split(["a", "b\nc", "\n", "d\n\n"]) == ["ab", "c", "d", ""]


def test_a_progress_bar_is_collapsed_to_its_final_state():
    frames = [f"\r{i:3d}%|{'#' * (i // 10):10s}|" for i in range(0, 101, 5)]
    assert split([*frames, "\n", "done\n"]) == ["100%|##########|", "done"]


def test_collapse_keeps_the_last_piece_that_is_not_blank():
    assert collapse("abc") == "abc"
    assert collapse("abc\r") == "abc"
    assert collapse("abc\r\r   \r") == "abc"
    assert collapse("\r   \r") is None
    assert collapse("text\r") == "text"  # a \r\n line ending


def test_a_cleared_bar_leaves_no_line():
    assert split(["\r 50%", "\r100%", "\r      \r", "next\n"]) == ["next"]


def test_an_open_bar_is_bounded_in_memory_and_taken_at_close():
    lines = []
    splitter = LineSplitter(lines.append)
    for i in range(100_000):
        splitter.write(f"\rstep {i}")
    assert len(splitter.pending) < 10_000
    splitter.close()
    assert lines == ["step 99999"]


def test_an_over_long_line_is_cut():
    lines = []
    splitter = LineSplitter(lines.append, max_line=10)
    splitter.write("x" * 5000)
    splitter.write("\n")
    assert all(len(line) <= 10 for line in lines) and "".join(lines) == "x" * 5000


def test_levels_of_logging_records():
    assert level_name(logging.DEBUG) == "debug"
    assert level_name(logging.INFO) == "info"
    assert level_name(logging.WARNING) == "warning"
    assert level_name(logging.ERROR + 5) == "error"
    assert level_name(logging.CRITICAL) == "critical"


def test_capture_tees_streams_and_takes_logging_records_once_with_their_level(capsys):
    got = []
    console = Console(lambda level, msg: got.append((level, msg)))
    logger = logging.getLogger("jobpulse-test-capture")
    handler = logging.StreamHandler(sys.stderr)
    console.start()
    try:
        logger.addHandler(handler)
        logger.propagate = False
        print("to stdout")
        sys.stderr.write("to stderr\n")
        logger.error("bad %s", "thing")
    finally:
        console.stop()
        logger.removeHandler(handler)
        logger.propagate = True
    out, err = capsys.readouterr()
    assert out == "to stdout\n"
    assert "to stderr\n" in err and "bad thing\n" in err  # still echoed
    assert ("info", "to stdout") in got
    assert ("warning", "to stderr") in got  # stderr that states no level (jobpulse.sdk.levels)
    assert got.count(("error", "jobpulse-test-capture: bad thing")) == 1
    assert not any(msg == "bad thing" for _, msg in got)  # the handler's output is not taken twice
    assert sys.stdout is not console.stdout and sys.stderr is not console.stderr


def test_stop_restores_streams_and_the_record_factory():
    before = (sys.stdout, sys.stderr, logging.getLogRecordFactory())
    console = Console(lambda level, msg: None)
    console.start()
    assert sys.stdout is not before[0]
    console.stop()
    assert (sys.stdout, sys.stderr, logging.getLogRecordFactory()) == before
