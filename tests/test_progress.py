"""Step progress per worker (rank): how far each got and its recent step rate, by the API and the store method."""

from __future__ import annotations

from typing import Any

from helpers import NOW_MS, post_columns
from jobpulse.store.progress import WorkerProgress, ranking

T0 = NOW_MS - 10_000_000


def _steps(
    job: str, worker: str, iters: range, ms_per_step: int, *, start_ms: int = T0, metrics: tuple[str, ...] = ("loss",)
) -> dict:
    """``worker``'s points of ``metrics`` at ``iters``, one step every ``ms_per_step`` from ``start_ms``."""
    series = [
        {
            "kind": "scalar",
            "worker": worker,
            "metric": metric,
            "variant": "",
            "iter": list(iters),
            "ts": [start_ms + (i - iters.start) * ms_per_step for i in iters],
            "value": [1.0] * len(iters),
        }
        for metric in metrics
    ]
    return {"project": "proj", "job": job, "series": series}


def _progress(client: Any, **params: Any) -> dict:
    answer = client.get("/jp/v1/jobs/j1/progress", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_each_worker_answers_its_iterations_times_points_and_rate(client):
    post_columns(client, _steps("j1", "worker-0", range(600), 500, metrics=("loss", "lr")))  # 2 steps/s
    post_columns(client, _steps("j1", "worker-1", range(300), 1000))  # 1 step/s, until the same time
    answer = _progress(client)
    by_worker = {w["worker"]: w for w in answer["workers"]}
    zero, one = by_worker["worker-0"], by_worker["worker-1"]
    assert (zero["first_iter"], zero["last_iter"], zero["first_ts"], zero["last_ts"]) == (0, 599, T0, T0 + 299_500)
    assert zero["points"] == 1200 and one["points"] == 300
    assert abs(zero["rate"] - 2.0) < 0.1 and abs(one["rate"] - 1.0) < 0.1


def test_a_worker_that_stopped_reporting_slows_down_and_ranks_slowest(client):
    for rank in range(4):
        post_columns(client, _steps("j1", f"worker-{rank}", range(300), 1000))
    post_columns(client, _steps("j1", "worker-2", range(300, 600), 1000, start_ms=T0 + 300_000))  # it alone went on
    answer = _progress(client, worst=2)
    rates = {w["worker"]: w["rate"] for w in answer["workers"]}
    assert abs(rates["worker-2"] - 1.0) < 0.1
    assert all(rates[f"worker-{r}"] is None for r in (0, 1, 3))  # nothing reported in the last minute
    ranking_ = answer["ranking"]
    assert [w["worker"] for w in ranking_["slowest"]] == ["worker-0", "worker-1"]
    assert ranking_["last_iter"] == {"min": 299, "median": 299.0, "max": 599}


def test_the_window_starts_where_asked(client, store):
    post_columns(client, _steps("j1", "worker-0", range(100), 1000))
    post_columns(client, _steps("j1", "worker-0", range(100, 200), 250, start_ms=T0 + 100_000))  # 4 steps/s on
    [whole] = store.progress("j1", since_ms=T0)
    [fast] = store.progress("j1", since_ms=T0 + 100_000)
    assert abs(whole.rate - 199 / 124.75) < 0.05 and abs(fast.rate - 4.0) < 0.01
    assert store.progress("j1") == store.progress("j1", since_ms=T0 + 124_750 - 60_000)  # the last minute
    assert _progress(client, since=T0)["workers"][0]["rate"] == whole.rate


def test_a_job_without_scalars_has_no_progress(client):
    assert client.post("/jp/v1/jobs", json={"project": "proj", "job": "j1"}).status_code in (200, 201)
    assert _progress(client) == {
        "job": "j1",
        "workers": [],
        "ranking": {
            "rate": {"min": None, "median": None, "max": None},
            "last_iter": {"min": None, "median": None, "max": None},
            "slowest": [],
        },
    }


def test_bad_parameters_are_a_400_naming_the_field(client):
    post_columns(client, _steps("j1", "worker-0", range(10), 1000))
    for params, field in (({"since": "soon"}, "since"), ({"worst": "0"}, "worst")):
        answer = client.get("/jp/v1/jobs/j1/progress", params=params)
        assert answer.status_code == 400 and answer.json()["error"]["field"] == field


def test_the_ranking_holds_min_median_max_and_the_slowest():
    workers = [WorkerProgress(f"worker-{r}", 0, 10 * r, 0, 1000, 10, float(r)) for r in range(5)]
    summary = ranking(workers, worst=2)
    assert summary["rate"] == {"min": 0.0, "median": 2.0, "max": 4.0}
    assert [w["worker"] for w in summary["slowest"]] == ["worker-0", "worker-1"]
