"""Uploaded files live in the store: read back byte-exact, streamed a chunk at a time, and files from before the
upgrade (in the server's files directory) still served, counted and deletable."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from jobpulse.settings import Settings
from jobpulse.store.files import CHUNK_BYTES

THREE_MIB = bytes(range(256)) * (3 * 4096) + b"\x00tail"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(24)


@pytest.fixture
def job(client: TestClient) -> str:
    assert client.post("/jp/v1/jobs", json={"project": "proj", "job": "J"}).status_code == 201
    return "J"


@pytest.fixture
def legacy_file(settings: Settings, job: str) -> str:
    """A file written by a server of before the upgrade: in ``<files_dir>/<job>/<name>``, not in the store."""
    path = settings.files_dir / job / "samples" / "old.png"
    path.parent.mkdir(parents=True)
    path.write_bytes(PNG)
    return f"/jp/v1/jobs/{job}/files/samples/old.png"


def test_a_three_mebibyte_file_round_trips_byte_exact(client: TestClient, job: str) -> None:
    uploaded = client.put(f"/jp/v1/jobs/{job}/files/out/model.bin", content=THREE_MIB)
    assert uploaded.status_code == 201 and uploaded.json()["bytes"] == len(THREE_MIB)
    answer = client.get(uploaded.json()["url"], headers={"Accept-Encoding": "identity"})
    assert answer.status_code == 200
    assert answer.headers["content-length"] == str(len(THREE_MIB))
    assert answer.content == THREE_MIB


def test_a_download_is_sent_a_chunk_at_a_time(client: TestClient, job: str) -> None:
    client.put(f"/jp/v1/jobs/{job}/files/out/model.bin", content=THREE_MIB)
    with client.stream("GET", f"/jp/v1/jobs/{job}/files/out/model.bin", headers={"Accept-Encoding": "identity"}) as r:
        pieces = list(r.iter_raw())
    assert b"".join(pieces) == THREE_MIB
    assert len(pieces) >= 4 and max(len(piece) for piece in pieces) <= CHUNK_BYTES


def test_a_file_uploaded_again_replaces_the_one_before(client: TestClient, job: str) -> None:
    client.put(f"/jp/v1/jobs/{job}/files/a.png", content=THREE_MIB)
    client.put(f"/jp/v1/jobs/{job}/files/a.png", content=PNG)
    answer = client.get(f"/jp/v1/jobs/{job}/files/a.png")
    assert (answer.headers["content-type"], answer.content) == ("image/png", PNG)
    assert client.get(f"/jp/v1/jobs/{job}/usage").json()["files"] == {"files": 1, "bytes": len(PNG)}


def test_a_file_only_in_the_old_files_directory_is_still_served(client: TestClient, legacy_file: str) -> None:
    answer = client.get(legacy_file)
    assert answer.status_code == 200
    assert (answer.headers["content-type"], answer.content) == ("image/png", PNG)


def test_an_upload_of_an_old_files_name_is_served_from_the_store(
    client: TestClient, legacy_file: str, settings: Settings
) -> None:
    assert client.put(legacy_file, content=b"new bytes").status_code == 201
    assert client.get(legacy_file).content == b"new bytes"
    assert (settings.files_dir / "J" / "samples" / "old.png").read_bytes() == PNG  # left as it was


def test_usage_counts_the_old_directorys_files_and_each_name_once(client: TestClient, legacy_file: str) -> None:
    client.put("/jp/v1/jobs/J/files/new.bin", content=b"12345")
    assert client.get("/jp/v1/jobs/J/usage").json()["files"] == {"files": 2, "bytes": len(PNG) + 5}
    client.put(legacy_file, content=b"1")
    assert client.get("/jp/v1/jobs/J/usage").json()["files"] == {"files": 2, "bytes": 6}


def test_deleting_the_job_removes_its_files_old_and_new(
    client: TestClient, legacy_file: str, settings: Settings
) -> None:
    client.put("/jp/v1/jobs/J/files/new.bin", content=b"12345")
    assert client.delete("/jp/v1/jobs/J").status_code == 200
    assert not (settings.files_dir / "J").exists()
    assert client.app.state.ctx.store.files.listing("J") == []


def test_a_file_deleted_through_the_clearml_files_host_is_gone_from_store_and_old_directory(
    client: TestClient, job: str, settings: Settings
) -> None:
    old = settings.files_dir / job / "metrics" / "m" / "v" / "x.png"
    old.parent.mkdir(parents=True)
    old.write_bytes(PNG)
    url = f"/clearml/files/proj/run.{job}/metrics/m/v/x.png"
    assert client.get(url).content == PNG
    upload = client.post("/clearml/files", files={f"/proj/run.{job}/metrics/m/v/x.png": ("x.png", b"newer")})
    assert upload.status_code == 200
    assert client.get(url).content == b"newer"
    assert client.delete(url).status_code == 200
    assert not old.exists()
    assert client.get(url).status_code == 404
    assert client.delete(url).status_code == 404
