"""Uploaded files opened in a signed-in browser tab: an image shows, a page or an SVG downloads and runs nothing."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from uitools import DEMO, call, error_checked

from jobpulse.testing import ServerProcess

pytestmark = pytest.mark.e2e

# What a project writer would upload to take over an admin's session, were the file shown inline.
MINT_ADMIN_KEY = (
    "fetch('/jp/v1/keys',{method:'POST',credentials:'same-origin',headers:{'Content-Type':'application/json'},"
    "body:JSON.stringify({name:'stolen',projects:['*'],role:'admin'})})"
)
ATTACKS = {
    "evil.html": f"<!doctype html><script>{MINT_ADMIN_KEY}</script>".encode(),
    "evil.svg": f'<svg xmlns="http://www.w3.org/2000/svg"><script>{MINT_ADMIN_KEY}</script></svg>'.encode(),
    "evil.png": f"<html><body><script>{MINT_ADMIN_KEY}</script></body></html>".encode(),
}


def key_names(server: ServerProcess) -> list[str]:
    status, body = call(server, "GET", "/jp/v1/keys")
    assert status == 200, body
    return sorted(key["name"] for key in body["keys"])


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_uploaded_page_opened_by_a_signed_in_admin_downloads_and_runs_nothing(
    signed_context: Any, ui_server: ServerProcess, name: str
) -> None:
    path = f"/jp/v1/jobs/{DEMO}/files/uploads/{name}"
    status, _ = call(ui_server, "PUT", path, raw=ATTACKS[name], content_type="application/octet-stream")
    assert status == 201
    keys_before = key_names(ui_server)
    with error_checked(signed_context.new_page()) as tab:
        # navigating to a download aborts the navigation, hence the suppressed error
        with tab.expect_download() as download, contextlib.suppress(Exception):
            tab.goto(path)
        assert download.value.suggested_filename == name
        tab.wait_for_timeout(300)  # time a script would have had to send its request
        tab.close()
    assert key_names(ui_server) == keys_before
    assert "stolen" not in keys_before


def test_a_debug_image_opens_in_a_tab_as_an_image(signed_context: Any) -> None:
    with error_checked(signed_context.new_page()) as tab:
        response = tab.goto(f"/jp/v1/jobs/{DEMO}/files/samples/batch-3000.png")
        assert response is not None and response.status == 200
        assert response.headers["content-type"] == "image/png"
        tab.wait_for_function("() => document.images.length === 1 && document.images[0].naturalWidth === 64")
        tab.close()
