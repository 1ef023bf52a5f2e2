"""Idle GPUs, underused jobs and stragglers: each triggers when it should, and stays silent on healthy jobs."""

from __future__ import annotations

from synth import at, constant, evaluate, healthy, kinds, piecewise


def only(worker: str, device: str, value, default: float = 90.0):  # noqa: ANN001, ANN201
    """A utilization function: ``value`` on (worker, device), ``default`` on the others."""
    return lambda w, d: value if (w, d) == (worker, device) else constant(default)


def test_an_idle_gpu_is_found_with_its_worker_device_and_time_span(client):
    healthy("idle-1", (0, 30), util=only("worker-1", "1", piecewise(90.0, (10, 20, 1.0)))).send(client)
    found = kinds(evaluate(client, "idle-1", 29)["findings"], "idle_gpu")
    assert len(found) == 1
    finding = found[0]
    assert (finding["worker"], finding["device"]) == ("worker-1", "1")
    assert (finding["started"], finding["ended"]) == (at(10), at(20))
    assert finding["evidence"]["mean_util_pct"] == 1.0 and finding["evidence"]["minutes"] == 10


def test_an_idle_gpu_still_idle_is_an_open_finding(client):
    healthy("idle-2", (0, 25), util=only("worker-0", "0", piecewise(90.0, (12, 25, 0.0)))).send(client)
    found = kinds(evaluate(client, "idle-2", 24.5)["findings"], "idle_gpu")
    assert [(f["status"], f["started"], f["ended"]) for f in found] == [("open", at(12), None)]


def test_gpus_idle_for_less_than_the_minimum_are_not_idle(client):
    healthy("idle-3", (0, 30), util=only("worker-0", "1", piecewise(90.0, (10, 13.5, 0.0)))).send(client)
    assert kinds(evaluate(client, "idle-3", 29)["findings"], "idle_gpu") == []


def test_warm_up_idle_gpus_are_not_findings(client):
    """Loading data and compiling: every GPU idle for the first 5 minutes, no steps yet."""
    builder = healthy("warm", (5, 30), util=lambda _w, _d: constant(90.0))
    builder.gpus(["worker-0", "worker-1"], 2, (0, 5), lambda _w, _d: constant(0.0))
    builder.send(client)
    assert evaluate(client, "warm", 29)["findings"] == []


def test_a_job_that_just_started_has_no_findings(client):
    builder = healthy("young", (0, 4), util=lambda _w, _d: constant(0.0), logs=False)
    builder.send(client)
    assert evaluate(client, "young", 4)["findings"] == []


def test_a_healthy_job_has_no_findings(client):
    healthy("fine", (0, 40), workers=4).send(client)
    assert evaluate(client, "fine", 39.5)["findings"] == []


def test_checkpoint_pauses_are_not_findings(client):
    """Every 10 minutes the job saves a checkpoint: 2 minutes with GPUs at 0, no steps and no log lines."""
    pauses = [(m, m + 2) for m in (10, 20, 30)]
    builder = healthy("ckpt", (0, 40), util=lambda _w, _d: piecewise(90.0, *[(a, b, 0.0) for a, b in pauses]))
    builder.events = [
        e for e in builder.events if e["kind"] == "system" or not any(at(a) <= e["ts"] < at(b) for a, b in pauses)
    ]
    builder.send(client)
    assert evaluate(client, "ckpt", 39.5)["findings"] == []


def test_an_underused_job_names_an_input_bound_cause(client):
    builder = healthy("under", (0, 30), util=lambda _w, _d: piecewise(90.0, (12, 30, 30.0)))
    builder.events = [e for e in builder.events if e.get("metric") != "cpu_util"]
    for worker in ("worker-0", "worker-1"):
        builder.system(worker, "cpu_util", "", (0, 30), piecewise(40.0, (12, 30, 97.0)), every_s=30)
    builder.send(client)
    found = kinds(evaluate(client, "under", 29.5)["findings"], "underused")
    assert len(found) == 1 and found[0]["status"] == "open"
    assert found[0]["evidence"]["median_util_pct"] == 30.0
    assert found[0]["evidence"]["causes"] == ["input_bound"]


def test_an_input_bound_phase_then_a_stall_keeps_the_cause_with_the_minutes_it_held(client):
    """Input-bound from minute 12 (GPUs at 25%, CPUs saturated), then stalled from minute 30 (all at 0), evaluated
    every 5 minutes as a running job is: one underused episode over both, and the cause named while the window saw
    it stays named once the window sees only the stall."""
    builder = healthy("phased", (0, 50), util=lambda _w, _d: piecewise(90.0, (12, 30, 25.0), (30, 50, 0.0)))
    builder.events = [e for e in builder.events if e.get("metric") != "cpu_util"]
    for worker in ("worker-0", "worker-1"):
        builder.system(worker, "cpu_util", "", (0, 50), piecewise(40.0, (12, 30, 98.0), (30, 50, 1.0)), every_s=30)
    builder.send(client)
    for minute in range(20, 50, 5):
        found = kinds(evaluate(client, "phased", minute + 0.5)["findings"], "underused")
    assert len(found) == 1
    evidence = found[0]["evidence"]
    assert evidence["causes"] == ["input_bound"]
    assert evidence["median_cpu_util_pct"] == 1.0  # the last window's: only the stall
    held = evidence["cause_evidence"]["input_bound"]
    assert held["median_pct"] == 98.0 and held["metric"] == "cpu_util"
    assert (held["started"], held["ended"]) == (at(12), at(30))  # the saturated minutes, not when the median crossed


def test_an_evaluation_phase_does_not_make_a_job_underused(client):
    """Every 15 minutes, 4 minutes of evaluation at 40% utilization."""
    builder = healthy("evalphase", (0, 45), util=lambda _w, _d: piecewise(90.0, (15, 19, 40.0), (30, 34, 40.0)))
    builder.send(client)
    assert kinds(evaluate(client, "evalphase", 44.5)["findings"], "underused") == []


def test_a_straggler_by_step_rate_is_ranked_among_the_workers(client):
    rates = {"worker-0": 120.0, "worker-1": 118.0, "worker-2": 122.0, "worker-3": 60.0}
    healthy("slow-rank", (0, 30), workers=4, rate=lambda w: constant(rates[w])).send(client)
    found = kinds(evaluate(client, "slow-rank", 29.5)["findings"], "straggler")
    assert [(f["worker"], f["signal"]) for f in found] == [("worker-3", "step_rate")]
    evidence = found[0]["evidence"]
    assert evidence["worst"][0]["worker"] == "worker-3"
    assert evidence["min"] < 70 and 110 < evidence["median"] < 125 and evidence["max"] > 115


def test_a_straggler_by_gpu_utilization(client):
    util = lambda w, _d: constant(50.0 if w == "worker-2" else 90.0)  # noqa: E731
    healthy("slow-gpu", (0, 30), workers=4, util=util).send(client)
    found = kinds(evaluate(client, "slow-gpu", 29.5)["findings"], "straggler")
    assert [(f["worker"], f["signal"]) for f in found] == [("worker-2", "gpu_util")]


def test_one_rank_saving_a_checkpoint_is_not_a_straggler(client):
    rate = lambda w: piecewise(120.0, (12, 14, 0.0)) if w == "worker-0" else constant(120.0)  # noqa: E731
    healthy("rank0-ckpt", (0, 30), workers=4, rate=rate).send(client)
    assert kinds(evaluate(client, "rank0-ckpt", 29.5)["findings"], "straggler") == []
