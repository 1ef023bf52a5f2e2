"""Marked console output between a rank's SDK and the node wrapper (``jobpulse.sdk.passthrough``)."""

from __future__ import annotations

import io
import os
import random
import sys

import pytest

from jobpulse.sdk.console import Console
from jobpulse.sdk.passthrough import FRAME_MAX, PIPES_VAR, Unmarker, frames, marked_fd, pipe_id


def unmark(chunks: list[bytes]) -> tuple[bytes, bytes, bytes]:
    """What an Unmarker fed ``chunks`` answers: (everything to echo, the marked bytes, the unmarked bytes)."""
    unmarker = Unmarker()
    pieces = [piece for chunk in chunks for piece in unmarker.feed(chunk)]
    pieces.append((unmarker.flush(), False))
    echo = b"".join(p for p, _ in pieces)
    return echo, b"".join(p for p, m in pieces if m), b"".join(p for p, m in pieces if not m)


def cut(data: bytes, rng: random.Random) -> list[bytes]:
    points = sorted(rng.sample(range(1, len(data)), 20))
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def test_marked_and_plain_output_come_apart_in_order_however_the_reads_cut_them():
    captured = b"rank 0 step 1\n\r 50%|#####     |\r100%|##########|\nno newline yet"
    stream = b"launcher says hi\n" + b"".join(frames(captured)) + b"partial " + b"".join(frames(b"x\n")) + b"end\n"
    for seed in range(20):
        echo, marked, plain = unmark(cut(stream, random.Random(seed)))
        assert marked == captured + b"x\n"
        assert plain == b"launcher says hi\npartial end\n"
        assert echo == b"launcher says hi\n" + captured + b"partial x\nend\n"


def test_a_long_line_is_sent_in_frames_a_pipe_writes_whole():
    line = bytes(range(32, 127)) * 200 + b"\n"
    parts = frames(line)
    assert len(parts) > 1 and all(len(p) <= FRAME_MAX for p in parts)
    assert unmark(parts) == (line, line, b"")


def test_the_marks_bytes_in_plain_output_stay_plain():
    text = b"record\x1ejpx separator\n\x1e"
    assert unmark([text]) == (text, b"", text)


def test_output_is_marked_only_where_it_reaches_a_wrapper_pipe(tmp_path):
    read, write = os.pipe()
    other_read, other_write = os.pipe()
    try:
        env = {PIPES_VAR: f"{pipe_id(write)} 1:2"}
        assert marked_fd(write, env)
        assert not marked_fd(other_write, env)
        assert not marked_fd(write, {})
        with open(tmp_path / "out.log", "wb") as file:
            assert pipe_id(file.fileno()) == "" and not marked_fd(file.fileno(), env)
    finally:
        for fd in (read, write, other_read, other_write):
            os.close(fd)


@pytest.fixture
def wrapper_pipe(monkeypatch):
    """A text stream on a pipe named as the wrapper's, and the pipe's read end."""
    read, write = os.pipe()
    os.set_blocking(read, False)
    stream = io.TextIOWrapper(io.FileIO(write, "w"), encoding="utf-8", write_through=True)
    monkeypatch.setenv(PIPES_VAR, pipe_id(write))
    yield stream, read
    stream.close()
    os.close(read)


def test_what_the_console_captures_reaches_the_wrapper_marked_and_the_rest_plain(wrapper_pipe, monkeypatch):
    stream, read = wrapper_pipe
    monkeypatch.setattr(sys, "stdout", stream)
    lines: list[tuple[str, str]] = []
    console = Console(lambda level, msg: lines.append((level, msg)))
    console.start(records=False)
    try:
        print("captured line")
        sys.stdout.buffer.write(b"bytes the console does not see\n")
        print("after the bytes")
    finally:
        console.stop()
    print("after the capture")
    sys.stdout.flush()
    echo, marked, plain = unmark([os.read(read, 65536)])
    assert lines == [("info", "captured line"), ("info", "after the bytes")]
    assert marked == b"captured line\nafter the bytes\n"
    assert plain == b"bytes the console does not see\nafter the capture\n"
    assert echo == b"captured line\nbytes the console does not see\nafter the bytes\nafter the capture\n"


def test_a_console_not_capturing_writes_plain(wrapper_pipe, monkeypatch):
    stream, read = wrapper_pipe
    monkeypatch.setattr(sys, "stdout", stream)
    console = Console(lambda level, msg: None)
    console.start(records=False)
    console.active = False  # as in a forked child, whose lines its parent's run does not take
    try:
        print("not captured")
    finally:
        console.stop()
    assert unmark([os.read(read, 65536)]) == (b"not captured\n", b"", b"not captured\n")


def test_a_line_printed_in_pieces_reaches_the_wrapper_whole_and_an_open_line_on_flush(wrapper_pipe, monkeypatch):
    stream, read = wrapper_pipe
    monkeypatch.setattr(sys, "stdout", stream)
    console = Console(lambda level, msg: None)
    console.start(records=False)
    try:
        print("epoch", 1, "loss", 0.5)  # four pieces and a newline: five writes
        print("\r 50%", end="", flush=True)
        first = os.read(read, 65536)
        print("\r100%", end="")
    finally:
        console.stop()  # the open line is written as it stands
    assert first == b"".join(frames(b"epoch 1 loss 0.5\n")) + b"".join(frames(b"\r 50%"))
    assert os.read(read, 65536) == b"".join(frames(b"\r100%"))
