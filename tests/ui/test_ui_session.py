"""Signing in with the form, the UI's own changes, and signing out, in headless Chromium against a real server:
the browser's own Origin and Sec-Fetch-Site headers pass the server's cross-site check."""

from __future__ import annotations

from typing import Any

import pytest
from uitools import DEMO, error_checked

from jobpulse.testing import ServerProcess

pytestmark = pytest.mark.e2e


def test_sign_in_post_and_sign_out_work_and_the_old_cookie_is_refused(browser: Any, ui_server: ServerProcess) -> None:
    context = browser.new_context(base_url=ui_server.url)
    try:
        with error_checked(context.new_page()) as tab:
            assert tab.goto("/").status == 401
            tab.get_by_label("API key").fill(ui_server.api_key)
            with tab.expect_response(lambda r: r.url.endswith("/jp/v1/scalars/latest")) as latest:
                tab.get_by_role("button", name="Sign in").click()
                tab.locator(f'tr[data-job="{DEMO}"]').wait_for()
            assert latest.value.request.method == "POST" and latest.value.status == 200
            cookies = context.cookies()
            assert [c["name"] for c in cookies] == ["jobpulse_session"]
            with tab.expect_navigation():
                tab.get_by_role("button", name="Sign out").click()
            tab.get_by_text("Sign in to jobpulse").wait_for()
        replayed = browser.new_context(base_url=ui_server.url)
        try:
            replayed.add_cookies(cookies)
            again = replayed.new_page()
            assert again.goto("/").status == 401
            again.get_by_text("Your session has ended").wait_for()
            assert replayed.request.get("/jp/v1/keys").status == 401
        finally:
            replayed.close()
    finally:
        context.close()
