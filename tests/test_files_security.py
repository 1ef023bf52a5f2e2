"""Uploaded files never run in the UI's origin: inline only as an allow-listed raster image recognised by its bytes,
anything else a sandboxed download; the same on the native route and on the ClearML files host."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from starlette.testclient import TestClient

from jobpulse.server.headers import disposition, user_content_headers
from jobpulse.store import Store

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01"
GIF = b"GIF89a\x01\x00\x01\x00\x80\x00\x00"
WEBP = b"RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00"
SCRIPT = b"<script>fetch('/jp/v1/keys',{method:'POST',body:JSON.stringify({role:'admin'})})</script>"
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.cookie)</script></svg>'


def assert_download(answer: Any, filename: str) -> None:
    assert answer.status_code == 200
    assert answer.headers["content-disposition"] == f'attachment; filename="{filename}"'
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["content-security-policy"].startswith("sandbox; default-src 'none'")
    assert not answer.headers["content-type"].startswith(("text/html", "image/"))


def assert_inline_image(answer: Any, media: str) -> None:
    assert answer.status_code == 200
    assert answer.headers["content-type"] == media
    assert answer.headers["content-disposition"].startswith("inline; ")
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["content-security-policy"].startswith("sandbox; default-src 'none'")


@pytest.fixture
def writer(client: TestClient, make_key: Callable[[list[str], str], str]) -> dict[str, str]:
    """The headers of a key that may write project ``proj``, where job ``J`` exists."""
    assert client.post("/jp/v1/jobs", json={"project": "proj", "job": "J"}).status_code == 201
    return {"Authorization": f"Bearer {make_key(['proj'], 'write')}"}


@pytest.fixture
def admin_browser(app: Any, store: Store, admin_token: str) -> TestClient:
    """A browser signed in to the UI as an admin: the session cookie, no Authorization header."""
    browser = TestClient(app)
    browser.cookies.set("jobpulse_session", app.state.ctx.access.session_for(store.keys.verify(admin_token).key_id))
    return browser


def test_a_writers_html_file_opened_by_an_admin_is_a_sandboxed_download(
    client: TestClient, writer: dict[str, str], admin_browser: TestClient
) -> None:
    assert client.put("/jp/v1/jobs/J/files/x.html", content=SCRIPT, headers=writer).status_code == 201
    answer = admin_browser.get("/jp/v1/jobs/J/files/x.html")
    assert_download(answer, "x.html")
    assert answer.headers["content-type"] == "application/octet-stream"
    assert answer.content == SCRIPT  # the bytes are unchanged; only how a browser treats them is


def test_an_svg_is_never_inline(client: TestClient, writer: dict[str, str]) -> None:
    client.put("/jp/v1/jobs/J/files/plots/chart.svg", content=SVG, headers=writer)
    answer = client.get("/jp/v1/jobs/J/files/plots/chart.svg")
    assert_download(answer, "chart.svg")
    assert answer.headers["content-type"] == "application/octet-stream"


@pytest.mark.parametrize(
    ("name", "data", "media"),
    [
        ("a.png", PNG, "image/png"),
        ("a.jpg", JPEG, "image/jpeg"),
        ("a.gif", GIF, "image/gif"),
        ("a.bin", WEBP, "image/webp"),
    ],
)
def test_a_raster_image_is_inline_as_the_type_its_bytes_say(
    client: TestClient, writer: dict[str, str], name: str, data: bytes, media: str
) -> None:
    client.put(f"/jp/v1/jobs/J/files/{name}", content=data, headers=writer)
    answer = client.get(f"/jp/v1/jobs/J/files/{name}")
    assert_inline_image(answer, media)
    assert answer.content == data


def test_html_named_png_is_not_inline(client: TestClient, writer: dict[str, str]) -> None:
    client.put("/jp/v1/jobs/J/files/x.png", content=b"<html><body>" + SCRIPT, headers=writer)
    answer = client.get("/jp/v1/jobs/J/files/x.png")
    assert_download(answer, "x.png")
    assert answer.headers["content-type"] == "application/octet-stream"


def test_a_png_named_html_is_served_as_the_image_it_is(client: TestClient, writer: dict[str, str]) -> None:
    client.put("/jp/v1/jobs/J/files/x.html", content=PNG, headers=writer)
    assert_inline_image(client.get("/jp/v1/jobs/J/files/x.html"), "image/png")


def test_a_text_file_downloads_as_text(client: TestClient, writer: dict[str, str]) -> None:
    client.put("/jp/v1/jobs/J/files/notes/run config.txt", content=b"lr=0.1\n", headers=writer)
    answer = client.get("/jp/v1/jobs/J/files/notes/run config.txt")
    assert_download(answer, "run config.txt")
    assert answer.headers["content-type"].startswith("text/plain")


def clearml_upload(client: TestClient, path: str, data: bytes, headers: dict[str, str]) -> Any:
    return client.post("/clearml/files", files={path: (path, data, "image/png")}, headers=headers)


def test_the_clearml_files_host_serves_html_as_a_sandboxed_download(client: TestClient, writer: dict[str, str]) -> None:
    assert clearml_upload(client, "/proj/run.J/metrics/m/v/x.html", SCRIPT, writer).status_code == 200
    assert_download(client.get("/clearml/files/proj/run.J/metrics/m/v/x.html"), "x.html")
    assert clearml_upload(client, "/proj/run.J/metrics/m/v/x.svg", SVG, writer).status_code == 200
    assert_download(client.get("/clearml/files/proj/run.J/metrics/m/v/x.svg"), "x.svg")
    assert clearml_upload(client, "/proj/run.J/metrics/m/v/fake.png", SCRIPT, writer).status_code == 200
    assert_download(client.get("/clearml/files/proj/run.J/metrics/m/v/fake.png"), "fake.png")


def test_the_clearml_files_host_serves_a_debug_image_inline(client: TestClient, writer: dict[str, str]) -> None:
    assert clearml_upload(client, "/proj/run.J/metrics/m/v/img_v_00000001.png", PNG, writer).status_code == 200
    url = "/clearml/files/proj/run.J/metrics/m/v/img_v_00000001.png"
    assert_inline_image(client.get(url), "image/png")
    head = client.head(url)
    assert head.status_code == 200 and head.headers["content-type"] == "image/png"
    assert head.headers["x-content-type-options"] == "nosniff"


def test_a_download_names_the_file_safely_whatever_its_name() -> None:
    assert disposition("attachment", "dir/report.html") == 'attachment; filename="report.html"'
    assert disposition("attachment", 'a"b\\c\r\nd\u00e9.txt') == (
        "attachment; filename=\"a_b_c__d_.txt\"; filename*=UTF-8''a%22b%5Cc%0D%0Ad%C3%A9.txt"
    )
    assert disposition("inline", "dir/") == 'inline; filename="file"'


@pytest.mark.parametrize(
    "name", ["page.htm", "page.xhtml", "feed.xml", "app.js", "style.xsl", "pic.svg", "pic.png", "pic.bmp", "noext"]
)
def test_no_active_or_unverified_image_type_is_ever_answered(name: str) -> None:
    media, headers = user_content_headers(name, b"<html><script>x</script>")
    assert media == "application/octet-stream"
    assert headers["Content-Disposition"].startswith("attachment; ")
