"""The compatible APIs count machines: in a job of two nodes of two ranks each, a ModelArts task, a PAI pod and a
Baseten node is a node worker, whose ranks are part of it; a job without node workers counts each worker."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

import orjson
import pytest
from compat_data import MINUTE, PROJECT, T0, Http

JOB = "hier-2x2"
ALONE = "hier-torchrun-alone"  # ranks of a node that never registered, each sampling itself
NODES = {"node-0": ["worker-0", "worker-1"], "node-1": ["worker-2", "worker-3"]}
MINUTES = 5
LINES = 4


def _cpu(node: int, minute: int) -> float:
    return 40.0 + 20 * node + minute


def _gpu(node: int, device: int) -> float:
    return 50.0 + 10 * device + 20 * node


def _system(worker: str, metric: str, device: str, value: Callable[[int], float]) -> dict:
    """Six samples a minute for ``MINUTES`` minutes from T0, each of ``value(minute)``."""
    minutes = [m for m in range(MINUTES) for _ in range(6)]
    times = [T0 + m * MINUTE + k * 10_000 for m in range(MINUTES) for k in range(6)]
    values = [value(m) for m in minutes]
    return {"kind": "system", "worker": worker, "metric": metric, "device": device, "ts": times, "value": values}


def _log_series() -> tuple[list[dict], dict[str, list[tuple[int, str]]]]:
    """Every worker's lines, interleaved in time; a node's workers write their i-th line at one millisecond, with
    one sequence number."""
    series, written = [], {}
    workers = [(n, w) for n, (node, ranks) in enumerate(NODES.items()) for w in (node, *ranks)]
    for n, worker in workers:
        lines = [(T0 + i * 1000 + n * 10, f"line {i} of {worker}") for i in range(LINES)]
        written[worker] = lines
        series.append(
            {"kind": "log", "worker": worker, "seq": list(range(LINES)), "ts": [t for t, _ in lines],
             "msg": [m for _, m in lines]}
        )  # fmt: skip
    return series, written


class Calls:
    def __init__(self, http: Http, key: str) -> None:
        self.http, self.key = http, key
        self.auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def native(self, method: str, path: str, body: object) -> dict:
        status, _, answer = self.http.call(method, path, headers=self.auth, body=orjson.dumps(body))
        assert status in (200, 201), answer
        return answer

    def modelarts(self, job: str, path: str) -> tuple[int, dict]:
        url = f"/v2/{PROJECT}/training-jobs/{job}/{path}"
        status, _, body = self.http.call("GET", url, headers={"X-Auth-Token": self.key})
        return status, body

    def pai(self, job: str, metric: str) -> list[dict]:
        query = {"MetricType": metric, "StartTime": T0, "EndTime": T0 + MINUTES * MINUTE - 1, "TimeStep": "1m"}
        query["Token"] = self.key
        status, _, body = self.http.call("GET", f"/api/v1/jobs/{job}/metrics?{urlencode(query)}")
        assert status == 200, body
        return body["PodMetrics"]

    def baseten(self, job: str) -> dict:
        query = {"start_epoch_millis": T0, "end_epoch_millis": T0 + MINUTES * MINUTE - 1, "step_seconds": 60}
        url = f"/v1/training_projects/{PROJECT}/jobs/{job}/metrics?{urlencode(query)}"
        status, _, body = self.http.call("GET", url, headers={"Authorization": f"Bearer {self.key}"})
        assert status == 200, body
        return body


@pytest.fixture(scope="module")
def calls(server) -> Calls:  # noqa: ANN001 - the session's ServerProcess
    return Calls(Http(server.url), server.api_key)


@pytest.fixture(scope="module")
def two_nodes(calls: Calls) -> dict[str, list[tuple[int, str]]]:
    """Nodes sampling CPU and two GPUs each, every worker logging; worker-3 also samples its own CPU (as the
    SDK's in-process sampling does)."""
    calls.native("POST", "/jp/v1/jobs", {"project": PROJECT, "job": JOB, "status": "created", "leader": "worker-0"})
    series, written = _log_series()
    for n, node in enumerate(NODES):
        series.append(_system(node, "cpu_util", "", lambda m, n=n: _cpu(n, m)))
        series.append(_system(node, "cpu_cores", "", lambda _, n=n: 4.0 + 2 * n))
        series += [_system(node, "gpu_util", str(d), lambda _, n=n, d=d: _gpu(n, d)) for d in (0, 1)]
    series.append(_system("worker-3", "cpu_util", "", lambda _: 5.0))
    series.append(_system("worker-3", "cpu_cores", "", lambda _: 0.5))
    answer = calls.native("POST", "/jp/v1/ingest", {"project": PROJECT, "job": JOB, "series": series})
    assert answer["rejected"] == 0, answer
    for node, ranks in NODES.items():
        calls.native("PUT", f"/jp/v1/jobs/{JOB}/workers/{node}", {"kind": "node", "host": f"host-{node}"})
        for local, rank in enumerate(ranks):
            place = {"kind": "rank", "node": node, "rank": int(rank.split("-")[1]), "local_rank": local}
            calls.native("PUT", f"/jp/v1/jobs/{JOB}/workers/{rank}", place)
    calls.native("PATCH", f"/jp/v1/jobs/{JOB}", {"status": "completed"})
    return written


@pytest.fixture(scope="module")
def alone(calls: Calls) -> str:
    """Two ranks of ``node-0`` (no node worker registered), each sampling its own CPU."""
    calls.native("POST", "/jp/v1/jobs", {"project": PROJECT, "job": ALONE, "status": "created"})
    series = [_system(f"worker-{r}", "cpu_util", "", lambda _, r=r: 10.0 + r) for r in (0, 1)]
    calls.native("POST", "/jp/v1/ingest", {"project": PROJECT, "job": ALONE, "series": series})
    for r in (0, 1):
        place = {"kind": "rank", "node": "node-0", "rank": r, "local_rank": r}
        calls.native("PUT", f"/jp/v1/jobs/{ALONE}/workers/worker-{r}", place)
    return ALONE


def test_a_modelarts_task_s_metrics_are_its_node_s_samples(calls: Calls, two_nodes: dict) -> None:
    status, body = calls.modelarts(JOB, "metrics/node-1")
    assert status == 200, body
    metrics = {m["metric"]: m["value"] for m in body["metrics"]}
    assert metrics["cpuUsage"][:MINUTES] == [_cpu(1, m) for m in range(MINUTES)]
    assert metrics["gpuUtil"][:MINUTES] == [(_gpu(1, 0) + _gpu(1, 1)) / 2] * MINUTES  # the node's GPUs pooled
    assert set(metrics["cpuUsage"][MINUTES:]) == {-1}


def test_a_modelarts_task_s_log_is_its_node_s_and_its_ranks_lines_in_time_order(calls: Calls, two_nodes: dict) -> None:
    status, body = calls.modelarts(JOB, "tasks/node-0/logs/preview")
    assert status == 200, body
    # lines of one millisecond in worker order, none taken for a resent copy of another
    lines = sorted(line for worker in ("node-0", "worker-0", "worker-1") for line in two_nodes[worker])
    assert len(lines) == 3 * LINES
    expected = "".join(f"{msg}\n" for _, msg in lines)
    assert body["content"] == expected
    assert body["current_size"] == body["full_size"] == len(expected.encode())
    assert "of node-1" not in body["content"] and "of worker-2" not in body["content"]


def test_a_rank_asked_as_a_modelarts_task_answers_its_own_lines(calls: Calls, two_nodes: dict) -> None:
    status, body = calls.modelarts(JOB, "tasks/worker-2/logs/preview")
    assert status == 200, body
    assert body["content"] == "".join(f"{msg}\n" for _, msg in two_nodes["worker-2"])


def test_an_unknown_modelarts_task_names_the_nodes(calls: Calls, two_nodes: dict) -> None:
    status, body = calls.modelarts(JOB, "metrics/node-9")
    assert status == 404, body
    assert body["error_msg"].endswith("(tasks: node-0, node-1)")


def test_pai_pods_are_the_nodes(calls: Calls, two_nodes: dict) -> None:
    pods = calls.pai(JOB, "GpuCoreUsage")
    assert [p["PodId"] for p in pods] == [f"{JOB}-node-0", f"{JOB}-node-1"]
    for n, pod in enumerate(pods):
        assert [p["Time"] for p in pod["Metrics"]] == [T0 + m * MINUTE for m in range(MINUTES)]
        assert {p["Value"] for p in pod["Metrics"]} == {(_gpu(n, 0) + _gpu(n, 1)) / 2}


def test_a_rank_with_samples_of_its_own_is_a_pai_pod_after_the_nodes(calls: Calls, two_nodes: dict) -> None:
    pods = {p["PodId"]: p["Metrics"] for p in calls.pai(JOB, "CpuCoreUsage")}
    assert list(pods) == [f"{JOB}-node-0", f"{JOB}-node-1", f"{JOB}-worker-3"]
    assert [p["Value"] for p in pods[f"{JOB}-node-0"]] == [_cpu(0, m) for m in range(MINUTES)]
    assert {p["Value"] for p in pods[f"{JOB}-worker-3"]} == {5.0}


def test_baseten_counts_the_nodes_and_answers_per_node_and_per_gpu_rank(calls: Calls, two_nodes: dict) -> None:
    body = calls.baseten(JOB)
    assert body["training_job"]["node_count"] == 2
    per_node = {n["node_id"]: n["metrics"] for n in body["per_node_metrics"]}
    assert list(per_node) == ["node-0", "node-1", "worker-3"]
    for n, node in enumerate(NODES):
        gpus = per_node[node]["gpu_utilization"]
        assert sorted(gpus) == ["0", "1"]
        assert {p["value"] for p in gpus["1"]} == {_gpu(n, 1) / 100}
        assert {p["value"] for p in per_node[node]["cpu_usage"]} == {4.0 + 2 * n}
    assert {p["value"] for p in per_node["worker-3"]["cpu_usage"]} == {0.5}  # a rank that samples itself
    # the leader is worker-0, a rank: the top-level metrics are its node's
    assert body["cpu_usage"] == per_node["node-0"]["cpu_usage"]
    assert body["gpu_utilization"] == per_node["node-0"]["gpu_utilization"]


def test_a_job_without_node_workers_counts_each_worker(calls: Calls, alone: str) -> None:
    assert [p["PodId"] for p in calls.pai(alone, "CpuCoreUsage")] == [f"{alone}-worker-0", f"{alone}-worker-1"]
    body = calls.baseten(alone)
    assert body["training_job"]["node_count"] == 2
    assert [n["node_id"] for n in body["per_node_metrics"]] == ["worker-0", "worker-1"]
    status, answer = calls.modelarts(alone, "metrics/worker-1")
    assert status == 200, answer
    cpu = next(m["value"] for m in answer["metrics"] if m["metric"] == "cpuUsage")
    assert cpu[:MINUTES] == [11.0] * MINUTES
