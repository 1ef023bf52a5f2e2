"""Log sequence numbers and image encoding."""

from __future__ import annotations

import io
import threading
import time

import pytest

from jobpulse.sdk.media import array_png, encode_image, file_name, snapshot
from jobpulse.sdk.seq import SeqClock


def test_seq_is_strictly_increasing_even_within_one_microsecond():
    clock = SeqClock()
    seqs = [clock.next()[1] for _ in range(10_000)]
    assert all(b > a for a, b in zip(seqs, seqs[1:], strict=False))


def test_seq_is_unique_across_threads():
    clock = SeqClock()
    out: list[int] = []

    def worker():
        out.extend(clock.next()[1] for _ in range(5_000))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(out)) == 20_000


def test_a_later_process_of_the_same_worker_numbers_after_an_earlier_one():
    earlier = SeqClock()
    last = max(earlier.next()[1] for _ in range(1000))
    time.sleep(0.002)
    later = SeqClock()  # a restarted process starts from the clock, not from zero
    assert later.next()[1] > last


def test_seq_and_ts_are_the_capture_time():
    ts, seq = SeqClock().next()
    now_ms = time.time_ns() // 1_000_000
    assert now_ms - 1000 <= ts <= now_ms and seq // 1000 == ts
    assert seq < 2**53


def test_arrays_become_valid_png():
    np = pytest.importorskip("numpy")
    image = pytest.importorskip("PIL.Image")
    rgb = np.zeros((4, 6, 3), np.uint8)
    rgb[1, 2] = (255, 10, 20)
    decoded = image.open(io.BytesIO(array_png(rgb)))
    assert decoded.size == (6, 4) and decoded.mode == "RGB" and decoded.getpixel((2, 1)) == (255, 10, 20)
    gray = image.open(io.BytesIO(array_png(np.full((3, 3), 0.5))))
    assert gray.mode == "L" and gray.getpixel((0, 0)) == 128
    chw = image.open(io.BytesIO(array_png(np.ones((3, 5, 7), np.float32))))
    assert chw.size == (7, 5) and chw.getpixel((0, 0)) == (255, 255, 255)
    rgba = image.open(io.BytesIO(array_png(np.zeros((2, 2, 4), np.uint8))))
    assert rgba.mode == "RGBA"


def test_paths_bytes_and_pil_images_are_encoded(tmp_path):
    image = pytest.importorskip("PIL.Image")
    pil = image.new("RGB", (3, 2), (1, 2, 3))
    data, ext = encode_image(pil)
    assert ext == "png" and data.startswith(b"\x89PNG")
    path = tmp_path / "x.jpg"
    pil.save(path)
    assert encode_image(str(path))[1] == "jpg"
    assert encode_image(path.read_bytes())[1] == "jpg"
    with pytest.raises(TypeError):
        encode_image(42)


def test_a_snapshot_does_not_follow_later_changes():
    np = pytest.importorskip("numpy")
    array = np.zeros((2, 2))
    copy = snapshot(array)
    array[0, 0] = 1
    assert copy[0, 0] == 0


def test_file_names_are_deterministic_and_safe():
    name = file_name("m", "v", 3, "m/v/3", "png")
    assert name == file_name("m", "v", 3, "m/v/3", "png")
    assert name != file_name("m", "v", 4, "m/v/4", "png")
    assert "/" not in name and name.endswith(".png")
