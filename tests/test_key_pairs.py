"""Access key pairs: made and listed like other keys, their secret sealed at rest with the server's master key,
refused at once when revoked, and still working after the master key is rotated."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import httpx
import pytest
from alibabacloud_pai_dlc20201203 import models as pai_models
from alibabacloud_pai_dlc20201203.client import Client as PaiClient
from alibabacloud_tea_openapi.exceptions import ClientException
from alibabacloud_tea_openapi.models import Config

from jobpulse.cli.server import bootstrap_master_key
from jobpulse.server.master_key import Keyring, MasterKeyError, fingerprint, read_keys
from jobpulse.store.nonces import Nonces
from jobpulse.testing import running_server


def make_pair(client, projects=("vision",), role="read") -> dict:  # noqa: ANN001 - a TestClient or httpx.Client
    answer = client.post(
        "/jp/v1/keys", json={"name": "for an SDK", "projects": list(projects), "role": role, "pair": True}
    )
    assert answer.status_code == 201, answer.text
    return answer.json()


def stored_rows(store, table: str) -> list[dict]:  # noqa: ANN001 - Store
    return store.engine.query(f"SELECT * FROM {store.database}.{table}").to_pylist()


def test_a_pair_has_an_access_key_id_a_secret_a_scope_and_a_role(client):
    made = make_pair(client, projects=["vision", "nlp"], role="write")
    key = made["key"]
    assert made["access_key_id"] == key["key_id"] and key["key_id"].startswith("JPAK") and len(key["key_id"]) == 20
    assert len(made["access_key_secret"]) == 40 and made["access_key_secret"].isalnum()
    assert (key["kind"], key["projects"], key["role"], key["revoked"]) == ("pair", ["vision", "nlp"], "write", None)


def test_a_pair_is_listed_like_other_keys_and_its_secret_never_again(client):
    made = make_pair(client)
    listed = client.get("/jp/v1/keys")
    assert listed.status_code == 200
    mine = [k for k in listed.json()["keys"] if k["key_id"] == made["access_key_id"]]
    assert mine == [made["key"]]
    assert made["access_key_secret"] not in listed.text


def test_the_secret_is_stored_sealed_with_the_master_key_made_on_first_use(client, store, settings):
    made = make_pair(client)
    secret, key_id = made["access_key_secret"], made["access_key_id"]
    rows = [row for table in ("api_keys", "key_pair_secrets") for row in stored_rows(store, table)]
    assert rows and all(secret not in str(value) for row in rows for value in row.values())
    [row] = [row for row in stored_rows(store, "key_pair_secrets") if row["key_id"] == key_id]
    path = settings.data_dir / "master.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert row["master_key"] == fingerprint(read_keys(path)[0]) and row["sealed_secret"].startswith("v1.")
    assert Keyring.load(path, create=False).open(row["sealed_secret"], key_id, row["master_key"]) == secret


def test_a_sealed_secret_opens_only_on_the_row_of_its_own_pair(tmp_path):
    ring = Keyring.load(tmp_path / "master.key")
    sealed, master_key = ring.seal("s3cret", "JPAKAAAAAAAAAAAAAAAA")
    assert ring.open(sealed, "JPAKAAAAAAAAAAAAAAAA", master_key) == "s3cret"
    with pytest.raises(MasterKeyError, match="does not open"):
        ring.open(sealed, "JPAKBBBBBBBBBBBBBBBB", master_key)
    with pytest.raises(MasterKeyError, match="does not hold that key"):
        ring.open(sealed, "JPAKAAAAAAAAAAAAAAAA", "0" * 16)


def test_a_revoked_pairs_sealed_secret_is_erased(client, store):
    made = make_pair(client)
    assert client.delete(f"/jp/v1/keys/{made['access_key_id']}").json()["key"]["revoked"] is not None
    mine = [r for r in stored_rows(store, "key_pair_secrets") if r["key_id"] == made["access_key_id"]]
    latest = max(mine, key=lambda r: r["version"])
    assert (latest["sealed_secret"], latest["master_key"]) == ("", "")


def test_a_nonce_is_claimed_once_per_key_on_every_transport(any_store):
    nonces = Nonces(any_store.engine, any_store.database)
    until = 1_800_000_000_000
    assert nonces.claim("JPAKAAAAAAAAAAAAAAAA", "n-1", until)
    assert not nonces.claim("JPAKAAAAAAAAAAAAAAAA", "n-1", until)  # the same request again
    assert nonces.claim("JPAKBBBBBBBBBBBBBBBB", "n-1", until)  # another key's nonce is its own
    assert nonces.claim("JPAKAAAAAAAAAAAAAAAA", "n-2", until)


def test_pair_must_be_true_or_false(client):
    answer = client.post("/jp/v1/keys", json={"name": "x", "projects": ["vision"], "pair": "yes"})
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "pair"


def test_only_an_admin_key_makes_pairs(anonymous, make_key):
    writer = make_key(["vision"], "write")
    answer = anonymous.post(
        "/jp/v1/keys",
        json={"name": "x", "projects": ["vision"], "pair": True},
        headers={"Authorization": f"Bearer {writer}"},
    )
    assert answer.status_code == 403


def test_a_malformed_master_key_file_stops_the_server_at_start_naming_it(settings):
    path = settings.data_dir / "master.key"
    path.write_text("not a key\n")
    with pytest.raises(ValueError, match=rf"master key: {path}, line 1: a master key is 64 hexadecimal digits"):
        bootstrap_master_key(settings)


# -- through the Alibaba Cloud SDK, against real server processes ------------------------------------------


def admin(server) -> httpx.Client:  # noqa: ANN001 - ServerProcess
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.api_key}"}, timeout=30)


def pai_call(server, pair: dict, job: str) -> object:  # noqa: ANN001 - ServerProcess
    config = Config(
        endpoint=server.url.split("://", 1)[1],
        protocol="http",
        access_key_id=pair["access_key_id"],
        access_key_secret=pair["access_key_secret"],
    )
    return PaiClient(config).get_job_metrics(job, pai_models.GetJobMetricsRequest(metric_type="CpuCoreUsage"))


def test_a_revoked_pair_is_refused_at_once(server):
    with admin(server) as api:
        assert api.post("/jp/v1/jobs", json={"project": "pairs-revoke", "job": "pairs-revoke-1"}).status_code == 201
        pair = make_pair(api, projects=["pairs-revoke"])
        assert pai_call(server, pair, "pairs-revoke-1").body.job_id == "pairs-revoke-1"
        assert api.delete(f"/jp/v1/keys/{pair['access_key_id']}").status_code == 200
    with pytest.raises(ClientException) as caught:
        pai_call(server, pair, "pairs-revoke-1")
    assert (caught.value.status_code, caught.value.code) == (401, "InvalidAccessKeyId.Inactive")
    assert "has been revoked" in caught.value.message


def jobpulse_cli(server, *args: str) -> subprocess.CompletedProcess:  # noqa: ANN001 - ServerProcess
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBPULSE_")}
    argv = [sys.executable, "-m", "jobpulse", *args, "--url", server.url, "--api-key", server.api_key]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


def test_the_cli_makes_a_pair_that_the_sdk_signs_with_and_lists_it(server):
    with admin(server) as api:
        assert api.post("/jp/v1/jobs", json={"project": "pairs-cli", "job": "pairs-cli-1"}).status_code == 201
    made = jobpulse_cli(server, "keys", "create", "--pair", "--name", "dashboard", "--project", "pairs-cli")
    assert made.returncode == 0, made.stderr
    lines = made.stdout.splitlines()
    assert lines[0].startswith("created key pair JPAK") and lines[0].endswith("(read on pairs-cli)")
    pair = {line.split(":", 1)[0].replace(" ", "_"): line.split(":", 1)[1].strip() for line in lines[1:]}
    assert set(pair) == {"access_key_id", "access_key_secret"}
    assert pai_call(server, pair, "pairs-cli-1").body.job_id == "pairs-cli-1"
    listed = jobpulse_cli(server, "keys", "list")
    [row] = [line for line in listed.stdout.splitlines() if line.startswith(pair["access_key_id"])]
    assert row.split()[1:4] == ["pair", "read", "active"] and pair["access_key_secret"] not in listed.stdout


def test_a_pair_sees_only_its_projects(server):
    with admin(server) as api:
        assert api.post("/jp/v1/jobs", json={"project": "pairs-other", "job": "pairs-other-1"}).status_code == 201
        pair = make_pair(api, projects=["pairs-mine"])
    with pytest.raises(ClientException) as caught:
        pai_call(server, pair, "pairs-other-1")
    assert (caught.value.status_code, caught.value.code) == (404, "JobNotFound")


def master_key_command(server, *args: str) -> subprocess.CompletedProcess:  # noqa: ANN001 - ServerProcess
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBPULSE_")}
    argv = [sys.executable, "-m", "jobpulse", "master-key", *args, "--data-dir", str(server.data_dir)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


def test_rotating_the_master_key_keeps_pairs_working(tmp_path):
    with running_server(tmp_path) as server:
        assert "created the master key" in server.output()
        with admin(server) as api:
            assert api.post("/jp/v1/jobs", json={"project": "rotation", "job": "rotation-1"}).status_code == 201
            pair = make_pair(api, projects=["rotation"])
        assert pai_call(server, pair, "rotation-1").status_code == 200
        busy = master_key_command(server, "rotate")
        assert busy.returncode == 2 and "stop the server that uses it first" in busy.stderr
        old = fingerprint(read_keys(server.data_dir / "master.key")[0])
        server.stop()
        rotated = master_key_command(server, "rotate")
        assert rotated.returncode == 0, rotated.stderr
        keys = read_keys(server.data_dir / "master.key")
        new = fingerprint(keys[0])
        assert len(keys) == 1 and new != old
        assert f"re-sealed 1 access key pair secret(s) with the new master key {new}" in rotated.stdout
        shown = master_key_command(server, "show")
        assert f"seals with {new}; opens with {new}" in shown.stdout
        server.start()
        assert pai_call(server, pair, "rotation-1").status_code == 200
