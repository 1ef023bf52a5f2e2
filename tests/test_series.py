"""``one_value``: a text column found to hold one value by its buffers, never by a guess."""

from __future__ import annotations

import pyarrow as pa
import pytest

from jobpulse.store.series import one_value


@pytest.mark.parametrize(
    ("column", "value"),
    [
        (pa.array(["job-1"] * 1000), "job-1"),
        (pa.array(["", "", ""]), ""),
        (pa.array(["ünï", "ünï"]), "ünï"),
        (pa.array(["x", "ab", "ab"]).slice(1), "ab"),
        (pa.chunked_array([["ab", "ab"], [], ["ab"]], pa.string()), "ab"),
        (pa.array(["ab", "ab"], pa.large_string()), "ab"),
    ],
    ids=["many", "empty-text", "unicode", "a-slice", "chunks", "large-string"],
)
def test_a_column_of_one_value_is_found(column, value):
    assert one_value(column) == value


@pytest.mark.parametrize(
    "column",
    [
        pa.array(["ab", "ab", "ac"]),  # as long, other bytes
        pa.array(["ab", "ba"]),
        pa.array(["ab", "ab", "abc"]),  # longer
        pa.array(["a", "ab", "b"]),  # the bytes of one value repeated, cut otherwise
        pa.array(["x", "ab", "ab"]),
        pa.chunked_array([["ab", "ab"], ["ac"]]),
        pa.array(["ab", None]),
        pa.array([], pa.string()),
        pa.array([1, 1]),
        pa.array(["ab", "ab"]).dictionary_encode(),
    ],
    ids=[
        "other-bytes",
        "swapped",
        "longer",
        "cut-otherwise",
        "first-differs",
        "other-chunk",
        "null",
        "no-rows",
        "numbers",
        "dictionary",
    ],
)
def test_any_other_column_is_not(column):
    assert one_value(column) is None
