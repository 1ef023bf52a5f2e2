"""Tasks, projects, models and the files server as the ClearML SDK uses them, and their native view."""

from __future__ import annotations

import re

from clearml_support import BASE_TS, add_batch, fails, log, new_task, ok, scalar


def test_a_project_name_maps_to_a_project_id(client):
    assert ok(client, "projects.create", {"name": "demo"})["id"] == "demo"
    nested = ok(client, "projects.create", {"name": "team/vision models"})["id"]
    assert re.fullmatch(r"team-vision-models-[0-9a-f]{10}", nested)
    found = ok(client, "projects.get_all", {"name": "^team/vision models$", "only_fields": ["id"]})["projects"]
    assert found == [{"id": nested}]
    project = ok(client, "projects.get_by_id", {"project": nested})["project"]
    assert project["name"] == "team/vision models" and project["basename"] == "vision models"
    fails(client, "projects.create", {"name": "team/vision models"}, code=400, subcode=801)


def test_projects_with_jobs_are_listed_too(client):
    body = {
        "project": "native",
        "job": "native-run",
        "series": [{"kind": "scalar", "metric": "m", "iter": [0], "value": [1.0], "ts": [BASE_TS]}],
    }
    client.post("/jp/v1/ingest", json=body)
    names = [p["name"] for p in ok(client, "projects.get_all", {})["projects"]]
    assert "native" in names
    task = ok(client, "tasks.get_by_id", {"task": "native-run"})["task"]
    assert task["status"] == "in_progress" and task["project"] == "native"


def test_a_project_scoped_key_creates_tasks_only_there(client, make_key):
    ok(client, "projects.create", {"name": "team-a"})
    writer = {"Authorization": f"Bearer {make_key(['team-a'], 'write')}"}
    assert ok(client, "tasks.create", {"name": "t", "project": "team-a"}, headers=writer)["id"]
    fails(client, "tasks.create", {"name": "t", "project": "team-b"}, headers=writer, code=403)
    fails(client, "projects.create", {"name": "team-b"}, headers=writer, code=403)


def test_a_new_task_has_the_fields_the_sdk_reads(client):
    pid = ok(client, "projects.create", {"name": "p"})["id"]
    tid = ok(
        client,
        "tasks.create",
        {
            "name": "run",
            "project": pid,
            "type": "training",
            "system_tags": ["development"],
            "comment": "c",
            "method": "get",
        },
    )["id"]
    assert re.fullmatch(r"[0-9a-f]{32}", tid)
    task = ok(client, "tasks.get_by_id", {"task": tid})["task"]
    assert task["status"] == "created" and task["name"] == "run" and task["project"] == pid
    assert task["system_tags"] == ["development"] and task["comment"] == "c" and "method" not in task
    assert task["execution"] == {"parameters": {}, "artifacts": [], "model_labels": {}}
    assert task["models"] == {"input": [], "output": []} and task["last_metrics"] == {}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", task["created"])
    assert task["started"] is None


def test_status_changes_follow_the_sdk_and_show_natively(client):
    tid = new_task(client, "run")
    answer = ok(client, "tasks.started", {"task": tid})
    assert answer["fields"]["status"] == "in_progress"
    job = client.get(f"/jp/v1/jobs/{tid}").json()["job"]
    assert job["status"] == "running" and job["name"] == "run"
    ok(client, "tasks.failed", {"task": tid, "status_reason": "Exception boom"})
    job = client.get(f"/jp/v1/jobs/{tid}").json()["job"]
    assert job["status"] == "failed" and job["error_message"] == "Exception boom"
    task = ok(client, "tasks.get_by_id", {"task": tid})["task"]
    assert task["status"] == "failed" and task["status_reason"] == "Exception boom" and task["completed"]


def test_a_native_status_change_shows_in_clearml(client):
    tid = new_task(client)
    client.patch(f"/jp/v1/jobs/{tid}", json={"status": "stopped"})
    assert ok(client, "tasks.get_all", {"id": [tid], "only_fields": ["status"]})["tasks"] == [
        {"id": tid, "status": "stopped"}
    ]


def test_edit_replaces_whole_fields_and_needs_force_after_start(client):
    tid = new_task(client)
    runtime = {"CLEARML VERSION": "clearml-2.1.12", "progress": "0"}
    ok(client, "tasks.edit", {"task": tid, "force": True, "runtime": runtime, "output_dest": ""})
    ok(client, "tasks.edit", {"task": tid, "force": True, "runtime": {"progress": "100"}})
    task = ok(client, "tasks.get_by_id", {"task": tid})["task"]
    assert task["runtime"] == {"progress": "100"} and task["output_dest"] == ""
    fails(client, "tasks.edit", {"task": tid, "comment": "x"}, code=400, subcode=110)


def test_hyperparameters_configuration_requirements_artifacts(client):
    tid = new_task(client)
    params = {"General": {"lr": {"section": "General", "name": "lr", "value": "0.01", "type": "float"}}}
    ok(client, "tasks.edit", {"task": tid, "force": True, "hyperparams": params})
    ok(
        client,
        "tasks.edit_hyper_params",
        {"task": tid, "hyperparams": [{"section": "Args", "name": "bs", "value": "8"}]},
    )
    got = ok(client, "tasks.get_hyper_params", {"tasks": [tid]})["params"][0]["hyperparams"]
    assert sorted(p["name"] for p in got) == ["bs", "lr"]
    ok(client, "tasks.edit_configuration", {"task": tid, "configuration": [{"name": "cfg", "value": "a: 1"}]})
    assert ok(client, "tasks.get_configurations", {"tasks": [tid]})["configurations"][0]["configuration"] == [
        {"name": "cfg", "value": "a: 1"}
    ]
    ok(client, "tasks.set_requirements", {"task": tid, "requirements": {"pip": "numpy", "conda": ""}})
    ok(
        client,
        "tasks.add_or_update_artifacts",
        {"task": tid, "artifacts": [{"key": "data", "type": "csv", "uri": "http://x/data.csv"}]},
    )
    task = ok(client, "tasks.get_by_id", {"task": tid})["task"]
    assert task["script"]["requirements"] == {"pip": "numpy", "conda": ""}
    assert task["execution"]["artifacts"] == [{"key": "data", "type": "csv", "uri": "http://x/data.csv"}]
    config = client.get(f"/jp/v1/jobs/{tid}").json()["job"]["config"]["clearml"]
    assert config["hyperparams"]["General"]["lr"]["value"] == "0.01"


def test_get_all_polls_status_of_listed_ids_and_filters(client):
    first, second = new_task(client, "alpha", "polls"), new_task(client, "beta", "polls")
    ok(client, "tasks.completed", {"task": second})
    polled = ok(
        client,
        "tasks.get_all",
        {"id": [first, "0" * 32], "only_fields": ["status", "status_message", "id"], "search_hidden": False},
    )
    assert polled == {"tasks": [{"id": first, "status": "in_progress", "status_message": ""}]}
    by_name = ok(client, "tasks.get_all", {"project": ["polls"], "name": "^be", "only_fields": ["name"]})["tasks"]
    assert by_name == [{"id": second, "name": "beta"}]
    done = ok(client, "tasks.get_all", {"project": ["polls"], "status": ["completed"], "only_fields": ["id"]})
    assert done["tasks"] == [{"id": second}]


def test_last_metrics_come_from_reported_scalars(client, task):
    add_batch(client, scalar(task, "loss", "train", 3, 0.5), scalar(task, "loss", "train", 1, 2.0))
    got = ok(client, "tasks.get_by_id", {"task": task})["task"]
    assert got["last_iteration"] == 3
    (variants,) = got["last_metrics"].values()
    (entry,) = variants.values()
    assert (entry["metric"], entry["variant"], entry["value"], entry["min_value"], entry["max_value"]) == (
        "loss",
        "train",
        0.5,
        0.5,
        2.0,
    )


def test_reset_drops_the_runs_events_and_runtime(client, task):
    ok(client, "tasks.edit", {"task": task, "force": True, "runtime": {"progress": "100"}})
    add_batch(client, scalar(task, "m", "v", 0, 1.0), log(task, "x", BASE_TS))
    ok(client, "tasks.completed", {"task": task})
    answer = ok(client, "tasks.reset", {"task": task, "force": False, "clear_all": False})
    assert answer["fields"] == {"status": "created"}
    got = ok(client, "tasks.get_by_id", {"task": task})["task"]
    assert got["status"] == "created" and got["runtime"] == {} and got["started"] is None
    assert ok(client, "events.get_task_events", {"task": task})["total"] == 0


def test_publish_locks_the_task(client, task):
    ok(client, "tasks.completed", {"task": task, "publish": True})
    assert ok(client, "tasks.get_by_id", {"task": task})["task"]["status"] == "published"
    assert client.get(f"/jp/v1/jobs/{task}").json()["job"]["locked"] is True
    fails(client, "tasks.reset", {"task": task}, code=400, subcode=110)


def test_ping_and_delete(client, task):
    assert ok(client, "tasks.ping", {"task": task}) == {}
    ok(client, "tasks.delete", {"task": task})
    fails(client, "tasks.get_by_id", {"task": task}, code=400, subcode=101)


def test_models_of_a_task(client, task):
    model = ok(client, "models.create", {"uri": "file:///w.pt", "name": "weights", "task": task, "ready": False})
    mid = model["id"]
    ok(client, "models.edit", {"model": mid, "comment": "best", "labels": {"cat": 1}})
    ok(client, "tasks.add_or_update_model", {"task": task, "name": "weights", "model": mid, "type": "output"})
    got = ok(client, "models.get_by_id", {"model": mid})["model"]
    assert (got["name"], got["uri"], got["comment"], got["labels"], got["task"]) == (
        "weights",
        "file:///w.pt",
        "best",
        {"cat": 1},
        task,
    )
    assert ok(client, "models.get_all", {"task": [task], "only_fields": ["id"]})["models"] == [{"id": mid}]
    assert ok(client, "tasks.get_by_id", {"task": task})["task"]["models"]["output"] == [
        {"name": "weights", "model": mid}
    ]
    updated = ok(client, "models.update_for_task", {"task": task, "uri": "file:///w2.pt", "name": "w2"})
    assert updated["created"] is True
    fails(client, "models.get_by_id", {"model": task}, code=400, subcode=201)


def _upload(client, path: str, data: bytes, **headers: str):
    return client.post("/clearml/files", files={path: (path, data, "image/png")}, headers=headers)


def test_files_uploaded_to_the_files_host_are_served_back_and_natively(client, task):
    path = f"/clearml-tests/task.{task}/metrics/img/v/img_v_00000000.png"
    png = b"\x89PNG\r\n\x1a\nDATA"
    assert _upload(client, path, png).status_code == 200
    url_path = f"/clearml/files/clearml-tests/task.{task}/metrics/img/v/img_v_00000000.png"
    answer = client.get(url_path)
    assert answer.status_code == 200 and answer.content == png
    assert answer.headers["content-type"] == "image/png"
    native = client.get(f"/jp/v1/jobs/{task}/files/metrics/img/v/img_v_00000000.png")
    assert native.content == png
    add_batch(
        client,
        {
            "type": "training_debug_image",
            "task": task,
            "metric": "img",
            "variant": "v",
            "iter": 0,
            "url": "http://host:8642" + url_path,
            "timestamp": BASE_TS,
        },
    )
    rows = client.app.state.ctx.store.events.read(task, "image")
    assert '"file":"/jp/v1/jobs/' in rows[0]["payload"]
    assert client.delete(url_path).status_code == 200 and client.get(url_path).status_code == 404


def test_file_names_with_odd_characters_are_stored_safely(client, task):
    path = f"/p/task.{task}/metrics/:monitor:x/a#b/..file?.png"
    assert _upload(client, path, b"X").status_code == 200
    quoted = f"/clearml/files/p/task.{task}/metrics/:monitor:x/a%23b/..file%3F.png"
    assert client.get(quoted).content == b"X"
    (stored,) = [f.name for f in client.app.state.ctx.store.files.listing(task)]
    assert re.fullmatch(r"metrics/[\w.\- /]+\.png", stored) and "/../" not in stored


def test_files_need_credentials_and_a_task_the_key_may_write(client, anonymous, make_key, task):
    path = f"/clearml-tests/task.{task}/metrics/img/v/f.png"
    assert _upload(anonymous, path, b"X").status_code == 401
    reader = make_key(["*"], "read")
    assert _upload(anonymous, path, b"X", Authorization=f"Bearer {reader}").status_code == 403
    assert _upload(client, "/no/task/folder/f.png", b"X").status_code == 400
    assert _upload(client, f"/p/x.{'0' * 32}/f.png", b"X").status_code == 404
