"""Charts asked for again are answered from memory, and only while their series are unchanged."""

from __future__ import annotations

from helpers import post_columns, scalar_series
from jobpulse.store.charts import ChartCache

CHART = "/jp/v1/jobs/j1/scalars/chart"


class CountingEngine:
    """The real engine, with a count of the queries that read the chart rollup or the points."""

    def __init__(self, engine) -> None:  # noqa: ANN001
        self._engine = engine
        self.chart_reads = 0

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self._engine, name)

    def query(self, sql: str, params=None):  # noqa: ANN001, ANN201
        if "scalars_rollup" in sql or "scalars FINAL" in sql:
            self.chart_reads += 1
        return self._engine.query(sql, params)


def _chart(client, **params):  # noqa: ANN001, ANN202
    answer = client.get(CHART, params={"metric": "loss", "buckets": 4, **params})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_repeated_chart_does_not_read_the_points_again(client, store):
    post_columns(client, scalar_series("j1", "loss", [float(i) for i in range(1000)]))
    counting = CountingEngine(store.engine)
    store.scalars._engine = counting
    first = _chart(client)
    reads = counting.chart_reads
    assert reads >= 1
    assert _chart(client) == first
    assert counting.chart_reads == reads


def test_new_points_are_in_the_next_chart(client):
    post_columns(client, scalar_series("j1", "loss", [1.0] * 100))
    assert _chart(client)["series"][0]["count"] == [25, 25, 25, 25]
    post_columns(client, scalar_series("j1", "loss", [2.0] * 100, start=100))
    chart = _chart(client)
    assert sum(chart["series"][0]["count"]) == 200 and chart["range"] == [0, 199]


def test_a_replaced_point_is_in_the_next_chart(client):
    post_columns(client, scalar_series("j1", "loss", [1.0] * 100))
    assert _chart(client)["series"][0]["mean"] == [1.0] * 4
    post_columns(client, scalar_series("j1", "loss", [5.0] * 25, start=25))  # the second bucket's points
    assert _chart(client)["series"][0]["mean"] == [1.0, 5.0, 1.0, 1.0]


def test_data_deleted_and_sent_again_is_charted_anew(client, store):
    post_columns(client, scalar_series("j1", "loss", [1.0] * 100))
    assert _chart(client)["series"][0]["mean"] == [1.0] * 4
    store.jobs.delete_data("j1")
    post_columns(client, scalar_series("j1", "loss", [7.0] * 100))
    assert _chart(client)["series"][0]["mean"] == [7.0] * 4


def test_changing_the_answer_does_not_change_the_memory(client, store):
    post_columns(client, scalar_series("j1", "loss", [1.0] * 100))
    first = store.scalars.chart(["j1"], "loss", buckets=4)
    first["series"][0]["last"] = ["changed"]
    first["range"] = None
    again = store.scalars.chart(["j1"], "loss", buckets=4)
    assert again["range"] == [0, 99] and again["series"][0]["last"] == [1.0] * 4


def test_the_memory_keeps_the_most_recently_used_charts():
    cache = ChartCache(2)
    chart = {"series": []}
    cache.put(("a",), 1, chart)
    cache.put(("b",), 1, chart)
    assert cache.get(("a",), 1) is not None  # a is now the most recent
    cache.put(("c",), 1, chart)
    assert cache.get(("b",), 1) is None
    assert cache.get(("a",), 1) is not None and cache.get(("c",), 1) is not None
    assert cache.get(("a",), 2) is None  # another version of the series


def test_a_memory_of_size_zero_keeps_nothing():
    cache = ChartCache(0)
    cache.put(("a",), 1, {"series": []})
    assert cache.get(("a",), 1) is None
