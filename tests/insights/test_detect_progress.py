"""Hangs, diverging scalars and lost workers: each triggers when it should, and stays silent otherwise."""

from __future__ import annotations

from synth import at, constant, evaluate, healthy, kinds, piecewise


def without(builder, start: float, end: float, *event_kinds: str, worker: str | None = None):  # noqa: ANN001, ANN201
    """``builder`` with its events of ``event_kinds`` (of ``worker``, or all) in [start, end) minutes removed."""
    builder.events = [
        e
        for e in builder.events
        if not (
            e["kind"] in event_kinds and at(start) <= e["ts"] < at(end) and (worker is None or e["worker"] == worker)
        )
    ]
    return builder


def test_a_stalled_job_is_a_hang(client):
    builder = healthy("stalled", (0, 32), util=lambda _w, _d: piecewise(90.0, (15, 32, 0.0)))
    without(builder, 15, 32, "scalar", "log").send(client)
    found = kinds(evaluate(client, "stalled", 31.5)["findings"], "hang")
    assert len(found) == 1 and found[0]["status"] == "open" and found[0]["severity"] == "critical"
    assert found[0]["started"] == at(15)
    assert found[0]["evidence"]["state"] == "stalled" and found[0]["evidence"]["last_step"] == at(15)


def test_a_collective_spinning_at_full_utilization_is_a_hang(client):
    builder = healthy("spinning", (0, 32), util=lambda _w, _d: piecewise(90.0, (15, 32, 100.0)))
    without(builder, 15, 32, "scalar", "log").send(client)
    found = kinds(evaluate(client, "spinning", 31.5)["findings"], "hang")
    assert [f["evidence"]["state"] for f in found] == ["spinning"]


def test_no_progress_for_less_than_the_minimum_is_not_a_hang(client):
    builder = healthy("pause", (0, 32), util=lambda _w, _d: piecewise(90.0, (15, 23, 0.0)))
    without(builder, 15, 23, "scalar", "log").send(client)
    assert kinds(evaluate(client, "pause", 31.5)["findings"], "hang") == []


def test_an_evaluation_phase_without_training_steps_is_not_a_hang(client):
    """12 minutes of evaluation: no training scalars, GPUs at 70%, log lines go on."""
    builder = healthy("evaluating", (0, 35), util=lambda _w, _d: piecewise(90.0, (15, 27, 70.0)))
    without(builder, 15, 27, "scalar").send(client)
    assert evaluate(client, "evaluating", 34.5)["findings"] == []


def test_a_nan_loss_is_divergence(client):
    builder = healthy("nan", (0, 25))
    builder.events = [e for e in builder.events if e["kind"] != "scalar"]
    builder.steps("worker-0", (0, 25), constant(120.0), value=lambda m: float("nan") if m >= 20 else 1.0)
    builder.steps("worker-1", (0, 25), constant(120.0))
    builder.send(client)
    found = kinds(evaluate(client, "nan", 24.5)["findings"], "divergence")
    assert [(f["signal"], f["severity"], f["started"], f["status"]) for f in found] == [
        ("non_finite:loss/worker-0", "critical", at(20), "open")
    ]


def test_a_loss_spike_is_divergence_and_resolves(client):
    builder = healthy("spike", (0, 30))
    builder.events = [e for e in builder.events if e["kind"] != "scalar"]
    for worker in ("worker-0", "worker-1"):
        spike = piecewise(0.5, (20, 20.2, 50.0)) if worker == "worker-0" else constant(0.5)
        builder.steps(worker, (0, 30), constant(120.0), value=spike)
    builder.send(client)
    found = kinds(evaluate(client, "spike", 29.5)["findings"], "divergence")
    assert [(f["signal"], f["started"], f["ended"]) for f in found] == [("spike:loss/worker-0", at(20), at(21))]
    assert found[0]["evidence"]["max_value"] == 50.0 and found[0]["evidence"]["rolling_median"] == 0.5


def test_a_falling_loss_in_warm_up_is_not_a_spike(client):
    builder = healthy("falling", (0, 30))
    builder.events = [e for e in builder.events if e["kind"] != "scalar"]
    for worker in ("worker-0", "worker-1"):
        builder.steps(worker, (0, 30), constant(120.0), value=lambda m: 20.0 / (1 + m))
    builder.send(client)
    assert evaluate(client, "falling", 29.5)["findings"] == []


def test_a_worker_that_stops_reporting_is_lost(client):
    builder = healthy("lost", (0, 30), workers=3)
    builder.events = [e for e in builder.events if not (e["worker"] == "worker-2" and e["ts"] >= at(15))]
    builder.send(client)
    found = kinds(evaluate(client, "lost", 29.5)["findings"], "lost_worker")
    assert [(f["worker"], f["started"], f["status"]) for f in found] == [("worker-2", at(15), "open")]
    assert found[0]["evidence"]["last_seen"] == at(15) and found[0]["evidence"]["workers_reporting"] == 2


def test_a_worker_that_finished_is_not_lost(client):
    builder = healthy("done-early", (0, 30), workers=3)
    builder.events = [e for e in builder.events if not (e["worker"] == "worker-2" and e["ts"] >= at(15))]
    builder.send(client)
    answer = client.put("/jp/v1/jobs/done-early/workers/worker-2", json={"status": "completed", "at": at(15)})
    assert answer.status_code == 200, answer.text
    assert kinds(evaluate(client, "done-early", 29.5)["findings"], "lost_worker") == []
