"""The UI's pages, assets and error pages over the in-process app (no browser needed)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from jobpulse.store import Job, Store
from jobpulse.ui import assets

JOB = Job(job="run-1", project="vision", name="ResNet <b>bold</b>")


@pytest.fixture
def signed(app, admin_token: str, store: Store) -> TestClient:  # noqa: ANN001
    """A browser-like client: a session cookie, no Authorization header."""
    store.jobs.create(JOB)
    client = TestClient(app)
    key = store.keys.verify(admin_token)
    client.cookies.set("jobpulse_session", app.state.ctx.access.session_for(key.key_id))
    return client


def static_urls(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="(/ui/[^"]+)"', html)


@pytest.mark.parametrize("path", ["/", "/jobs/run-1", "/jobs/run-1/logs", "/compare?jobs=run-1"])
def test_a_page_without_a_session_is_the_sign_in_page(anonymous: TestClient, path: str) -> None:
    response = anonymous.get(path)
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("text/html")
    assert "Sign in to jobpulse" in response.text
    assert 'action="/jp/v1/session"' in response.text
    assert f'name="next" value="{path.replace("&", "&amp;")}"' in response.text


def test_a_page_shell_names_its_module_and_escapes_the_job(signed: TestClient) -> None:
    response = signed.get("/jobs/run-1")
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    assert re.search(r'<script type="module" src="/ui/static/[0-9a-f]{12}/job\.js">', response.text)
    assert "<b>bold</b>" not in response.text
    assert "ResNet \\u003cb\\u003ebold" in response.text  # boot JSON, not markup
    # Plotly.js only as a URL for the plots the job reported, loaded when one is shown: not fetched with the page
    assert re.search(r'"plotly":"/ui/static/[0-9a-f]{12}/third-party/plotly\.min\.js"', response.text)
    assert not any("plotly" in url for url in static_urls(response.text))


def test_the_logs_and_jobs_pages_load_no_chart_library(signed: TestClient) -> None:
    for path, module in (("/", "jobs.js"), ("/jobs/run-1/logs", "logs.js")):
        html = signed.get(path).text
        assert any(url.endswith(module) for url in static_urls(html))
        assert "plotly.min.js" not in html and "uPlot" not in html


def test_the_chart_pages_load_uplot_and_no_plotly(signed: TestClient) -> None:
    for path in ("/jobs/run-1", "/compare?jobs=run-1"):
        urls = static_urls(signed.get(path).text)
        assert any(url.endswith("/third-party/uPlot.esm.js") for url in urls), path  # preloaded as a module
        assert any(url.endswith("/third-party/uPlot.min.css") for url in urls), path
        assert not any("plotly" in url for url in urls), path
    assert "plotly.min.js" not in signed.get("/compare?jobs=run-1").text


def test_a_chart_page_without_the_built_chart_library_says_how_to_build_it(
    signed: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unbuilt = tmp_path / "static"
    shutil.copytree(assets.STATIC_DIR, unbuilt, ignore=shutil.ignore_patterns("third-party"))
    monkeypatch.setattr(assets, "STATIC_DIR", unbuilt)
    assets.module_deps.cache_clear()
    try:
        for path in ("/jobs/run-1", "/compare"):
            response = signed.get(path)
            assert response.status_code == 503, path
            assert "python web-assets/build.py" in response.text and "third-party/uPlot.esm.js" in response.text
            assert '<script type="module"' not in response.text
        assert signed.get("/").status_code == 200  # the jobs list needs no charts
    finally:
        assets.module_deps.cache_clear()


def test_every_static_file_a_page_names_is_served(signed: TestClient) -> None:
    for path in ("/", "/jobs/run-1", "/jobs/run-1/logs", "/compare"):
        for url in static_urls(signed.get(path).text):
            response = signed.get(url)
            assert response.status_code == 200, url
            assert response.content


def test_js_modules_import_only_files_that_exist(signed: TestClient) -> None:
    prefix = re.search(r"/ui/static/[0-9a-f]{12}", signed.get("/").text).group(0)
    seen, todo = set(), ["jobs.js", "job.js", "logs.js", "compare.js", "login.js"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        response = signed.get(f"{prefix}/{name}")
        assert response.status_code == 200, name
        assert response.headers["content-type"].startswith("text/javascript")
        todo += re.findall(r'from "\./([\w./-]+\.js)"', response.text)
    assert {"api.js", "dom.js", "scalars.js", "system-charts.js", "logview.js", "plot.js", "heatmap.js"} <= seen
    assert "third-party/uPlot.esm.js" in seen  # the chart library, built into the package


def test_static_files_are_cached_and_revalidated(signed: TestClient) -> None:
    prefix = re.search(r"/ui/static/[0-9a-f]{12}", signed.get("/").text).group(0)
    first = signed.get(f"{prefix}/style.css", headers={"Accept-Encoding": "gzip"})
    assert first.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert first.headers["content-encoding"] == "gzip"
    assert ":root" in first.text
    again = signed.get(f"{prefix}/style.css", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    stale = signed.get("/ui/static/000000000000/style.css")
    assert stale.status_code == 200 and stale.headers["cache-control"] == "no-cache"


def test_plotly_is_served_compressed(anonymous: TestClient) -> None:
    url = f"/ui/static/{assets.version()}/{assets.PLOTLY}"
    response = anonymous.get(url, headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200
    assert response.headers["content-encoding"] == "gzip"
    assert int(response.headers["content-length"]) < 2_000_000
    assert "plotly.js v" in response.text[:200]  # the client undoes the gzip
    plain = anonymous.get(url, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert len(plain.content) > 3_000_000


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/jobs/nope", 404, "job &#x27;nope&#x27; does not exist"),
        ("/jobs/nope/logs", 404, "job &#x27;nope&#x27; does not exist"),
        ("/jobs/bad%20id!", 400, "&#x27;job&#x27; must be 1-128 letters"),
        ("/login?token=forged.token", 400, "token"),
        ("/ui/static/abc/missing.js", 404, "no UI file"),
        ("/jobs/run-1/elsewhere", 404, "no such endpoint"),
    ],
)
def test_every_ui_error_is_a_plain_html_page(signed: TestClient, path: str, status: int, message: str) -> None:
    response = signed.get(path)
    assert response.status_code == status
    assert response.headers["content-type"].startswith("text/html")
    assert f'<div class="status-code">{status}</div>' in response.text
    assert message in response.text
    assert "Traceback" not in response.text and 'File "' not in response.text
    assert 'href="/"' in response.text


def test_a_used_login_link_says_so(app, anonymous: TestClient, store: Store) -> None:  # noqa: ANN001
    key, _ = store.keys.create("admin", ["*"], "admin")
    token = app.state.ctx.access.login_url(key.key_id).split("token=")[1]
    first = anonymous.get(f"/login?token={token}", follow_redirects=False)
    assert first.status_code == 303 and "jobpulse_session" in first.headers["set-cookie"]
    again = anonymous.get(f"/login?token={token}", follow_redirects=False)
    assert again.status_code == 401
    assert "has been used already" in again.text and again.headers["content-type"].startswith("text/html")


def test_api_errors_keep_the_native_json_shape(signed: TestClient) -> None:
    response = signed.get("/jp/v1/jobs/nope")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_the_session_cookie_reads_the_api(signed: TestClient) -> None:
    response = signed.get("/jp/v1/jobs/run-1")
    assert response.status_code == 200
    assert response.json()["job"]["name"] == JOB.name
