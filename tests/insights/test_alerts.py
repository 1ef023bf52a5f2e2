"""Alerts: webhooks per project get one 'opened' and one 'resolved' per finding, none for flapping, retried on
failure, once however many replicas evaluate."""

from __future__ import annotations

import pytest
from receiver import Receiver
from starlette.testclient import TestClient
from synth import PROJECT, constant, evaluate, healthy, piecewise

from jobpulse.insights.alerts import Alerter
from jobpulse.insights.service import Insights
from jobpulse.store import Store

HOOKS = f"/jp/v1/projects/{PROJECT}/insights/webhooks"


def add_hook(client, url: str, fmt: str = "json") -> str:  # noqa: ANN001
    answer = client.post(HOOKS, json={"url": url, "format": fmt, "name": fmt})
    assert answer.status_code == 201, answer.text
    return answer.json()["webhook"]["webhook_id"]


def flapping_job(client, job: str) -> None:  # noqa: ANN001
    """GPU 0 of worker-0 idle from minute 10 to 20, then flapping (1 minute busy, 2 idle) until 30, then busy:
    one idle episode. Stragglers are not looked for, so it is the job's only finding."""
    spans = [(10, 20, 0.0)] + [(m + 1, m + 3, 0.0) for m in range(20, 30, 3)]
    util = lambda w, d: piecewise(90.0, *spans) if (w, d) == ("worker-0", "0") else constant(90.0)  # noqa: E731
    client.put(f"/jp/v1/projects/{PROJECT}/insights/thresholds", json={"disabled": ["straggler"]})
    healthy(job, (0, 45), util=util).send(client)


def test_one_open_and_one_resolve_per_finding_and_none_for_flapping(client):
    with Receiver() as receiver:
        add_hook(client, receiver.url)
        flapping_job(client, "flap")
        for minute in range(8, 45):
            evaluate(client, "flap", minute + 0.5)
        bodies = receiver.wait_for(2)
    assert [(b["event"], b["finding"]["kind"]) for b in bodies] == [("opened", "idle_gpu"), ("resolved", "idle_gpu")]
    assert bodies[0]["finding"]["finding_id"] == bodies[1]["finding"]["finding_id"]
    assert bodies[1]["finding"]["status"] == "resolved" and bodies[0]["job_url"].endswith("/jobs/flap")


def test_two_replicas_send_each_alert_once(client, app, store, embedded_engine, settings):
    other = Insights(Store(embedded_engine, store.database, sees_every_write=False), settings)
    with Receiver() as receiver:
        add_hook(client, receiver.url)
        flapping_job(client, "twice")
        row = store.insight_data.jobs(["twice"])[0]
        for minute in range(8, 45):
            app.state.insights.evaluate_job(row, int(row["started"]) + minute * 60_000 + 30_000)
            other.evaluate_job(row, int(row["started"]) + minute * 60_000 + 30_000)
        bodies = receiver.wait_for(2)
    other.close()
    assert [b["event"] for b in bodies] == ["opened", "resolved"]


def test_slack_format_and_test_send(client):
    with Receiver() as receiver:
        hook = add_hook(client, receiver.url, "slack")
        answer = client.post(f"{HOOKS}/{hook}/test")
        assert answer.status_code == 200 and answer.json()["delivered"] is True
        bodies = receiver.wait_for(1)
    assert "idle gpu" in bodies[0]["text"] and bodies[0]["blocks"][0]["type"] == "section"


def test_a_failed_post_is_retried_with_backoff_and_recorded(store):
    with Receiver(fail_first=2) as receiver:
        hook = store.insight_config.add_webhook(PROJECT, "flaky", receiver.url, "json")
        alerter = Alerter(store, "http://jobpulse.test", backoff_s=0.05)
        finding = _finding()
        assert alerter.notify([finding], []) == 1
        assert alerter.notify([finding], []) == 0  # claimed already: never twice
        bodies = receiver.wait_for(1)
        alerter.close()
    assert len(bodies) == 1 and receiver.refused == 2
    assert [(d["status"], d["attempts"]) for d in store.insight_config.deliveries(hook.webhook_id)] == [
        ("delivered", 3)
    ]


def _finding():  # noqa: ANN202
    from jobpulse.store.findings import Finding

    return Finding(
        "f_x", PROJECT, "some-job", "hang", "", "critical", "", "", 0, None, 1, 1, None, {"state": "stalled"}
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://example.com/x"}, "url"),
        ({"url": "http://127.0.0.1:9/x", "format": "teams"}, "format"),
        ({"url": "http://127.0.0.1:9/x", "secret": "x"}, "secret"),
    ],
)
def test_a_bad_webhook_is_refused_naming_the_field(client, body, field):
    answer = client.post(HOOKS, json=body)
    assert answer.status_code == 400 and answer.json()["error"]["field"] == field


def test_webhooks_need_admin(client, app, make_key):
    hook = add_hook(client, "http://127.0.0.1:9/hook")
    writer = TestClient(app, headers={"Authorization": f"Bearer {make_key([PROJECT], 'write')}"})
    assert writer.get(HOOKS).status_code == 403
    assert writer.post(HOOKS, json={"url": "http://127.0.0.1:9/x"}).status_code == 403
    assert client.delete(f"{HOOKS}/{hook}").status_code == 200
    assert client.get(HOOKS).json()["webhooks"] == []
