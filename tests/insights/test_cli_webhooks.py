"""``jobpulse insights webhooks``: a project's webhooks listed, added, test-sent and deleted, against a real
server process."""

from __future__ import annotations

import httpx
import orjson
import pytest
from receiver import Receiver

from jobpulse.cli import main

pytestmark = pytest.mark.e2e
PROJECT = "cli-webhooks"


def run(capsys: pytest.CaptureFixture, server, *args: str, key: str | None = None) -> tuple[int, str, str]:  # noqa: ANN001
    capsys.readouterr()
    code = main(["insights", "webhooks", *args, "--url", server.url, "--api-key", key or server.api_key])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_webhook_is_added_listed_test_sent_and_deleted(server, capsys):
    with Receiver() as receiver:
        code, out, _ = run(capsys, server, "add", receiver.url, "--name", "ops", "--format", "slack", "-p", PROJECT)
        assert code == 0 and out.startswith("added webhook wh") and "(slack)" in out
        hook_id = out.split()[2]
        code, out, _ = run(capsys, server, "list", "--project", PROJECT)
        assert code == 0
        header, row = out.splitlines()
        assert header.split() == ["ID", "NAME", "FORMAT", "CREATED", "URL"]
        assert row.split()[:3] == [hook_id, "ops", "slack"] and row.endswith(receiver.url)
        code, out, _ = run(capsys, server, "test", hook_id, "--project", PROJECT)
        assert (code, out.strip()) == (0, f"test alert delivered to {hook_id}: HTTP 200")
        [body] = receiver.wait_for(1)
        assert "text" in body and "blocks" in body  # the Slack format
        code, out, _ = run(capsys, server, "delete", hook_id, "--project", PROJECT)
        assert (code, out.strip()) == (0, f"deleted webhook {hook_id}")
    code, out, _ = run(capsys, server, "list", "--project", PROJECT, "--json")
    assert code == 0 and orjson.loads(out) == {"webhooks": []}


def test_a_test_alert_that_is_not_delivered_exits_1(server, capsys):
    with Receiver(fail_first=1) as receiver:
        code, out, _ = run(capsys, server, "add", receiver.url, "--project", PROJECT, "--json")
        hook = orjson.loads(out)
        assert code == 0 and hook["format"] == "json" and hook["name"] == ""
        code, out, _ = run(capsys, server, "test", hook["webhook_id"], "--project", PROJECT)
        assert code == 1 and out.strip() == f"test alert not delivered to {hook['webhook_id']}: HTTP 503"
        run(capsys, server, "delete", hook["webhook_id"], "--project", PROJECT)


def test_a_bad_url_is_refused_naming_the_field(server, capsys):
    code, _, err = run(capsys, server, "add", "ftp://example.com/hook", "--project", PROJECT)
    assert code == 1 and "'url'" in err


def test_an_unknown_webhook_is_not_found(server, capsys):
    code, _, err = run(capsys, server, "delete", "wh_missing", "--project", PROJECT)
    assert code == 1 and "wh_missing" in err and "does not exist" in err


def test_webhooks_need_an_admin_key(server, capsys):
    answer = httpx.post(
        f"{server.url}/jp/v1/keys",
        json={"name": "writer", "projects": [PROJECT], "role": "write"},
        headers={"Authorization": f"Bearer {server.api_key}"},
    )
    assert answer.status_code == 201, answer.text
    code, _, err = run(capsys, server, "list", "--project", PROJECT, key=answer.json()["token"])
    assert code == 1 and "admin" in err


def test_an_action_is_required_and_list_takes_no_argument(server, capsys):
    assert run(capsys, server, "--project", PROJECT)[0] == 2
    assert run(capsys, server, "list", "wh_1", "--project", PROJECT)[0] == 2
    assert run(capsys, server, "delete", "--project", PROJECT)[0] == 2
