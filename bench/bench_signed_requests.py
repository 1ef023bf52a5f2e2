"""What checking a vendor SDK's signature costs: PAI-DLC GetJobMetrics through Alibaba Cloud's official SDK,
signed with a jobpulse access key pair, against the same call carrying a plain jobpulse key.

A real ``jobpulse server`` is started on loopback (embedded chdb storage, a fresh data directory). One job
gets --minutes minutes of samples (one worker, two GPUs, a sample every 10 s), then the SDK asks for
``GpuCoreUsage`` over the job's span at 1-minute steps, --requests times one after another in each mode
(after --warmup untimed calls):

- ``bearer``: the SDK's ``bearer_token`` with a jobpulse API key (no signature: the baseline);
- ``acs3``: ``ACS3-HMAC-SHA256``, the SDK's default signature;
- ``v2``: ``signature_algorithm='v2'`` (``acs <AK>:<signature>``).

A signed request costs the pair's lookup, the opening of its sealed secret, the signature, and the claim of its
nonce in the store (an insert and a read). Every figure is the SDK call's wall time; the script prints p50 and
p95 in milliseconds with the machine, the transport and the data size, and checks every answer's values.

    .venv/bin/python bench/bench_signed_requests.py
    .venv/bin/python bench/bench_signed_requests.py --requests 500 --minutes 120
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import httpx
import numpy as np
from machine import describe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from alibabacloud_pai_dlc20201203 import models  # noqa: E402
from alibabacloud_pai_dlc20201203.client import Client  # noqa: E402
from alibabacloud_tea_openapi.models import Config  # noqa: E402

from jobpulse.testing import running_server  # noqa: E402

PROJECT, JOB = "bench-signed", "bench-signed-1"
MINUTE = 60_000


def load(api: httpx.Client, minutes: int) -> int:
    """One job of ``minutes`` minutes of GPU samples; answers its first minute."""
    now = int(time.time() * 1000)
    start = now - now % MINUTE - minutes * MINUTE
    ts = list(range(start, start + minutes * MINUTE, 10_000))
    series = [
        {"kind": "system", "worker": "worker-0", "metric": "gpu_util", "device": d, "ts": ts, "value": [50.0] * len(ts)}
        for d in ("0", "1")
    ]
    assert api.post("/jp/v1/jobs", json={"project": PROJECT, "job": JOB}).status_code == 201
    answer = api.post("/jp/v1/ingest", json={"project": PROJECT, "job": JOB, "series": series}).json()
    assert answer["accepted"] == 2 * len(ts), answer
    return start


def timed(client: Client, request: models.GetJobMetricsRequest, points: int, requests: int, warmup: int) -> list:
    times = []
    for i in range(warmup + requests):
        began = time.perf_counter()
        body = client.get_job_metrics(JOB, request).body
        spent = time.perf_counter() - began
        assert len(body.pod_metrics[0].metrics) == points and body.pod_metrics[0].metrics[0].value == 50.0
        if i >= warmup:
            times.append(spent * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--minutes", type=int, default=60)
    args = parser.parse_args()
    with running_server() as server:
        api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.api_key}"}, timeout=60)
        start = load(api, args.minutes)
        pair = api.post("/jp/v1/keys", json={"name": "bench", "projects": [PROJECT], "pair": True}).json()
        endpoint = server.url.split("://", 1)[1]
        signed = {"access_key_id": pair["access_key_id"], "access_key_secret": pair["access_key_secret"]}
        clients = {
            "bearer": Client(Config(endpoint=endpoint, protocol="http", bearer_token=server.api_key)),
            "acs3": Client(Config(endpoint=endpoint, protocol="http", **signed)),
            "v2": Client(Config(endpoint=endpoint, protocol="http", signature_algorithm="v2", **signed)),
        }
        end = start + (args.minutes - 1) * MINUTE
        request = models.GetJobMetricsRequest(
            metric_type="GpuCoreUsage",
            start_time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start / 1000)),
            end_time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(end / 1000)),
            time_step="1m",
        )
        print(f"machine:   {describe()}")
        print(f"server:    {server.url}, storage: embedded (chdb), a fresh data directory")
        print("client:    alibabacloud-pai-dlc20201203 (its requests session, kept alive), one call at a time")
        print(f"data:      1 job, 1 worker, 2 GPUs, {args.minutes} min at 10 s; {args.minutes} points per answer")
        print(f"requests:  {args.requests} per mode after {args.warmup} untimed")
        for mode, client in clients.items():
            times = np.array(timed(client, request, args.minutes, args.requests, args.warmup))
            label = "baseline, no signature" if mode == "bearer" else "signed with an access key pair"
            p50, p95 = np.percentile(times, 50), np.percentile(times, 95)
            print(f"{mode:<7} p50 {p50:6.1f} ms   p95 {p95:6.1f} ms   ({label})")


if __name__ == "__main__":
    main()
