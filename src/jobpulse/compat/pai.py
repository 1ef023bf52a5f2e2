"""Alibaba Cloud PAI-DLC GetJobMetrics: one metric of every pod of a job over a time range, at a step.

    GET /api/v1/jobs/{JobId}/metrics?MetricType=...&StartTime=...&EndTime=...&TimeStep=...&Token=...

Identity: ``JobId`` is the jobpulse job and a pod is a machine, named ``{JobId}-{worker}`` (as
``dlc-...-worker-0`` in the document's example): in a job of nodes and ranks a pod is a node worker
(``{JobId}-node-0``), whose ranks are part of it (``compat/nodes.py``); every worker that no node worker holds (a
lone process, a rank whose node never registered, every worker of a job without node workers) is a pod of its
own. A rank held by a node is a pod too only where it has samples of its own of the metric asked (the SDK's
in-process sampling); a pod's metrics are its own samples, so a node's are what the node wrapper sampled.

Credentials, as the official SDK (``alibabacloud-pai-dlc20201203``) sends them: a jobpulse access key pair as
``access_key_id``/``access_key_secret``, the request signed with ``ACS3-HMAC-SHA256`` (the SDK's default) or
the ROA signature (``signature_algorithm='v2'``), checked as ``server/signatures/acs.py`` describes (a date
within 15 minutes of the server's clock, a nonce used once); or a jobpulse API key as the SDK's
``bearer_token`` (``x-acs-bearer-token``), in the ``Token`` query parameter, or in an ``Authorization: Bearer
<key>`` header (a bare ``Authorization: <key>`` works too).

Parameters: ``MetricType`` is required, one of the eight documented values. ``StartTime`` and ``EndTime`` are
ISO 8601 times, UTC unless they carry an offset (epoch milliseconds are accepted too); by default the hour
before now, and now. ``TimeStep`` is a number with an optional unit ``s``, ``m``, ``h`` or ``d``; a bare
number counts minutes (the document's "Default value: 5. Unit: minutes"), and the default is ``5m``.

Units: GpuCoreUsage, GpuMemoryUsage, CpuCoreUsage and MemoryUsage are percent (stored ``gpu_util``,
``gpu_mem_util``, ``cpu_util`` as % of the pod's CPU limit, ``mem_util`` as % of its memory limit);
NetworkInputRate, NetworkOutputRate, DiskReadRate and DiskWriteRate are bytes per second (``net_rx_Bps``,
``net_tx_Bps``, ``disk_read_Bps``, ``disk_write_Bps``).

Answer: ``PodMetrics`` has one entry per pod of the job, in worker order (held ranks with samples last), each
with ``Metrics``: one ``{Time, Value}`` per step, ``Time`` the start of the step in epoch milliseconds and
``Value`` the mean of the step's samples over all the pod's devices (GPU metrics pool the pod's GPUs). A step
without samples, or whose mean is not a finite number (JSON has none), has no point, so a pod that never reported
the metric (a CPU-only pod asked for GpuCoreUsage) has an empty ``Metrics``. Steps start at ``StartTime``; when
``TimeStep`` is whole hours, ``StartTime`` is first rounded down to its hour, and when it is whole minutes to its
minute, so that the steps are read from the hourly or the per-minute rollup. At most 100,000 steps per call.

Errors: Alibaba Cloud's ``{"RequestId", "HostId", "Code", "Message"}`` with the HTTP status: 400
``MissingParameter`` or ``InvalidParameter`` (the message names the parameter), 401 ``MissingToken`` or
``InvalidToken``; for a signed request 401 ``IncompleteSignature`` (a malformed signature or a header it
needs missing), ``InvalidAccessKeyId.NotFound``, ``InvalidAccessKeyId.Inactive`` (revoked),
``InvalidTimeStamp.Expired``, ``SignatureDoesNotMatch`` or ``SignatureNonceUsed``; 403 ``Forbidden``, 404
``JobNotFound`` (also for a job outside the key's projects) or
``InvalidAction.NotFound`` (no such endpoint), 405 ``UnsupportedHTTPMethod``, 500 ``InternalError``, 503
``ServiceUnavailable``.
"""

from __future__ import annotations

import re
import uuid
from urllib.parse import urlparse

import numpy as np
from fastapi import APIRouter, FastAPI, Query, Request
from starlette.responses import Response

from ..errors import BadRequest, NotFound, Unauthorized
from ..server.app import add_error_shape
from ..server.context import Context, context, parse_time
from ..server.key_pairs import Reason, SignatureRefused, key_pairs
from ..server.responses import JSON
from ..server.signatures import SignedRequest, acs
from ..store import ApiKey
from ..store.identity import check_job, now_ms
from ..store.system import MAX_POINTS, MINUTE_MS, align_start
from . import nodes

router = APIRouter(tags=["PAI-DLC"])

METRICS = {
    "GpuCoreUsage": "gpu_util",
    "GpuMemoryUsage": "gpu_mem_util",
    "CpuCoreUsage": "cpu_util",
    "MemoryUsage": "mem_util",
    "NetworkInputRate": "net_rx_Bps",
    "NetworkOutputRate": "net_tx_Bps",
    "DiskReadRate": "disk_read_Bps",
    "DiskWriteRate": "disk_write_Bps",
}
DEFAULT_SPAN_MS = 3_600_000
DEFAULT_STEP_MS = 5 * MINUTE_MS
LAST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
_UNITS = {"s": 1000, "m": MINUTE_MS, "h": 3_600_000, "d": 86_400_000}
_CODES = {
    400: "InvalidParameter",
    401: "InvalidToken",
    403: "Forbidden",
    404: "InvalidAction.NotFound",
    405: "UnsupportedHTTPMethod",
    413: "InvalidParameter",
    503: "ServiceUnavailable",
}
# why a signed request is refused -> Alibaba Cloud's code for it
SIGNATURE_CODES = {
    Reason.MALFORMED: "IncompleteSignature",
    Reason.UNKNOWN_KEY: "InvalidAccessKeyId.NotFound",
    Reason.REVOKED_KEY: "InvalidAccessKeyId.Inactive",
    Reason.EXPIRED: "InvalidTimeStamp.Expired",
    Reason.MISMATCH: "SignatureDoesNotMatch",
    Reason.REPLAYED: "SignatureNonceUsed",
}
_VENDOR = frozenset({"MissingParameter", "MissingToken", "JobNotFound", *_CODES.values(), *SIGNATURE_CODES.values()})
_PATHS = re.compile(r"^/api/v1/jobs(/|$)")


def request_id() -> str:
    return str(uuid.uuid4()).upper()


def install(app: FastAPI) -> None:
    host = urlparse(app.state.ctx.settings.url).netloc

    def render_error(status: int, code: str, message: str, field: str | None) -> Response:
        """Every error of these routes: Alibaba Cloud's ``{"RequestId", "HostId", "Code", "Message"}``."""
        vendor = code if code in _VENDOR else _CODES.get(status, "InternalError")
        return JSON(
            {"RequestId": request_id(), "HostId": host, "Code": vendor, "Message": message},
            status_code=status,
        )

    app.include_router(router)
    add_error_shape(app, lambda request: bool(_PATHS.match(request.url.path)), render_error)


def _caller(request: Request, ctx: Context, token: str | None) -> ApiKey:
    """The caller's key: a signed request's access key pair, or a jobpulse API key wherever the SDK puts one."""
    bearer = request.headers.get("x-acs-bearer-token", "").strip()
    if token or bearer:
        return ctx.access.authenticate((token or bearer).strip())
    header = request.headers.get("authorization", "").strip()
    if acs.is_signature(header):
        try:
            return acs.verify(SignedRequest.of(request), header, key_pairs(request), now_ms())
        except SignatureRefused as exc:
            raise Unauthorized(exc.message, code=SIGNATURE_CODES[exc.reason]) from exc
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return ctx.access.authenticate(value.strip())
    if header and not value:
        return ctx.access.authenticate(header)
    if header:
        raise Unauthorized(
            "the Authorization header must be an ACS3-HMAC-SHA256 or 'acs' signature, or read 'Bearer <key>'",
            code="InvalidToken",
        )
    raise Unauthorized(
        "no credential: sign the request with a jobpulse access key pair, or pass a jobpulse API key as the SDK's "
        "bearer_token, the Token parameter or in an 'Authorization: Bearer <key>' header",
        code="MissingToken",
    )


def parse_step(value: str | None) -> int:
    """``TimeStep`` in milliseconds: ``30s``, ``5m``, ``1h``, ``1d``, or a bare number of minutes."""
    if value is None or value.strip() == "":
        return DEFAULT_STEP_MS
    match = re.fullmatch(r"(\d{1,9})([smhd]?)", value.strip().lower())
    if not match or int(match.group(1)) == 0:
        raise BadRequest(
            f"TimeStep must be a positive duration such as 30s, 5m, 1h or 5 (minutes), got {value!r}",
            code="InvalidParameter",
        )
    return int(match.group(1)) * _UNITS[match.group(2) or "m"]


def _time(value: str | None, name: str) -> int | None:
    try:
        moment = parse_time(value, name)
    except (BadRequest, OverflowError, ValueError) as exc:  # ValueError: more digits than an int takes
        moment = -1
        cause: Exception | None = exc
    else:
        cause = None
    if moment is not None and not 0 <= moment <= LAST_MS:
        raise BadRequest(
            f"{name} must be a UTC time in ISO 8601 form such as 2020-11-08T16:00:00Z, got {value!r}",
            code="InvalidParameter",
        ) from cause
    return moment


@router.get("/api/v1/jobs/{JobId}/metrics", summary="PAI-DLC GetJobMetrics: one metric per pod at a time step")
def get_job_metrics(
    request: Request,
    JobId: str,  # the vendor's name for it
    metric_type: str | None = Query(None, alias="MetricType"),
    start_time: str | None = Query(None, alias="StartTime"),
    end_time: str | None = Query(None, alias="EndTime"),
    time_step: str | None = Query(None, alias="TimeStep"),
    token: str | None = Query(None, alias="Token"),
) -> JSON:
    ctx = context(request)
    key = _caller(request, ctx, token)
    check_job(JobId, "JobId")
    if not metric_type:
        raise BadRequest("MetricType is required: one of " + ", ".join(METRICS), code="MissingParameter")
    if metric_type not in METRICS:
        raise BadRequest(
            f"MetricType {metric_type!r} is not valid; use one of {', '.join(METRICS)}",
            code="InvalidParameter",
        )
    step = parse_step(time_step)
    end = _time(end_time, "EndTime")
    end = now_ms() if end is None else end
    start = _time(start_time, "StartTime")
    start = end - DEFAULT_SPAN_MS if start is None else start
    if start > end:
        raise BadRequest("StartTime must not be after EndTime", code="InvalidParameter")
    start = align_start(start, step)
    if (end - start) // step + 1 > MAX_POINTS:
        raise BadRequest(
            f"[StartTime, EndTime] at this TimeStep is more than {MAX_POINTS} points; use a larger TimeStep",
            code="InvalidParameter",
        )
    try:
        job = ctx.access.job(key, JobId)
    except NotFound as exc:
        raise NotFound(f"job {JobId!r} does not exist", code="JobNotFound") from exc
    grid = ctx.store.system.grid(
        job.job, [METRICS[metric_type]], start_ms=start, end_ms=end, step_ms=step, pool_devices=True
    )
    rows = {worker: grid.values[i] for i, (worker, _, _) in enumerate(grid.keys)}
    workers, _ = nodes.listed(ctx.store.jobs.workers(job.job), list(rows))
    pods = []
    for worker in workers:
        row = rows.get(worker)
        points: list[dict] = []
        if row is not None:
            where = np.flatnonzero(~np.isnan(row))
            points = [
                {"Time": t, "Value": v} for t, v in zip(grid.times[where].tolist(), row[where].tolist(), strict=True)
            ]
        pods.append({"PodId": f"{job.job}-{worker}", "Metrics": points})
    return JSON({"JobId": job.job, "PodMetrics": pods, "RequestId": request_id()})
