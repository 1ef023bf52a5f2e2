"""Episodes of a per-minute condition: minimum duration to open, hysteresis to resolve."""

from __future__ import annotations

import numpy as np

from jobpulse.insights.episodes import Episode, episodes


def cond(text: str) -> np.ndarray:
    """'x' a minute the condition holds, '.' one it does not."""
    return np.array([c == "x" for c in text])


def test_a_run_shorter_than_the_minimum_opens_nothing():
    assert episodes(cond("..xxxx....xxxx.."), min_len=5, clear_len=3) == []


def test_a_run_that_lasts_opens_an_episode_that_ends_after_the_clear_time():
    assert episodes(cond("..xxxxx......"), min_len=5, clear_len=3) == [Episode(2, 6, active=False)]


def test_an_episode_is_active_until_clear_for_long_enough():
    assert episodes(cond("..xxxxx.."), min_len=5, clear_len=3) == [Episode(2, 6, active=True)]


def test_flapping_after_opening_goes_on_as_one_episode():
    assert episodes(cond("xxxxx.xx..x.xxx....."), min_len=5, clear_len=3) == [Episode(0, 14, active=False)]


def test_a_gap_as_long_as_the_clear_time_separates_episodes():
    assert episodes(cond("xxxxx...xxxxx......"), min_len=5, clear_len=3) == [
        Episode(0, 4, active=False),
        Episode(8, 12, active=False),
    ]


def test_a_final_evaluation_ends_every_episode():
    assert episodes(cond("..xxxxxxx"), min_len=5, clear_len=3, final=True) == [Episode(2, 8, active=False)]
