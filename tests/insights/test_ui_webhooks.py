"""The Insights tab's "Webhooks of project P": a project's webhooks listed, added, test-sent and deleted in the
browser (headless Chromium through Playwright, against a real server; skips without them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from browser import signed_in_page
from receiver import Receiver
from synth import constant, healthy, recent

pytestmark = pytest.mark.e2e
PROJECT = "ui-webhooks"
JOB = "ui-hooked"


@pytest.fixture(scope="module")
def page(browser, server) -> Iterator[Any]:  # noqa: ANN001
    """A signed-in page on the session's server, which holds a job of the project."""
    headers = {"Authorization": f"Bearer {server.api_key}"}

    class Remote:
        def post(self, path: str, **kwargs):  # noqa: ANN003, ANN201
            return httpx.post(server.url + path, headers={**headers, **kwargs.pop("headers", {})}, **kwargs)

    builder = healthy(JOB, (0, 5), workers=1, util=lambda _w, _d: constant(90.0), logs=False, origin=recent(5))
    builder.project = PROJECT
    builder.send(Remote())
    with signed_in_page(browser, server) as tab:
        tab.on("dialog", lambda dialog: dialog.accept())  # "Delete the webhook …?"
        yield tab


def hooks(server) -> list[dict[str, Any]]:  # noqa: ANN001
    answer = httpx.get(
        f"{server.url}/jp/v1/projects/{PROJECT}/insights/webhooks",
        headers={"Authorization": f"Bearer {server.api_key}"},
    )
    return answer.json()["webhooks"]


def open_webhooks(page: Any) -> None:
    page.goto("about:blank")  # a fresh page: going to the same address with a hash would not load it again
    page.goto(f"/jobs/{JOB}#insights")
    page.click(".webhooks summary")
    page.wait_for_selector(".webhooks .webhook-list > *")


def test_a_webhook_is_added_from_the_insights_tab(page, server):
    open_webhooks(page)
    assert page.text_content(".webhooks .webhook-list") == "No webhooks yet."
    page.fill(".webhooks input[name=name]", "ops channel")
    page.fill(".webhooks input[name=url]", "https://hooks.example.com/T1/B2")
    page.select_option(".webhooks select[name=format]", "slack")
    page.click(".webhooks button[type=submit]")
    row = page.wait_for_selector(".webhooks tbody tr")
    assert row.text_content().startswith("ops channelhttps://hooks.example.com/T1/B2slack")
    [hook] = hooks(server)
    assert (hook["name"], hook["url"], hook["format"]) == ("ops channel", "https://hooks.example.com/T1/B2", "slack")
    page.click(f".webhooks tr[data-webhook={hook['webhook_id']}] >> text=Delete")
    page.wait_for_selector(".webhooks .webhook-list >> text=No webhooks yet.")
    assert hooks(server) == []


def test_a_refused_url_is_named(page, server):
    open_webhooks(page)
    page.fill(".webhooks input[name=url]", "ftp://example.com/hook")
    page.click(".webhooks button[type=submit]")
    message = page.wait_for_selector(".webhooks .error-message")
    assert "'url'" in message.text_content()
    assert hooks(server) == []


def test_the_test_button_sends_a_test_alert(page, server):
    with Receiver() as receiver:
        answer = httpx.post(
            f"{server.url}/jp/v1/projects/{PROJECT}/insights/webhooks",
            json={"url": receiver.url, "name": "local"},
            headers={"Authorization": f"Bearer {server.api_key}"},
        )
        hook_id = answer.json()["webhook"]["webhook_id"]
        open_webhooks(page)
        page.click(f".webhooks tr[data-webhook={hook_id}] >> text=Test")
        outcome = page.wait_for_selector(f".webhooks tr[data-webhook={hook_id}] .webhook-outcome >> text=Delivered")
        assert outcome.text_content() == "Delivered (HTTP 200)"
        [body] = receiver.wait_for(1)
        assert body["event"] == "test"
    page.click(f".webhooks tr[data-webhook={hook_id}] >> text=Delete")
    page.wait_for_selector(".webhooks .webhook-list >> text=No webhooks yet.")


def test_a_key_that_is_no_admin_is_told_webhooks_need_one(page, server):
    headers = {"Authorization": f"Bearer {server.api_key}"}
    key = httpx.post(
        f"{server.url}/jp/v1/keys", json={"name": "reader", "projects": [PROJECT], "role": "write"}, headers=headers
    ).json()["token"]
    link = httpx.post(f"{server.url}/jp/v1/login-links", headers={"Authorization": f"Bearer {key}"})
    assert link.status_code in (200, 201), link.text
    page.goto(link.json()["url"])
    open_webhooks(page)
    assert page.text_content(".webhooks .webhook-list") == f"Webhooks need an admin key of project {PROJECT}."
    assert page.is_hidden(".webhooks form")
