"""The insight detectors on jobs recorded on a real H100 (1 s samples, ``tests/agent/data/README.md``), sent to a
real server with ``jobpulse sync``: short healthy runs give no finding under the default thresholds, and under
thresholds scaled to their time scale the idle phases are found where the samples show them.

The detectors read per-minute summaries and their durations are bounded below by one minute, so "scaled" means
the shortest settings the thresholds allow (one minute of idle, of clear, of underuse...) and no warm-up: a
finding covers the whole minutes whose samples average under the threshold, once they add up to a minute of the
job (the job's first and last minutes count for the share of them it ran). The expected minutes are computed here
from the recorded 1 s series, not written down.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from recordings import MINUTE, SCALED, evaluate, of_kind, synced

from jobpulse.client import Client

pytestmark = pytest.mark.e2e

SPOOLS = ("spool_h100_lightning_gpt2.tgz", "spool_h100_ranks.tgz")
JOBS = ("h100-lightning", "h100-gpt2", "h100-single", "h100-two-ranks")
SAMPLE = 1_000  # the recordings' sampling interval (ms)
BUSY_PCT = 50.0  # a sample at or over this is training


@dataclass
class Recorded:
    api: Client
    default: dict[str, list[dict[str, Any]]]  # job -> its findings, evaluated under the default thresholds
    scaled: dict[str, list[dict[str, Any]]]  # job -> its findings, evaluated again under SCALED
    thresholds: dict[str, Any]  # the scaled thresholds as the server applied them
    projects: dict[str, dict[str, Any]]  # project -> its thresholds, read back after the change


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """Both recorded spools synced to one server; every job evaluated at its end under the default thresholds,
    then under SCALED (set on the jobs' projects through the thresholds API)."""
    with synced(SPOOLS, tmp_path_factory.mktemp("recorded")) as api:
        default = {job: evaluate(api, job) for job in JOBS}
        projects = {api.request("GET", f"/jp/v1/jobs/{job}")["job"]["project"] for job in JOBS}
        for project in projects:
            api.request("PUT", f"/jp/v1/projects/{project}/insights/thresholds", json=SCALED)
        read = {p: api.request("GET", f"/jp/v1/projects/{p}/insights/thresholds") for p in sorted(projects)}
        scaled = {job: evaluate(api, job) for job in JOBS}
        yield Recorded(api, default, scaled, next(iter(read.values()))["thresholds"], read)


@dataclass
class Samples:
    """A job's recorded ``gpu_util`` (its one device) at 1 s: bucket start, mean and sample count."""

    t: list[int]
    util: list[float]
    count: list[int]

    def minutes(self) -> dict[int, float]:
        """Per minute (start, ms): the mean of the samples in it."""
        sums: dict[int, list[float]] = {}
        for t, util, count in zip(self.t, self.util, self.count, strict=True):
            cell = sums.setdefault(t - t % MINUTE, [0.0, 0.0])
            cell[0] += util * count
            cell[1] += count
        return {minute: total / count for minute, (total, count) in sorted(sums.items())}

    def phases(self, below: float) -> list[tuple[int, int]]:
        """The runs of consecutive samples under ``below``: (first sample's time, last sample's time + 1 s)."""
        found: list[tuple[int, int]] = []
        start = None
        for i, (t, util) in enumerate(zip(self.t, self.util, strict=True)):
            if util < below and start is None:
                start = t
            if start is not None and (util >= below or i == len(self.t) - 1):
                found.append((start, (t if util >= below else t + SAMPLE)))
                start = None
        return found


def _samples(api: Client, job: str) -> Samples:
    """Read in 1 s buckets from a whole minute, so that no bucket straddles two minutes."""
    url, asked = f"/jp/v1/jobs/{job}/system/series", {"metric": "gpu_util", "step": "1s", "fields": "avg,count"}
    (extent,) = api.request("GET", url, params=asked)["series"]
    first, last = extent["t"][0], extent["t"][-1]
    aligned = {**asked, "start": first - first % MINUTE, "end": last + 2 * SAMPLE}
    (series,) = api.request("GET", url, params=aligned)["series"]
    kept = [(t, a, c) for t, a, c in zip(series["t"], series["avg"], series["count"], strict=True) if c]
    return Samples([t for t, _, _ in kept], [a for _, a, _ in kept], [c for _, _, c in kept])


def _extent(api: Client, job: str, samples: Samples) -> tuple[int, int]:
    """When the job began (its start, or its first sample where earlier) and ended."""
    row = api.request("GET", f"/jp/v1/jobs/{job}")["job"]
    return min(row["started"], samples.t[0]), row["ended"]


def _covered(minute: int, began: int, ended: int) -> float:
    """The share of ``minute`` the job ran."""
    return max(0.0, min(1.0, (min(minute + MINUTE, ended) - max(minute, began)) / MINUTE))


def _expected_idle(samples: Samples, began: int, ended: int, threshold: float, need_s: int) -> list[tuple[int, int]]:
    """The spans an idle GPU finding should have: runs of consecutive minutes whose samples average under
    ``threshold`` and that cover ``need_s`` of the job, from the job's beginning (within its first minute) to its
    end."""
    means = samples.minutes()
    spans: list[list[int]] = []
    for minute, mean in means.items():
        if mean >= threshold:
            continue
        if spans and spans[-1][1] == minute:
            spans[-1][1] = minute + MINUTE
        else:
            spans.append([minute, minute + MINUTE])
    covered = [(a, b) for a, b in spans if sum(_covered(m, began, ended) for m in range(a, b, MINUTE)) * 60 >= need_s]
    return [(max(a, began), min(b, ended)) for a, b in covered]


@pytest.mark.parametrize("job", JOBS)
def test_under_the_default_thresholds_a_recorded_job_has_no_finding(recorded, job):
    assert recorded.default[job] == []


def test_the_scaled_thresholds_are_the_projects_own(recorded):
    assert len(recorded.projects) == 2  # the two spools' jobs are in two projects
    for answer in recorded.projects.values():
        assert answer["changed"] == SCALED
        assert answer["thresholds"]["idle_util_pct"] == 5.0 and answer["thresholds"]["underused_util_pct"] == 50.0


@pytest.mark.parametrize("job", JOBS)
def test_scaled_idle_findings_cover_the_minutes_the_samples_average_idle(recorded, job):
    samples = _samples(recorded.api, job)
    began, ended = _extent(recorded.api, job, samples)
    expected = _expected_idle(
        samples, began, ended, recorded.thresholds["idle_util_pct"], recorded.thresholds["idle_min_s"]
    )
    found = sorted((f["started"], f["ended"]) for f in of_kind(recorded.scaled[job], "idle_gpu"))
    assert len(found) == len(expected)
    if job in ("h100-lightning", "h100-gpt2"):  # the two with a whole minute of idle
        assert expected
    for (start, end), (want_start, want_end) in zip(found, expected, strict=True):
        assert abs(start - want_start) <= 2 * SAMPLE and abs(end - want_end) <= 2 * SAMPLE


@pytest.mark.parametrize("job", JOBS)
def test_each_idle_finding_lies_on_an_idle_phase_of_the_samples(recorded, job):
    """Within the detectors' resolution: each bound within a minute of the idle phase the 1 s samples show."""
    samples = _samples(recorded.api, job)
    phases = samples.phases(recorded.thresholds["idle_util_pct"])
    for finding in of_kind(recorded.scaled[job], "idle_gpu"):
        start, end = finding["started"], finding["ended"]
        overlapping = [(a, b) for a, b in phases if a < end and b > start]
        assert overlapping, (finding, phases)
        assert start >= overlapping[0][0] - MINUTE and end <= overlapping[-1][1] + MINUTE


@pytest.mark.parametrize("job", JOBS)
def test_no_idle_finding_spans_a_busy_sample(recorded, job):
    samples = _samples(recorded.api, job)
    busy = [t for t, util in zip(samples.t, samples.util, strict=True) if util >= BUSY_PCT]
    assert busy  # every recorded job trained
    for finding in of_kind(recorded.scaled[job], "idle_gpu"):
        assert not [t for t in busy if finding["started"] <= t < finding["ended"]], finding


@pytest.mark.parametrize("job", JOBS)
def test_scaled_underuse_is_found_only_in_minutes_averaging_under_its_level(recorded, job):
    samples = _samples(recorded.api, job)
    began, ended = _extent(recorded.api, job, samples)
    means = samples.minutes()
    level = recorded.thresholds["underused_util_pct"]
    flagged = set()
    for finding in of_kind(recorded.scaled[job], "underused"):
        flagged |= {m for m in means if finding["started"] < m + MINUTE and m < finding["ended"]}
    assert all(means[m] < level for m in flagged)
    assert all(m in flagged for m, mean in means.items() if mean < level and _covered(m, began, ended) == 1.0)
    if job != "h100-single":  # the others have a whole minute under the level
        assert flagged


@pytest.mark.parametrize("job", JOBS)
def test_no_finding_begins_before_the_job_or_its_data(recorded, job):
    samples = _samples(recorded.api, job)
    began, _ = _extent(recorded.api, job, samples)
    assert all(f["started"] >= began for f in recorded.scaled[job])


def test_seconds_of_idle_at_a_jobs_edges_are_no_minute_of_idle(recorded):
    """h100-single idles 6 s before and after its 30 s of training, in its first and last minutes (24 s and 48 s of
    them): under one-minute thresholds that is neither an idle GPU nor an underused job."""
    assert recorded.scaled["h100-single"] == []


def test_a_run_sent_after_it_ended_is_evaluated_over_its_samples(recorded):
    """The first spool's jobs were registered when the spool was sent, minutes after their last sample."""
    samples = _samples(recorded.api, "h100-lightning")
    row = recorded.api.request("GET", "/jp/v1/jobs/h100-lightning")["job"]
    assert row["started"] > samples.t[-1] + MINUTE
    idle = of_kind(recorded.scaled["h100-lightning"], "idle_gpu")
    assert idle and all(samples.t[0] <= f["started"] < samples.t[-1] for f in idle)


def _step_rate(api: Client, job: str, metric: str) -> float:
    """Iterations per second of the rank that logs ``metric``, over its points."""
    points = api.request("GET", f"/jp/v1/jobs/{job}/scalars/points?metric={metric}&variant=steps_per_s&limit=10000")
    return (points["iter"][-1] - points["iter"][0]) * 1000 / (points["ts"][-1] - points["ts"][0])


def test_two_ranks_sharing_one_gpu_are_told_apart_only_by_their_step_rates(recorded):
    """Each rank logs its own ``rank<N>/steps_per_s``; a straggler finding names the slower one only where the rates
    differ by more than the gap (they run under one ``jobpulse run``, so both report as its one worker)."""
    rates = {rank: _step_rate(recorded.api, "h100-two-ranks", rank) for rank in ("rank0", "rank1")}
    slower, faster = sorted(rates, key=rates.get)
    gap_pct = (1 - rates[slower] / rates[faster]) * 100
    expected = [slower] if gap_pct > recorded.thresholds["straggler_gap_pct"] else []
    assert [f["worker"] for f in of_kind(recorded.scaled["h100-two-ranks"], "straggler")] == expected
    workers = recorded.api.request("GET", "/jp/v1/jobs/h100-two-ranks")["workers"]
    assert [w["worker"] for w in workers] == ["worker-0"]
