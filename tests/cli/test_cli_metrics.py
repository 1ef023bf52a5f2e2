"""``jobpulse metrics`` and ``jobpulse export`` against a real server."""

from __future__ import annotations

import csv
import io
import sys

import orjson
import pyarrow.parquet as pq
import pytest

from helpers import quiet_run
from jobpulse.cli import export as export_module

pytestmark = pytest.mark.e2e

KEYS = ["accuracy/top1", "accuracy/top5", "loss/train", "loss/val", "lr", "throughput/images_per_sec"]
POINTS = 3 * 3000 + 3 * 30  # loss/train, lr and throughput every step; the validation metrics every 100


def test_metrics_lists_every_key_with_its_latest_value_step_and_count(jobpulse, demo):
    result = jobpulse("metrics", demo)
    assert result.code == 0, result.err
    header, *rows = result.out.splitlines()
    assert header.split() == ["KEY", "VALUE", "STEP", "MIN", "MAX", "POINTS", "AT"]
    assert [r.split()[0] for r in rows] == KEYS
    loss = next(r.split() for r in rows if r.startswith("loss/train"))
    assert (loss[2], loss[5]) == ("2999", "3000")


def test_metrics_json_and_csv_list_the_same_values(jobpulse, demo):
    listed = orjson.loads(jobpulse("metrics", demo, "--json").out)["metrics"]
    table = list(csv.DictReader(io.StringIO(jobpulse("metrics", demo, "--csv").out)))
    assert [r["key"] for r in listed] == [r["key"] for r in table] == KEYS
    assert [float(r["value"]) for r in listed] == [float(r["value"]) for r in table]


def test_metrics_of_one_key_prints_its_series_at_full_resolution(jobpulse, demo):
    rows = jobpulse("metrics", demo, "loss/val").out.splitlines()
    assert rows[0].split() == ["KEY", "STEP", "VALUE", "TIME"]
    assert [r.split()[1] for r in rows[1:]] == [str(step) for step in range(0, 3000, 100)]


def test_metrics_of_a_metric_name_prints_all_its_series(jobpulse, demo):
    rows = list(csv.DictReader(io.StringIO(jobpulse("metrics", demo, "accuracy", "--csv").out)))
    assert {(r["metric"], r["variant"]) for r in rows} == {("accuracy", "top1"), ("accuracy", "top5")}
    assert len(rows) == 60


def test_metrics_of_one_key_as_json_lines(jobpulse, demo):
    points = [orjson.loads(line) for line in jobpulse("metrics", demo, "lr", "--json").out.splitlines()]
    assert len(points) == 3000 and set(points[0]) == {"metric", "variant", "iter", "ts", "value"}
    assert [p["iter"] for p in points] == list(range(3000))


def test_an_unknown_key_fails_listing_the_jobs_keys(jobpulse, demo):
    result = jobpulse("metrics", demo, "loss/test")
    assert result.code == 1
    assert f"job '{demo}' has no metric 'loss/test'; it has accuracy/top1, accuracy/top5, loss/train" in result.err


def test_export_csv_writes_every_point_page_by_page(jobpulse, demo, monkeypatch):
    monkeypatch.setattr(export_module, "PAGE", 1000)
    rows = list(csv.DictReader(io.StringIO(jobpulse("export", demo).out)))
    assert len(rows) == POINTS
    train = [int(r["iter"]) for r in rows if (r["metric"], r["variant"]) == ("loss", "train")]
    assert train == list(range(3000))


def test_export_jsonl_to_a_file(jobpulse, demo, tmp_path):
    target = tmp_path / "points.jsonl"
    result = jobpulse("export", demo, "--format", "jsonl", "--metric", "loss/train", "-o", str(target))
    assert result.code == 0 and f"wrote 3000 point(s) of job {demo}" in result.err
    points = [orjson.loads(line) for line in target.read_text().splitlines()]
    assert len(points) == 3000 and points[0]["metric"] == "loss" and isinstance(points[0]["ts"], int)
    assert not list(tmp_path.glob("*.part"))


def test_export_parquet_keeps_types_and_every_point(jobpulse, demo, tmp_path, monkeypatch):
    monkeypatch.setattr(export_module, "PAGE", 2000)
    target = tmp_path / "points.parquet"
    assert jobpulse("export", demo, "--format", "parquet", "-o", str(target)).code == 0
    table = pq.read_table(target)
    assert table.num_rows == POINTS
    assert [str(t) for t in table.schema.types] == ["string", "string", "int64", "timestamp[ms, tz=UTC]", "double"]
    assert pq.ParquetFile(target).metadata.num_row_groups > 1  # written a page at a time


def test_export_parquet_without_pyarrow_says_what_to_install(jobpulse, demo, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as on a training node's base install
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    result = jobpulse("export", demo, "--format", "parquet", "-o", str(tmp_path / "x.parquet"))
    assert result.code == 2
    assert "--format parquet needs pyarrow" in result.err and "pip install pyarrow" in result.err
    assert not list(tmp_path.iterdir())


SDK_JOB, OLD_JOB = "cli-names", "cli-names-old"
NAMES_PROJECT = "cli-names"  # a project of their own: the demo's project holds the demo job alone


@pytest.fixture(scope="module")
def logged(server, tmp_path_factory) -> str:  # noqa: ANN001
    """A job that logged W&B-style keys through the SDK, and one stored as the previous SDK split "train/loss"."""
    spool = tmp_path_factory.mktemp("cli-names")
    run = quiet_run(server, NAMES_PROJECT, SDK_JOB, spool / "new")
    for step in range(10):
        run.log({"train/loss": 1 / (step + 1), "train/lr": 0.1, "val/acc": step / 10, "loss": 2.0}, step=step)
    assert run.finish().dropped_events == 0
    old = quiet_run(server, NAMES_PROJECT, OLD_JOB, spool / "old")
    for step in range(10):
        old.scalar("train", "loss", 1 / (step + 1), iter=step)
    assert old.finish().dropped_events == 0
    return SDK_JOB


def _csv_series(jobpulse, *args: str) -> set[tuple[str, str]]:  # noqa: ANN001
    return {(r["metric"], r["variant"]) for r in csv.DictReader(io.StringIO(jobpulse("metrics", *args, "--csv").out))}


def test_metrics_lists_keys_as_the_sdk_logged_them(jobpulse, logged):
    rows = jobpulse("metrics", logged).out.splitlines()[1:]
    assert sorted(r.split()[0] for r in rows) == ["loss", "train/loss", "train/lr", "val/acc"]


def test_metrics_of_a_key_as_logged_prints_its_series(jobpulse, logged):
    rows = list(csv.DictReader(io.StringIO(jobpulse("metrics", logged, "train/loss", "--csv").out)))
    assert {(r["metric"], r["variant"]) for r in rows} == {("train/loss", "train/loss")}
    assert [int(r["iter"]) for r in rows] == list(range(10))


def test_metrics_of_a_section_prints_every_metric_under_its_prefix(jobpulse, logged):
    expected = {("train/loss", "train/loss"), ("train/lr", "train/lr")}
    assert _csv_series(jobpulse, logged, "train") == _csv_series(jobpulse, logged, "train/") == expected


def test_metrics_of_a_key_split_by_the_previous_sdk_reads_its_old_series(jobpulse, logged):
    assert _csv_series(jobpulse, OLD_JOB, "train/loss") == {("train", "loss")}
    assert _csv_series(jobpulse, OLD_JOB, "train") == {("train", "loss")}


def test_metrics_of_a_series_as_the_web_ui_names_it(jobpulse, demo):
    assert _csv_series(jobpulse, demo, "loss · train") == {("loss", "train")}


def test_a_key_that_names_nothing_fails_listing_the_keys_as_logged(jobpulse, logged):
    result = jobpulse("metrics", logged, "val/loss")
    assert result.code == 1
    assert f"job '{logged}' has no metric 'val/loss'; it has loss, train/loss, train/lr, val/acc" in result.err
