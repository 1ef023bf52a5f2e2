"""A worker's place in its job (kind, node, rank, local rank) through the worker registration API."""

import pytest

RANK_1 = {"status": "running", "host": "gpu-a", "kind": "rank", "node": "node-0", "rank": 1, "local_rank": 1}


@pytest.fixture
def job(client):
    client.post("/jp/v1/jobs", json={"project": "ranks", "job": "placed"})
    return "placed"


def test_a_rank_registers_its_node_rank_and_local_rank(client, job):
    client.put(f"/jp/v1/jobs/{job}/workers/node-0", json={"status": "running", "host": "gpu-a", "kind": "node"})
    answer = client.put(f"/jp/v1/jobs/{job}/workers/worker-1", json=RANK_1)
    assert answer.status_code == 200
    placed = {k: answer.json()["worker"][k] for k in ("kind", "node", "rank", "local_rank", "host")}
    assert placed == {"kind": "rank", "node": "node-0", "rank": 1, "local_rank": 1, "host": "gpu-a"}
    listed = client.get(f"/jp/v1/jobs/{job}/workers").json()["workers"]
    assert [(w["worker"], w["kind"], w["node"], w["rank"], w["local_rank"]) for w in listed] == [
        ("node-0", "node", "", None, None),
        ("worker-1", "rank", "node-0", 1, 1),
    ]


def test_a_status_change_keeps_the_place(client, job):
    client.put(f"/jp/v1/jobs/{job}/workers/worker-1", json=RANK_1)
    client.put(f"/jp/v1/jobs/{job}/workers/worker-1", json={"status": "completed"})
    (worker,) = client.get(f"/jp/v1/jobs/{job}").json()["workers"]
    assert (worker["status"], worker["kind"], worker["node"], worker["rank"]) == ("completed", "rank", "node-0", 1)


def test_a_worker_registered_without_a_place_is_a_lone_process(client, job):
    worker = client.put(f"/jp/v1/jobs/{job}/workers/w", json={"status": "running"}).json()["worker"]
    assert (worker["kind"], worker["node"], worker["rank"], worker["local_rank"]) == ("process", "", None, None)


@pytest.mark.parametrize(
    ("field", "value"),
    [("kind", "pod"), ("kind", 3), ("node", "a b"), ("rank", -1), ("rank", "1"), ("local_rank", 2**31), ("rank", 1.5)],
)
def test_a_bad_place_is_400_naming_the_field(client, job, field, value):
    answer = client.put(f"/jp/v1/jobs/{job}/workers/worker-1", json={**RANK_1, field: value})
    assert answer.status_code == 400 and answer.json()["error"]["field"] == field
    assert client.get(f"/jp/v1/jobs/{job}/workers").json()["workers"] == []
