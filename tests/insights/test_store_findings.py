"""The insights' store modules on every transport (embedded, and HTTP to the ClickHouse stand-in)."""

from __future__ import annotations

import numpy as np

from jobpulse.insights.evaluate import Evaluator
from jobpulse.store.columns import columns_to_arrow
from jobpulse.store.findings import Finding

MINUTE = 60_000
T0 = 1_780_000_020_000


def test_of_two_claims_of_one_name_exactly_the_first_wins(any_store):
    assert any_store.findings.claim("open|job|idle_gpu||w|0|1") is True
    assert any_store.findings.claim("open|job|idle_gpu||w|0|1") is False
    assert any_store.findings.claim("open|job|idle_gpu||w|0|2") is True


def test_an_abandoned_claim_can_be_taken_over_once_stale(any_store):
    assert any_store.findings.claim("alert|opened|f_1") is True
    assert any_store.findings.claim("alert|opened|f_1", stale_ms=0) is True
    assert any_store.findings.claim("alert|opened|f_1", stale_ms=3_600_000) is False


def test_a_finding_is_stored_updated_and_counted(any_store):
    found = Finding("f_a", "p", "j", "hang", "", "critical", "", "", T0, None, T0, T0, None, {"state": "stalled"})
    any_store.findings.write([found])
    assert any_store.findings.open_counts(["j"]) == {"j": {"critical": 1}}
    found.ended = found.resolved = found.updated = T0 + MINUTE
    any_store.findings.write([found])
    assert [f.status for f in any_store.findings.of_job("j")] == ["resolved"]
    assert any_store.findings.open_counts(["j"]) == {}
    assert any_store.findings.current(["j"], T0 + 2 * MINUTE) == []


def test_an_evaluation_reads_and_writes_through_the_transport(any_store):
    any_store.jobs.ensure({"tj": "p"}, {"tj": T0})
    ts = np.arange(T0, T0 + 20 * MINUTE, 10_000, dtype=np.int64)
    values = np.where(ts >= T0 + 8 * MINUTE, 0.0, 90.0)
    columns = {"job": "tj", "worker": "worker-0", "metric": "gpu_util", "device": "0", "ts": ts, "value": values}
    any_store.engine.insert(f"{any_store.database}.system", columns_to_arrow("system", columns, len(ts)))
    row = any_store.insight_data.jobs(["tj"])[0]
    outcome = Evaluator(any_store).job(row, T0 + 19 * MINUTE + 30_000)
    assert sorted(f.kind for f in outcome.opened) == ["idle_gpu", "underused"]
    assert [f.started for f in any_store.findings.of_job("tj") if f.kind == "idle_gpu"] == [T0 + 8 * MINUTE]
