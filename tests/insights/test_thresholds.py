"""Per-project thresholds: read, changed (validated, 4xx naming the field), and applied by the detectors."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient
from synth import PROJECT, constant, evaluate, healthy, kinds, piecewise

URL = f"/jp/v1/projects/{PROJECT}/insights/thresholds"


def test_a_project_starts_with_the_defaults(client):
    answer = client.get(URL).json()
    assert answer["changed"] == {}
    assert answer["thresholds"]["idle_util_pct"] == 5.0 and answer["thresholds"]["hang_min_s"] == 600


def test_changed_thresholds_are_kept_and_null_restores_a_default(client):
    assert client.put(URL, json={"idle_min_s": 900, "spike_metrics": ["loss", "grad_norm"]}).status_code == 200
    answer = client.put(URL, json={"spike_metrics": None}).json()
    assert answer["changed"] == {"idle_min_s": 900}
    assert answer["thresholds"]["spike_metrics"] == ["loss"]
    assert client.get(URL).json()["thresholds"]["idle_min_s"] == 900


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"idle_util_pct": 200}, "idle_util_pct"),
        ({"idle_min_s": "five"}, "idle_min_s"),
        ({"idle_min_s": 90.5}, "idle_min_s"),
        ({"no_such": 1}, "no_such"),
        ({"disabled": ["no_such_kind"]}, "disabled"),
        ([1, 2], "body"),
    ],
)
def test_a_bad_threshold_is_refused_naming_it(client, body, field):
    answer = client.put(URL, json=body)
    assert answer.status_code == 400 and answer.json()["error"]["field"] == field


def test_changing_thresholds_needs_write(client, app, make_key):
    reader = TestClient(app, headers={"Authorization": f"Bearer {make_key([PROJECT], 'read')}"})
    assert reader.get(URL).status_code == 200
    assert reader.put(URL, json={"idle_min_s": 900}).status_code == 403


def test_the_detectors_apply_the_projects_thresholds(client):
    util = lambda w, d: piecewise(90.0, (10, 20, 0.0)) if (w, d) == ("worker-0", "0") else constant(90.0)  # noqa: E731
    healthy("strict", (0, 30), workers=3, util=util).send(client)
    client.put(URL, json={"idle_min_s": 900, "disabled": ["straggler"]})
    assert evaluate(client, "strict", 29.5)["findings"] == []
    client.put(URL, json={"idle_min_s": 300})
    assert [f["kind"] for f in evaluate(client, "strict", 29.5)["findings"]] == ["idle_gpu"]
    assert kinds(client.get("/jp/v1/jobs/strict/insights").json()["findings"], "idle_gpu")
