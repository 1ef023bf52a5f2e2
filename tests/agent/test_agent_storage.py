import os

import pytest

from jobpulse.agent.storage import PathSpec, StorageCollector, du_bytes, parse_paths, parse_size


def test_paths_option_parses_names_paths_and_limits():
    assert parse_paths("ephemeral=/tmp,cache=/cache:50G") == [
        PathSpec("ephemeral", "/tmp"),
        PathSpec("cache", "/cache", 50 * 1024**3),
    ]


def test_bad_paths_option_is_refused():
    with pytest.raises(ValueError):
        parse_paths("Cache-Dir=/x")
    with pytest.raises(ValueError):
        parse_paths("cache")


def test_sizes():
    assert parse_size("512") == 512
    assert parse_size("64K") == 64 * 1024
    assert parse_size("1.5TiB") == int(1.5 * 1024**4)


def test_statvfs_gives_used_bytes_and_a_fraction(tmp_path):
    st = os.statvfs(tmp_path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    samples = {s.metric: s.value for s in StorageCollector([PathSpec("ephemeral", str(tmp_path))]).collect(0.0)}
    assert samples["ephemeral_bytes"] == pytest.approx(used, rel=0.01)
    assert 0.0 <= samples["ephemeral_util"] <= 1.0


def test_directory_with_a_limit_is_summed_like_du(tmp_path):
    cache = tmp_path / "cache"
    (cache / "sub").mkdir(parents=True)
    (cache / "a.bin").write_bytes(os.urandom(256 * 1024))
    (cache / "sub/b.bin").write_bytes(os.urandom(64 * 1024))
    os.link(cache / "a.bin", cache / "sub/a-again.bin")  # counted once
    size = du_bytes(str(cache))
    blocks = sum(os.lstat(p).st_blocks * 512 for p in (cache, cache / "sub", cache / "a.bin", cache / "sub/b.bin"))
    assert size == blocks
    collector = StorageCollector([PathSpec("cache", str(cache), 1024 * 1024)], background=False)
    samples = {s.metric: s.value for s in collector.collect(0.0)}
    assert samples == {"cache_bytes": size, "cache_util": size / (1024 * 1024)}


def test_missing_path_gives_no_samples(tmp_path):
    collector = StorageCollector([PathSpec("ephemeral", str(tmp_path / "absent"))])
    assert collector.collect(0.0) == []
