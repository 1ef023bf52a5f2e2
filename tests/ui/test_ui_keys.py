"""The keys page in headless Chromium: an admin creates a token and an access key pair, sees each secret once,
revokes a key; the header links the page for admins only, and a non-admin is refused."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from uitools import call, error_checked, screenshot

from jobpulse.testing import ServerProcess

pytestmark = pytest.mark.e2e


def _status_with(server: ServerProcess, token: str) -> int:
    """The status of listing jobs with ``token`` as the bearer."""
    request = urllib.request.Request(server.url + "/jp/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _create(page: Any, name: str, projects: str, role: str, kind: str) -> None:
    page.goto("/keys")
    page.get_by_label("Name").fill(name)
    page.get_by_label("Projects").fill(projects)
    page.get_by_label("Role").select_option(role)
    page.get_by_label("Kind").select_option(kind)
    page.get_by_role("button", name="Create key").click()
    page.locator(".key-secret:not([hidden])").wait_for()


@pytest.fixture
def clipboard_page(signed_context: Any, ui_server: ServerProcess) -> Iterator[Any]:
    signed_context.grant_permissions(["clipboard-read", "clipboard-write"], origin=ui_server.url)
    with error_checked(signed_context.new_page()) as tab:
        yield tab
        tab.close()
    signed_context.clear_permissions()


def test_a_token_is_shown_once_with_a_copy_button_and_works(clipboard_page: Any, ui_server: ServerProcess) -> None:
    page = clipboard_page
    _create(page, "nodes of team A", "vision, nlp", "write", "token")
    token = page.locator(".secret-token").inner_text()
    assert token.startswith("jp_")
    assert "shown only this once" in page.locator(".key-secret").inner_text()
    page.get_by_role("button", name="Copy token").click()
    assert page.evaluate("() => navigator.clipboard.readText()") == token
    assert _status_with(ui_server, token) == 200
    row = page.locator("tr", has_text="nodes of team A")
    assert "token" in row.inner_text() and "vision, nlp" in row.inner_text() and "write" in row.inner_text()
    screenshot(page, "keys-created.png")
    page.reload()
    page.locator("tr", has_text="nodes of team A").wait_for()
    assert token not in page.content()
    assert page.locator(".key-secret").is_hidden()


def test_an_access_key_pair_shows_its_id_and_secret(page: Any, ui_server: ServerProcess) -> None:
    _create(page, "pai signer", "*", "read", "pair")
    key_id = page.locator(".secret-id").inner_text()
    secret = page.locator(".secret-pair").inner_text()
    assert key_id and len(secret) >= 16
    status, body = call(ui_server, "GET", "/jp/v1/keys")
    assert status == 200
    [listed] = [k for k in body["keys"] if k["name"] == "pai signer"]
    assert listed["kind"] == "pair" and listed["projects"] == ["*"]
    row = page.locator(f'tr[data-key="{listed["key_id"]}"]')
    assert "access key pair" in row.inner_text() and "all projects" in row.inner_text()
    assert secret not in str(body)


def test_revoking_asks_first_and_ends_the_key(page: Any, ui_server: ServerProcess) -> None:
    status, body = call(ui_server, "POST", "/jp/v1/keys", {"name": "to revoke", "projects": ["p1"], "role": "read"})
    assert status == 201
    key_id, token = body["key"]["key_id"], body["token"]
    page.goto("/keys")
    row = page.locator(f'tr[data-key="{key_id}"]')
    row.get_by_role("button", name="Revoke to revoke").click()
    confirm = row.get_by_role("group", name="Confirm revoking")
    assert "stop working" in confirm.inner_text()
    assert _status_with(ui_server, token) == 200  # nothing happens before the confirmation
    confirm.get_by_role("button", name="Revoke").click()
    page.locator(f'tr.revoked[data-key="{key_id}"]').wait_for()
    assert "revoked" in page.locator(f'tr[data-key="{key_id}"]').inner_text().lower()
    assert _status_with(ui_server, token) == 401


def test_a_bad_grant_is_named_in_the_form(page: Any) -> None:
    page.goto("/keys")
    page.get_by_label("Name").fill("bad project")
    page.get_by_label("Projects").fill("not a project!")
    page.get_by_role("button", name="Create key").click()
    error = page.locator(".key-form .form-error:not([hidden])")
    error.wait_for()
    assert "project" in error.inner_text().lower()
    assert page.locator(".key-secret").is_hidden()


def test_the_header_links_the_keys_page_for_an_admin(page: Any) -> None:
    page.goto("/")
    page.locator(".mainnav").get_by_role("link", name="Keys").click()
    page.wait_for_url("**/keys")
    assert page.locator(".mainnav a[aria-current=page]").inner_text() == "Keys"


def test_a_non_admin_is_refused_and_sees_no_link(browser: Any, ui_server: ServerProcess) -> None:
    status, body = call(ui_server, "POST", "/jp/v1/keys", {"name": "reader", "projects": ["*"], "role": "read"})
    assert status == 201
    context = browser.new_context(base_url=ui_server.url)
    try:
        with error_checked(context.new_page()) as page:
            page.goto("/keys")
            page.locator("#api_key").fill(body["token"])
            page.get_by_role("button", name="Sign in").click()
            page.locator(".error-page").wait_for()
            assert page.locator(".status-code").inner_text() == "403"
            assert "admins only" in page.locator(".error-message").inner_text()
            page.goto("/")
            page.locator(".mainnav a").first.wait_for()
            assert page.locator(".mainnav a", has_text="Keys").count() == 0
    finally:
        context.close()
