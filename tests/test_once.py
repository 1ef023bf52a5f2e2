"""A claim (of an insight finding, of a signed request's nonce) is stored once, whichever claimant's insert the
engine sees first: a claim timed earlier but stored after another claimant read back its own is dropped."""

from __future__ import annotations

import time

import pyarrow as pa

from jobpulse.store import Store
from jobpulse.store.nonces import Nonces
from jobpulse.store.once import kept_once

# an hour ago: before any claim made now, and kept by the tables' TTL
EARLIER = pa.array([(time.time_ns() // 1000) - 3_600_000_000], pa.int64()).cast(pa.timestamp("us"))
EXPIRES = pa.array([4_102_444_800_000], pa.int64()).cast(pa.timestamp("ms"))  # 2100


def _claims(store: Store, table: str, where: str, params: dict) -> list[str]:
    rows = store.engine.query(f"SELECT claim FROM {store.database}.{table} WHERE {where}", params)
    return rows.column("claim").to_pylist()


def test_a_finding_claimed_at_once_by_two_replicas_is_claimed_once(any_store: Store) -> None:
    name = "open:job-1:idle_gpu"
    assert any_store.findings.claim(name)
    # the other replica's claim: timed before the first one, stored after the first was read back
    late = pa.table({"name": [name], "claim": ["other"], "claimed": EARLIER})
    any_store.engine.insert(f"{any_store.database}.insight_claims", late, kept_once("insight-claim", name))
    stored = _claims(any_store, "insight_claims", "name = {n:String}", {"n": name})
    assert len(stored) == 1 and stored != ["other"]
    assert not any_store.findings.claim(name)


def test_a_nonce_shown_at_once_by_two_requests_is_claimed_once(any_store: Store) -> None:
    nonces = Nonces(any_store.engine, any_store.database)
    expires = EXPIRES[0].value
    assert nonces.claim("key-1", "nonce-1", expires)
    late = pa.table(
        {"key_id": ["key-1"], "nonce": ["nonce-1"], "claim": ["other"], "claimed": EARLIER, "expires": EXPIRES}
    )
    settings = kept_once("signature-nonce", "key-1", "nonce-1")
    any_store.engine.insert(f"{any_store.database}.signature_nonces", late, settings)
    where, params = "key_id = {k:String} AND nonce = {n:String}", {"k": "key-1", "n": "nonce-1"}
    stored = _claims(any_store, "signature_nonces", where, params)
    assert len(stored) == 1 and stored != ["other"]
    assert not nonces.claim("key-1", "nonce-1", expires)
    assert nonces.claim("key-1", "nonce-2", expires)
