"""Bad arguments raise at once, naming what is wrong; a server that refuses the run raises too, unless the
caller chose never to be raised at; a server that cannot be reached is no error."""

from __future__ import annotations

import numpy as np
import pytest
import sdk_support as s

import jobpulse
from jobpulse.client import Client
from jobpulse.credentials import Credentials
from jobpulse.sdk import checks
from jobpulse.sdk.run import Run
from jobpulse.store import identity as store_ids
from jobpulse.testing import free_port


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """Options of a run whose server cannot be reached (nothing listens at its port)."""
    for name in ("JOBPULSE_PROJECT", "JOBPULSE_JOB", "JOBPULSE_WORKER", "JOBPULSE_NEVER_RAISE"):
        monkeypatch.delenv(name, raising=False)
    return dict(
        url=f"http://127.0.0.1:{free_port()}",
        api_key="k",
        capture_console=False,
        handle_sigterm=False,
        spool_dir=tmp_path / "spool",
        replay_spool=False,
        flush_timeout=0.5,
    )


@pytest.fixture
def offline_run(offline):
    run = Run(project="checks", job="checks-1", **offline)
    yield run
    run.finish(timeout=0.2)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"project": "bad project!"}, "project must be 1-64 letters, digits or '-', got 'bad project!'"),
        ({"project": "p", "job": "-starts-with-a-dash"}, "job must be 1-128 letters"),
        ({"project": "p", "job": "j", "worker": "worker 0"}, "worker must be 1-128 letters"),
        ({"project": "p", "job": "j", "tags": "one-tag"}, "tags must be a list of strings"),
        ({"project": "p", "job": "j", "config": [("lr", 0.1)]}, "config must be a mapping"),
        ({"project": "p", "job": "j", "name": 42}, "name must be a string"),
    ],
)
def test_init_raises_at_once_naming_the_bad_argument(offline, arguments, message):
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(")):
        jobpulse.init(**arguments, **offline)
    assert jobpulse.current_run() is None


@pytest.mark.parametrize(
    ("variable", "value"), [("JOBPULSE_PROJECT", "my project"), ("JOBPULSE_JOB", "x/y"), ("JOBPULSE_WORKER", "a b")]
)
def test_a_bad_environment_variable_is_named(offline, monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=f"^{variable} must be"):
        Run(**offline)


def test_a_bad_never_raise_variable_is_named(offline, monkeypatch):
    monkeypatch.setenv("JOBPULSE_NEVER_RAISE", "sometimes")
    with pytest.raises(ValueError, match="^JOBPULSE_NEVER_RAISE must be"):
        Run(project="p", job="j", **offline)


@pytest.mark.parametrize("step", [1.5, "3", True])
def test_log_raises_for_a_step_that_is_not_a_whole_number(offline_run, step):
    with pytest.raises(ValueError, match="^step must be a whole number"):
        offline_run.log({"loss": 0.5}, step=step)


def test_log_raises_for_a_step_out_of_range_and_for_values_that_are_no_mapping(offline_run):
    with pytest.raises(ValueError, match=r"^step must be in \[-2\^31, 2\^53\]"):
        offline_run.log({"loss": 0.5}, step=2**60)
    with pytest.raises(ValueError, match="^run.log takes a mapping"):
        offline_run.log([("loss", 0.5)])  # type: ignore[arg-type]


def test_numpy_integer_steps_are_taken(offline_run):
    offline_run.log({"loss": 0.5}, step=np.int64(7))
    offline_run.scalar("loss", "val", 0.4, iter=np.int32(8))
    assert offline_run._next_step == 8


def test_other_report_calls_and_finish_raise_for_bad_arguments(offline_run):
    with pytest.raises(ValueError, match="^iter must be a whole number"):
        offline_run.scalar("m", "v", 1.0, iter=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^level must be one of debug, info, warning, error, critical"):
        offline_run.text("hello", level="loud")
    with pytest.raises(ValueError, match="^status must be one of completed, failed, stopped"):
        offline_run.finish("done")
    assert not offline_run.finished


def test_an_unreachable_server_is_no_error_and_the_registration_is_spooled(offline):
    run = Run(project="checks", job="checks-offline", **offline)
    delivery = run.finish(timeout=0.5)
    assert "job" in _spooled_kinds(delivery.spool_dir)  # sent later: by the next run, an agent or `jobpulse sync`


def _spooled_kinds(spool_dir) -> list[str]:  # noqa: ANN001
    from jobpulse.sdk import spool as sp

    return [sp.read_header(p).get("kind", "") for p in sp.spool_files(spool_dir)]


def _refused(server, tmp_path, **extra) -> dict:  # noqa: ANN001
    """Options of a run against ``server`` with a key it does not know."""
    return {**s.run_options(server, tmp_path, **extra), "api_key": "jp_000000000000_notakeynotakeynotakeyx"}


def test_a_refused_key_raises_with_the_servers_message(server, tmp_path):
    options = _refused(server, tmp_path)
    with pytest.raises(jobpulse.RefusedError) as caught:
        Run(project="checks", job="checks-refused", **options)
    assert caught.value.status == 401
    assert str(caught.value) == (
        f"the server at {server.url} refused to register the run (HTTP 401): "
        "the API key is not valid or has been revoked"
    )


def test_a_key_without_write_access_to_the_project_is_refused(server, tmp_path):
    admin = Client(Credentials(server.url, server.api_key))
    token = admin.request("POST", "/jp/v1/keys", json={"name": "other", "projects": ["elsewhere"], "role": "write"})
    token = token["token"]
    with pytest.raises(jobpulse.RefusedError, match="HTTP 403.*project 'checks'"):
        Run(project="checks", job="checks-403", **{**s.run_options(server, tmp_path), "api_key": token})


def test_never_raise_lets_a_refused_run_go_on_and_keep_its_data(server, tmp_path, capfd):
    options = _refused(server, tmp_path, flush_timeout=1.0)
    run = Run(project="checks", job="checks-never", never_raise=True, **options)
    run.log({"loss": 0.5}, step=0)
    delivery = run.finish()
    assert delivery.sent_events == 0 and delivery.spooled_events == 1
    assert "refused the data" in capfd.readouterr().err


def test_never_raise_is_read_from_the_environment(server, tmp_path, monkeypatch):
    monkeypatch.setenv("JOBPULSE_NEVER_RAISE", "1")
    options = _refused(server, tmp_path, flush_timeout=0.2)
    delivery = Run(project="checks", job="checks-never-env", **options).finish()
    assert delivery.sent_events == 0 and delivery.spooled_requests >= 1  # the registration, kept


def test_the_sdks_id_rules_are_the_servers():
    assert checks.PROJECT_ID.pattern == store_ids.PROJECT_ID.pattern
    assert checks.JOB_ID.pattern == store_ids.JOB_ID.pattern
    assert checks.WORKER_ID.pattern == store_ids.WORKER_ID.pattern
