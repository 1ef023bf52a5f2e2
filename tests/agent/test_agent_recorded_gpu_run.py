"""Jobs recorded on a real H100, sent by ``jobpulse sync`` to the session's real server.

``data/spool_h100_lightning_gpt2.tgz`` is the spool that ``jobpulse run`` and the SDK inside it
left while their server could not be reached, on one NVIDIA H100 80GB HBM3 (driver 580.159.04):
job ``h100-lightning`` (a Lightning MLP in bf16, run twice: 45 s and 30 s of training between
8 s idle phases, 8 GiB held throughout) and job ``h100-gpt2`` (the Transformers Trainer on a
GPT-2 shaped model, 400 steps). The figures below are what the GPU did then.

``data/spool_h100_ranks.tgz`` was left the same way by two later runs on an H100 of the same driver, beside
``nvidia-smi --query-gpu=... -lms 1000`` (``data/nvidia_smi_query_h100_ranks.csv``, UTC): job ``h100-single``
(a bf16 MLP for 30 s between 6 s idle phases) and job ``h100-two-ranks`` (``jobpulse run -- torchrun
--nproc_per_node 2``, both ranks training on the one GPU for 20 s; rank 0 logs the loss, each rank its own
``rank<N>/steps_per_s``).
"""

from __future__ import annotations

import csv
import statistics
import tarfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobpulse.cli import main
from jobpulse.client import Client
from jobpulse.credentials import Credentials

pytestmark = pytest.mark.e2e

DATA = Path(__file__).parent / "data"


def _synced(server, tmp_path_factory, archive_name: str) -> Client:
    spool = tmp_path_factory.mktemp("recorded")
    with tarfile.open(DATA / archive_name) as archive:
        archive.extractall(spool, filter="data")
    argv = ["sync", "--spool-dir", str(spool / "spool"), "--url", server.url, "--api-key", server.api_key]
    assert main([*argv, "--any-url"]) == 0  # recorded for the server the node was told of
    return Client(Credentials(server.url, server.api_key), timeout=30)


@pytest.fixture(scope="module")
def api(server, tmp_path_factory):
    return _synced(server, tmp_path_factory, "spool_h100_lightning_gpt2.tgz")


@pytest.fixture(scope="module")
def ranks_api(server, tmp_path_factory):
    return _synced(server, tmp_path_factory, "spool_h100_ranks.tgz")


def _series(api, job: str, metric: str) -> list[float]:
    answer = api.request("GET", f"/jp/v1/jobs/{job}/system/series?metric={metric}&step=5s&fields=avg,max")
    (series,) = answer["series"]
    assert series["device"] == "0"
    return [v for v in series["max"] if v is not None]


def test_the_gpu_under_load_and_at_rest(api):
    util = _series(api, "h100-lightning", "gpu_util")
    assert max(util) >= 99 and min(util) == 0
    assert 600 < max(_series(api, "h100-lightning", "gpu_power_w")) <= 700  # the board's limit is 700 W
    assert 90 < max(_series(api, "h100-lightning", "gpu_sm_util")) < 95  # GPM's SM activity, Hopper only
    memory = _series(api, "h100-lightning", "gpu_mem_bytes")
    assert max(memory) == 16_195_125_248 and sorted(memory)[len(memory) // 2] > 8 << 30
    assert _series(api, "h100-lightning", "gpu_mem_total_bytes")[0] == 85_520_809_984


def test_every_gpu_metric_of_the_collector_arrived(api):
    metrics = {s["metric"] for s in api.request("GET", "/jp/v1/jobs/h100-gpt2/system")["series"]}
    expected = {
        "gpu_util", "gpu_sm_util", "gpu_mem_bw_util", "gpu_mem_bytes", "gpu_mem_total_bytes", "gpu_mem_util",
        "gpu_power_w", "gpu_temp_c", "gpu_sm_clock_mhz", "gpu_ecc_corrected", "gpu_ecc_uncorrected",
        "gpu_xid_errors", "cpu_util", "mem_bytes", "agent_cpu_util",
    }  # fmt: skip
    assert expected <= metrics


def test_the_lightning_job_has_its_hyperparameters_loss_and_log(api):
    job = api.request("GET", "/jp/v1/jobs/h100-lightning")
    assert job["job"]["config"] == {"lr": 0.001, "width": 8192}
    assert [(w["status"], w["exit_code"]) for w in job["workers"]] == [("completed", 0)]
    loss = api.request("GET", "/jp/v1/jobs/h100-lightning/scalars/points?metric=train&variant=loss&limit=10000")
    # two runs logged every 10th step (2,471 and 1,649 steps): a step logged by both is stored once
    assert len(loss["iter"]) == 249 and loss["iter"][:2] == [9, 19] and loss["iter"][-1] == 2470
    metrics = api.request("GET", "/jp/v1/jobs/h100-lightning/scalars")["metrics"]
    assert [m["variants"][0]["points"] for m in metrics if m["metric"] == "train"] == [249]  # its card's count
    lines = api.request("GET", "/jp/v1/jobs/h100-lightning/logs?start=head&limit=1000")["lines"]
    assert any(line["msg"].startswith("trained 2471 steps") for line in lines)


def test_the_trainer_config_given_under_run_reached_the_job(api):
    config = api.request("GET", "/jp/v1/jobs/h100-gpt2")["job"]["config"]
    assert (config["args/max_steps"], config["args/per_device_train_batch_size"], config["args/bf16"]) == (
        400,
        16,
        True,
    )
    evals = api.request("GET", "/jp/v1/jobs/h100-gpt2/scalars/points?metric=eval&variant=loss")
    assert evals["iter"] == [100, 200, 300, 400]


def _nvidia_smi_readings() -> list[tuple[float, float, float, float]]:
    """(epoch seconds, utilization %, memory bytes, power W) of each line nvidia-smi printed."""
    with open(DATA / "nvidia_smi_query_h100_ranks.csv", newline="") as f:
        rows = list(csv.reader(f))[1:]
    readings = []
    for stamp, util, memory, power, *_ in rows:
        at = datetime.strptime(stamp.strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=UTC)
        util, memory, power = (float(field.split()[0]) for field in (util, memory, power))
        readings.append((at.timestamp(), util, memory * (1 << 20), power))
    return readings


def _at_1s(api, job: str, metric: str) -> dict[int, float]:
    answer = api.request("GET", f"/jp/v1/jobs/{job}/system/series?metric={metric}&step=1s&fields=avg")
    (series,) = answer["series"]
    return dict(zip(series["t"], series["avg"], strict=True))


@pytest.mark.parametrize("job", ["h100-single", "h100-two-ranks"])
def test_the_collector_read_what_nvidia_smi_printed_beside_it(ranks_api, job):
    readings = _nvidia_smi_readings()
    util, memory, power = (_at_1s(ranks_api, job, m) for m in ("gpu_util", "gpu_mem_bytes", "gpu_power_w"))
    pairs = []
    for t, value in util.items():
        nearest = min(readings, key=lambda r: abs(r[0] - t / 1000))
        if abs(nearest[0] - t / 1000) <= 0.6:  # the two sampled the GPU at most 0.6 s apart
            pairs.append(((value, memory[t], power[t]), nearest[1:]))
    assert len(pairs) >= 60 and max(util.values()) == 100 and min(util.values()) == 0
    assert sum(abs(ours[0] - smi[0]) <= 2 for ours, smi in pairs) >= 0.95 * len(pairs)
    assert statistics.median(abs(ours[1] - smi[1]) for ours, smi in pairs) < 4 << 20
    assert statistics.median(abs(ours[2] - smi[2]) for ours, smi in pairs) < 5


def test_a_run_synced_later_shows_when_it_ran(ranks_api):
    answer = ranks_api.request("GET", "/jp/v1/jobs/h100-single")
    job, (worker,) = answer["job"], answer["workers"]
    assert (job["started"], job["ended"]) == (worker["started"], worker["ended"]) == (1795410756643, 1795410827954)
    samples = sorted(_at_1s(ranks_api, "h100-single", "gpu_util"))
    assert job["started"] <= samples[0] and samples[-1] <= job["ended"]


def test_ranks_under_run_share_its_worker_and_keep_their_own_metrics(ranks_api):
    answer = ranks_api.request("GET", "/jp/v1/jobs/h100-two-ranks")
    assert [(w["worker"], w["status"], w["exit_code"]) for w in answer["workers"]] == [("worker-0", "completed", 0)]
    assert answer["job"]["config"] == {"width": 4096, "lr": 0.001, "ranks": 2}
    metrics = ranks_api.request("GET", "/jp/v1/jobs/h100-two-ranks/scalars")["metrics"]
    points = {(m["metric"], v["variant"]): (v["points"], v["last_iter"]) for m in metrics for v in m["variants"]}
    assert points == {  # rank 0 trained 2451 steps and rank 1 2467, each logging every 10th
        ("rank0", "steps_per_s"): (246, 2450),
        ("rank1", "steps_per_s"): (247, 2460),
        ("train", "loss"): (246, 2450),
        ("train", "lr"): (246, 2450),
    }
    lines = [line["msg"] for line in ranks_api.request("GET", "/jp/v1/jobs/h100-two-ranks/logs?limit=1000")["lines"]]
    assert any(m.startswith("rank 1: trained 2467 steps") for m in lines)
