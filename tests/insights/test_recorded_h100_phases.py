"""The insight detectors on real PyTorch jobs recorded on an H100 with ``bench/gpu_insights.py``
(``tests/agent/data/README.md``): an input-bound phase, a hang and a slowed rank are found where the runs' own phase
log (``phases_h100_insights.json``) puts them, and nowhere else.

The runs last a few minutes, so the thresholds are scaled to the shortest the table allows (as in
``test_recorded_h100.py``). A finding's bounds are whole minutes (the detectors read per-minute summaries): each is
checked against the whole minutes inside its phase and the minutes its phase touches, computed here from the log.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from recordings import DATA, MINUTE, SCALED, evaluate, of_kind, synced

from jobpulse.client import Client

pytestmark = pytest.mark.e2e

SPOOLS = ("spool_h100_insights.tgz", "spool_h100_agent_check.tgz")
JOBS = ("gpu-phases", "gpu-straggler", "gpu-agent-check")


@dataclass(frozen=True)
class Phase:
    started: int
    ended: int

    @property
    def touched(self) -> tuple[int, int]:
        """From the start of the minute it began in to the end of the minute it ended in."""
        return self.started - self.started % MINUTE, self.ended - self.ended % MINUTE + MINUTE

    @property
    def whole(self) -> tuple[int, int]:
        """The whole minutes inside it: (start of the first, end of the last)."""
        first = self.started - self.started % MINUTE + (MINUTE if self.started % MINUTE else 0)
        return first, self.ended - self.ended % MINUTE


def _phases() -> dict[tuple[str, str], Phase]:
    out = {}
    for name in ("phases_h100_insights.json", "phases_h100_agent_check.json"):
        for p in json.loads((DATA / name).read_text()):
            out[(p["job"], p["phase"])] = Phase(p["started_ms"], p["ended_ms"])
    return out


PHASES = _phases()


@dataclass
class Recorded:
    api: Client
    default: dict[str, list[dict[str, Any]]]
    scaled: dict[str, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    with synced(SPOOLS, tmp_path_factory.mktemp("recorded")) as api:
        default = {job: evaluate(api, job) for job in JOBS}
        api.request("PUT", "/jp/v1/projects/insights-h100/insights/thresholds", json=SCALED)
        yield Recorded(api, default, {job: evaluate(api, job) for job in JOBS})


def _within(finding: dict[str, Any], phase: Phase) -> bool:
    """The finding covers the phase's whole minutes and lies within the minutes it touches."""
    (lo, hi), (first, last) = phase.touched, phase.whole
    return lo <= finding["started"] <= first and last <= finding["ended"] <= hi


def test_the_recordings_jobs_ended_as_they_did(recorded):
    status = {job: recorded.api.request("GET", f"/jp/v1/jobs/{job}")["job"]["status"] for job in JOBS}
    assert status == {"gpu-phases": "failed", "gpu-straggler": "completed", "gpu-agent-check": "completed"}


@pytest.mark.parametrize("job", JOBS)
def test_default_thresholds_find_nothing_in_runs_shorter_than_their_durations(recorded, job):
    assert recorded.default[job] == []  # the GPUs ran at their software power cap: no hardware finding either


def test_the_input_bound_phase_is_underused_with_its_cause_and_its_minutes(recorded):
    (finding,) = of_kind(recorded.scaled["gpu-phases"], "underused")
    phase = PHASES[("gpu-phases", "input-bound")]
    assert finding["started"] <= phase.whole[0]
    evidence = finding["evidence"]
    assert evidence["causes"] == ["input_bound"]
    cause = evidence["cause_evidence"]["input_bound"]
    assert cause["metric"] == "cpu_util" and cause["median_pct"] >= SCALED.get("input_bound_cpu_pct", 90.0)
    assert _within(cause, phase)


def test_the_hang_is_found_in_the_hang_phase_only(recorded):
    (finding,) = of_kind(recorded.scaled["gpu-phases"], "hang")
    phase = PHASES[("gpu-phases", "hang")]
    assert finding["severity"] == "critical" and finding["evidence"]["state"] == "stalled"
    assert phase.touched[0] <= finding["started"] <= phase.whole[0]
    assert finding["ended"] <= phase.touched[1]
    assert finding["evidence"]["last_step"] <= phase.touched[0] + MINUTE  # the end of the last minute with a step


def test_the_gpu_idle_while_hung_is_an_idle_gpu_and_the_input_bound_gpu_is_not(recorded):
    (finding,) = of_kind(recorded.scaled["gpu-phases"], "idle_gpu")
    phase = PHASES[("gpu-phases", "hang")]
    assert phase.touched[0] <= finding["started"] <= phase.whole[0] and finding["ended"] <= phase.touched[1]
    assert finding["evidence"]["max_util_pct"] == 0.0


def test_the_slowed_rank_is_the_straggler_from_when_it_was_slowed(recorded):
    (finding,) = of_kind(recorded.scaled["gpu-straggler"], "straggler")
    phase = PHASES[("gpu-straggler", "slowed")]
    assert (finding["worker"], finding["signal"]) == ("worker-1", "step_rate")
    assert phase.touched[0] <= finding["started"] <= phase.whole[0] + MINUTE
    evidence = finding["evidence"]
    assert [w["worker"] for w in evidence["worst"]][0] == "worker-1"
    rates = {w["worker"]: w["value"] for w in evidence["worst"]}
    assert rates["worker-0"] > 2 * rates["worker-1"]  # rank 1 slept three of its steps' time after each step


@pytest.mark.parametrize(
    ("job", "kind"),
    [
        ("gpu-phases", "straggler"),
        ("gpu-straggler", "hang"),
        ("gpu-straggler", "idle_gpu"),
        ("gpu-straggler", "underused"),
    ],
)
def test_nothing_else_is_found(recorded, job, kind):
    assert of_kind(recorded.scaled[job], kind) == []


def _series(api: Client, job: str, metrics: str) -> dict[str, list[float]]:
    url = f"/jp/v1/jobs/{job}/system/series"
    answer = api.request("GET", url, params={"metric": metrics, "step": "1s", "fields": "max"})
    return {s["metric"]: [v for v in s["max"] if v is not None] for s in answer["series"]}


@pytest.mark.parametrize("job", ["gpu-phases", "gpu-agent-check"])
def test_sixteen_loader_workers_reaped_at_once_are_not_counted_again(recorded, job):
    """Each job's input-bound phase ran 16 DataLoader workers that the process reaped when it ended."""
    values = _series(recorded.api, job, "cpu_cores,cpu_limit_cores")
    assert max(values["cpu_limit_cores"]) == 16.0
    assert max(values["cpu_cores"]) <= 16.0 * 1.05
    assert max(values["cpu_cores"]) >= 16.0 * 0.9  # and they were counted while they ran


def test_full_load_at_the_power_cap_is_no_hardware_finding(recorded):
    values = _series(recorded.api, "gpu-agent-check", "gpu_power_capped,gpu_throttle_power,gpu_power_w")
    phase = PHASES[("gpu-agent-check", "healthy")]
    assert sum(values["gpu_power_capped"]) * 1000 >= (phase.ended - phase.started) * 0.8  # capped most of the load
    assert max(values["gpu_power_w"]) >= 650.0 and max(values["gpu_throttle_power"]) == 0.0
    assert of_kind(recorded.scaled["gpu-agent-check"], "hardware") == []
