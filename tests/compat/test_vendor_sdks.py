"""The vendors' official SDKs, as shipped, against a real server: only their endpoint and credentials change.

Alibaba Cloud's PAI-DLC SDK and Huawei Cloud's ModelArts SDK sign every request with a jobpulse access key
pair; Baseten's SDK sends a jobpulse API key. Each test asserts what the SDK itself parsed: its model objects,
or the exception it raised (code, message, request id).
"""

from __future__ import annotations

import re
import time

import orjson
import pytest
from alibabacloud_pai_dlc20201203 import models as pai_models
from alibabacloud_pai_dlc20201203.client import Client as PaiClient
from alibabacloud_tea_openapi.exceptions import ClientException
from alibabacloud_tea_openapi.models import Config
from baseten.client import ManagementClient
from baseten.client.managementapi._client import ResponseError
from baseten.client.managementapi._models import GetTrainingJobMetricsRequest, GetTrainingProjectsJobsMetricsParams
from compat_data import DLC_JOB, INSTANCE, MA_JOB, MINUTE, PROJECT, T0
from darabonba.runtime import RuntimeOptions
from huaweicloudsdkcore.auth.credentials import BasicCredentials
from huaweicloudsdkcore.exceptions.exceptions import ClientRequestException
from huaweicloudsdkmodelarts.v1 import (
    ModelArtsClient,
    ShowTrainingJobLogsPreviewRequest,
    ShowTrainingJobMetricsRequest,
)

PAI_METRICS = {
    "GpuCoreUsage": "gpu_util",
    "GpuMemoryUsage": "gpu_mem_util",
    "CpuCoreUsage": "cpu_util",
    "MemoryUsage": "mem_util",
    "NetworkInputRate": "net_rx_Bps",
    "NetworkOutputRate": "net_tx_Bps",
    "DiskReadRate": "disk_read_Bps",
    "DiskWriteRate": "disk_write_Bps",
}
WORKERS = ("worker-0", "worker-1", "worker-2")
ALIBABA_REQUEST_ID = re.compile(r"[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}")


def iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


@pytest.fixture(scope="module")
def pair(dataset) -> tuple[str, str]:
    """An access key pair reading the compat tests' project."""
    status, _, answer = dataset.http.call(
        "POST",
        "/jp/v1/keys",
        headers={"Authorization": f"Bearer {dataset.key}", "Content-Type": "application/json"},
        body=orjson.dumps({"name": "vendor SDKs", "projects": [PROJECT], "role": "read", "pair": True}),
    )
    assert status == 201, answer
    return answer["access_key_id"], answer["access_key_secret"]


def pai(dataset, access_key_id: str, secret: str, **config) -> PaiClient:
    endpoint = dataset.http.url.split("://", 1)[1]
    return PaiClient(
        Config(endpoint=endpoint, protocol="http", access_key_id=access_key_id, access_key_secret=secret, **config)
    )


def modelarts(dataset, access_key_id: str, secret: str) -> ModelArtsClient:
    credentials = BasicCredentials(access_key_id, secret, PROJECT)
    return ModelArtsClient.new_builder().with_credentials(credentials).with_endpoint(dataset.http.url).build()


def window_request(metric_type: str) -> pai_models.GetJobMetricsRequest:
    return pai_models.GetJobMetricsRequest(
        metric_type=metric_type, start_time=iso(T0), end_time=iso(T0 + 14 * MINUTE), time_step="1m"
    )


# -- Alibaba Cloud PAI-DLC ---------------------------------------------------------------------------------


@pytest.mark.parametrize("metric_type", list(PAI_METRICS))
def test_pai_sdk_signed_acs3_reads_every_metric_type_of_every_pod(dataset, pair, metric_type):
    response = pai(dataset, *pair).get_job_metrics(DLC_JOB, window_request(metric_type))
    body = response.body
    assert response.status_code == 200 and body.job_id == DLC_JOB
    assert ALIBABA_REQUEST_ID.fullmatch(body.request_id)
    assert [pod.pod_id for pod in body.pod_metrics] == [f"{DLC_JOB}-{w}" for w in WORKERS]
    for pod, worker in zip(body.pod_metrics, WORKERS, strict=True):
        expected = dataset.bucket_means(DLC_JOB, worker, PAI_METRICS[metric_type], T0, MINUTE)
        assert {point.time: point.value for point in pod.metrics} == pytest.approx(expected)
        if worker == "worker-2" and metric_type.startswith("Gpu"):
            assert pod.metrics == []  # a CPU-only pod
        else:
            assert len(pod.metrics) == 15


def test_pai_sdk_signed_with_the_v2_algorithm_reads_the_same(dataset, pair):
    acs3 = pai(dataset, *pair).get_job_metrics(DLC_JOB, window_request("CpuCoreUsage")).body
    v2 = pai(dataset, *pair, signature_algorithm="v2").get_job_metrics(DLC_JOB, window_request("CpuCoreUsage")).body
    assert v2.to_map()["PodMetrics"] == acs3.to_map()["PodMetrics"] and v2.request_id != acs3.request_id


def test_pai_sdk_with_a_jobpulse_key_as_bearer_token(dataset):
    endpoint = dataset.http.url.split("://", 1)[1]
    client = PaiClient(Config(endpoint=endpoint, protocol="http", bearer_token=dataset.key))
    body = client.get_job_metrics(DLC_JOB, window_request("MemoryUsage")).body
    expected = dataset.bucket_means(DLC_JOB, "worker-1", "mem_util", T0, MINUTE)
    assert {p.time: p.value for p in body.pod_metrics[1].metrics} == pytest.approx(expected)


def pai_refusal(call) -> ClientException:  # noqa: ANN001 - a call of the SDK
    with pytest.raises(ClientException) as caught:
        call()
    error = caught.value
    assert ALIBABA_REQUEST_ID.fullmatch(error.request_id)
    assert error.data["RequestId"] == error.request_id
    return error


def test_pai_sdk_with_a_wrong_secret_raises_signature_does_not_match(dataset, pair):
    client = pai(dataset, pair[0], pair[1][:-1] + ("x" if pair[1][-1] != "x" else "y"))
    error = pai_refusal(lambda: client.get_job_metrics(DLC_JOB, window_request("CpuCoreUsage")))
    assert (error.status_code, error.code) == (401, "SignatureDoesNotMatch")
    assert "signature does not match" in error.message


def test_pai_sdk_with_an_unknown_access_key_raises_not_found(dataset, pair):
    client = pai(dataset, "JPAK" + "0" * 16, pair[1])
    error = pai_refusal(lambda: client.get_job_metrics(DLC_JOB, window_request("CpuCoreUsage")))
    assert (error.status_code, error.code) == (401, "InvalidAccessKeyId.NotFound")
    assert "JPAK0000000000000000" in error.message


def test_pai_sdk_with_a_date_outside_the_window_raises_expired(dataset, pair):
    stale = {"x-acs-date": iso(int(time.time() * 1000) - 20 * MINUTE)}  # the SDK signs the date it is given
    client = pai(dataset, *pair)
    error = pai_refusal(
        lambda: client.get_job_metrics_with_options(DLC_JOB, window_request("CpuCoreUsage"), stale, RuntimeOptions())
    )
    assert (error.status_code, error.code) == (401, "InvalidTimeStamp.Expired")
    assert "15 minutes" in error.message


def test_pai_sdk_request_sent_twice_raises_nonce_used(dataset, pair):
    nonce = {"x-acs-signature-nonce": f"replay-{time.time_ns()}"}  # a replay: the same signed nonce again
    client = pai(dataset, *pair)
    first = client.get_job_metrics_with_options(DLC_JOB, window_request("DiskReadRate"), nonce, RuntimeOptions())
    assert first.status_code == 200
    error = pai_refusal(
        lambda: client.get_job_metrics_with_options(DLC_JOB, window_request("DiskReadRate"), nonce, RuntimeOptions())
    )
    assert (error.status_code, error.code) == (401, "SignatureNonceUsed")
    assert nonce["x-acs-signature-nonce"] in error.message


def test_pai_sdk_v2_request_sent_twice_raises_nonce_used(dataset, pair):
    nonce = {"x-acs-signature-nonce": f"replay-v2-{time.time_ns()}"}
    client = pai(dataset, *pair, signature_algorithm="v2")
    assert client.get_job_metrics_with_options(DLC_JOB, window_request("MemoryUsage"), nonce, RuntimeOptions())
    error = pai_refusal(
        lambda: client.get_job_metrics_with_options(DLC_JOB, window_request("MemoryUsage"), nonce, RuntimeOptions())
    )
    assert error.code == "SignatureNonceUsed"


def test_pai_sdk_for_an_unknown_job_raises_job_not_found(dataset, pair):
    client = pai(dataset, *pair)
    error = pai_refusal(lambda: client.get_job_metrics("dlc-nope", window_request("CpuCoreUsage")))
    assert (error.status_code, error.code) == (404, "JobNotFound")
    assert "'dlc-nope' does not exist" in error.message


# -- Huawei Cloud ModelArts --------------------------------------------------------------------------------


def raw(dataset, path: str) -> dict:
    status, _, body = dataset.http.call("GET", path, headers={"X-Auth-Token": dataset.key})
    assert status == 200, body
    return body


def test_modelarts_sdk_signed_reads_a_tasks_metrics(dataset, pair):
    response = modelarts(dataset, *pair).show_training_job_metrics(
        ShowTrainingJobMetricsRequest(training_job_id=MA_JOB, task_id="worker-1")
    )
    parsed = {m.metric: m.value for m in response.metrics}
    expected = raw(dataset, f"/v2/{PROJECT}/training-jobs/{MA_JOB}/metrics/worker-1")["metrics"]
    assert list(parsed) == ["cpuUsage", "memUsage", "gpuUtil", "gpuMemUsage", "npuUtil", "npuMemUsage"]
    assert parsed == {m["metric"]: m["value"] for m in expected}
    assert parsed["gpuUtil"][:15] == [62.5 + m for m in range(15)]  # the mean of both GPUs, per minute
    assert response.status_code == 200


def test_modelarts_sdk_signed_reads_a_tasks_log_preview(dataset, pair):
    response = modelarts(dataset, *pair).show_training_job_logs_preview(
        ShowTrainingJobLogsPreviewRequest(training_job_id=MA_JOB, task_id="worker-0")
    )
    whole = "".join(line + "\n" for line in dataset.logs["worker-0"])
    assert response.content == whole
    assert response.current_size == response.full_size == len(whole.encode())


def modelarts_refusal(call) -> ClientRequestException:  # noqa: ANN001 - a call of the SDK
    with pytest.raises(ClientRequestException) as caught:
        call()
    error = caught.value
    assert re.fullmatch(r"[0-9a-f]{32}", error.request_id or ""), error  # from the X-Request-Id header
    return error


def test_modelarts_sdk_with_a_wrong_secret_raises_apigw_0301(dataset, pair):
    client = modelarts(dataset, pair[0], "not-the-secret")
    error = modelarts_refusal(
        lambda: client.show_training_job_metrics(
            ShowTrainingJobMetricsRequest(training_job_id=MA_JOB, task_id="worker-0")
        )
    )
    assert (error.status_code, error.error_code) == (401, "APIGW.0301")
    assert error.error_msg.startswith("Incorrect IAM authentication information: the request's signature")


def test_modelarts_sdk_with_a_date_outside_the_window_is_refused(dataset, pair):
    client = modelarts(dataset, *pair)
    stale = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() - 20 * 60))
    client.preset_headers = {"X-Sdk-Date": stale}  # the SDK signs the date it is given
    error = modelarts_refusal(
        lambda: client.show_training_job_metrics(
            ShowTrainingJobMetricsRequest(training_job_id=MA_JOB, task_id="worker-0")
        )
    )
    assert (error.status_code, error.error_code) == (401, "APIGW.0301")
    assert "X-Sdk-Date is more than 15 minutes" in error.error_msg


def test_modelarts_sdk_for_an_unknown_job_raises_0404_with_a_request_id(dataset, pair):
    client = modelarts(dataset, *pair)
    error = modelarts_refusal(
        lambda: client.show_training_job_logs_preview(
            ShowTrainingJobLogsPreviewRequest(training_job_id="nope", task_id="worker-0")
        )
    )
    assert (error.status_code, error.error_code) == (404, "ModelArts.0404")
    assert f"'nope' does not exist in project '{PROJECT}'" in error.error_msg


# -- Baseten -----------------------------------------------------------------------------------------------


def baseten(dataset, key: str) -> ManagementClient:
    return ManagementClient(api_key=key, base_url_override=dataset.http.url)


def test_baseten_sdk_get_reads_the_job_its_nodes_and_every_rank(dataset):
    with baseten(dataset, dataset.key) as client:
        params = GetTrainingProjectsJobsMetricsParams(
            start_epoch_millis=T0, end_epoch_millis=T0 + 14 * MINUTE, step_seconds=60
        )
        answer = client.api.get_training_projects_jobs_metrics(
            training_project_id=PROJECT, training_job_id=DLC_JOB, params=params
        )
    job = answer.training_job
    assert (job.id, job.training_project_id, job.current_status) == (DLC_JOB, PROJECT, "TRAINING_JOB_RUNNING")
    assert job.node_count == 3
    assert job.instance_type.model_dump() == INSTANCE
    assert [node.node_id for node in answer.per_node_metrics] == list(WORKERS)
    assert sorted(answer.gpu_utilization) == ["0", "1"]  # the leader's (worker-1) ranks
    expected = dataset.bucket_means(DLC_JOB, "worker-1", "gpu_util", T0, MINUTE, device="1")
    got = {int(p.timestamp.timestamp() * 1000): p.value for p in answer.gpu_utilization["1"]}
    assert got == pytest.approx({t: v / 100 for t, v in expected.items()})  # a fraction, one point a minute
    cpu = {int(p.timestamp.timestamp() * 1000): p.value for p in answer.per_node_metrics[2].metrics.cpu_usage}
    expected_cpu = dataset.bucket_means(DLC_JOB, "worker-2", "cpu_cores", T0, MINUTE)
    assert cpu == pytest.approx(expected_cpu)


def test_baseten_sdk_post_reads_the_same_as_get(dataset):
    window = {"start_epoch_millis": T0, "end_epoch_millis": T0 + 14 * MINUTE}
    with baseten(dataset, dataset.key) as client:
        posted = client.api.post_training_projects_jobs_metrics(
            training_project_id=PROJECT, training_job_id=DLC_JOB, request=GetTrainingJobMetricsRequest(**window)
        )
        got = client.api.get_training_projects_jobs_metrics(
            training_project_id=PROJECT,
            training_job_id=DLC_JOB,
            params=GetTrainingProjectsJobsMetricsParams(**window),
        )
    assert posted.model_dump(exclude={"training_job"}) == got.model_dump(exclude={"training_job"})
    assert posted.training_job.node_count == 3 and posted.cache is not None
    times = [p.timestamp.timestamp() for p in posted.cpu_memory_usage_bytes]
    assert {b - a for a, b in zip(times, times[1:], strict=False)} == {10.0}  # a 14-minute window's default step


def test_baseten_sdk_with_a_wrong_key_raises_401(dataset):
    with baseten(dataset, "jp_000000000000_" + "x" * 40) as client, pytest.raises(ResponseError) as caught:
        client.api.get_training_projects_jobs_metrics(training_project_id=PROJECT, training_job_id=DLC_JOB)
    assert caught.value.status_code == 401
    assert "not valid" in orjson.loads(caught.value.body)["detail"]


def test_baseten_sdk_for_an_unknown_job_raises_404(dataset):
    with baseten(dataset, dataset.key) as client, pytest.raises(ResponseError) as caught:
        client.api.get_training_projects_jobs_metrics(training_project_id=PROJECT, training_job_id="nope")
    assert caught.value.status_code == 404
    assert orjson.loads(caught.value.body) == {
        "detail": f"training job 'nope' does not exist in training project '{PROJECT}'"
    }
