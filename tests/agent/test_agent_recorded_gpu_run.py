"""Jobs recorded on a real H100, sent by ``jobpulse sync`` to the session's real server.

``data/spool_h100_lightning_gpt2.tgz`` is the spool that ``jobpulse run`` and the SDK inside it
left while their server could not be reached, on one NVIDIA H100 80GB HBM3 (driver 580.159.04):
job ``h100-lightning`` (a Lightning MLP in bf16, run twice: 45 s and 30 s of training between
8 s idle phases, 8 GiB held throughout) and job ``h100-gpt2`` (the Transformers Trainer on a
GPT-2 shaped model, 400 steps). The figures below are what the GPU did then.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from jobpulse.cli import main
from jobpulse.client import Client
from jobpulse.credentials import Credentials

pytestmark = pytest.mark.e2e

RECORDED = Path(__file__).parent / "data" / "spool_h100_lightning_gpt2.tgz"


@pytest.fixture(scope="module")
def api(server, tmp_path_factory):
    spool = tmp_path_factory.mktemp("recorded")
    with tarfile.open(RECORDED) as archive:
        archive.extractall(spool, filter="data")
    argv = ["sync", "--spool-dir", str(spool / "spool"), "--url", server.url, "--api-key", server.api_key]
    assert main([*argv, "--any-url"]) == 0  # recorded for the server the node was told of
    return Client(Credentials(server.url, server.api_key), timeout=30)


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
