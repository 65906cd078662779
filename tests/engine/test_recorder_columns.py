"""The recorder's columns: rows in, the same rows and a frame of the right dtypes out, kept as numpy chunks
and not copied again by the frame (a day's iterations are millions of rows)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ttftsim.engine.recorder import STEP_COLUMNS, Columns, Recorder

DTYPES = {"id": "int64", "status": "object", "ttft_s": "float64"}


def test_rows_come_back_as_appended_and_the_frame_has_each_columns_dtype() -> None:
    columns = Columns(("id", "status", "ttft_s"), DTYPES)
    for row in [(3, "finished", 0.25), (1, "rejected", float("nan")), (2, "in_flight", 1.5)]:
        columns.append(row)
    assert len(columns) == 3
    assert [r[:2] for r in columns] == [(3, "finished"), (1, "rejected"), (2, "in_flight")]
    assert list(columns.rows_from(2)) == [(2, "in_flight", 1.5)]
    assert list(columns.column("id")) == [3, 1, 2]
    frame = columns.frame()
    assert frame.dtypes.astype(str).to_dict() == DTYPES
    expected = pd.DataFrame(
        {
            "id": pd.Series([3, 1, 2], dtype="int64"),
            "status": pd.Series(["finished", "rejected", "in_flight"], dtype="object"),
            "ttft_s": [0.25, np.nan, 1.5],
        }
    )
    pd.testing.assert_frame_equal(frame, expected)


def test_an_empty_table_still_has_its_columns_and_dtypes() -> None:
    frame = Columns(("id", "status", "ttft_s"), DTYPES).frame()
    assert list(frame.columns) == ["id", "status", "ttft_s"] and len(frame) == 0
    assert frame.dtypes.astype(str).to_dict() == DTYPES


def test_the_steps_frame_reads_the_recorded_chunks_without_a_copy() -> None:
    recorder = Recorder()
    recorder.step(0.5, 0.01, 0, 512, 3, 1, 0.25, 1)
    recorder.step(0.51, 0.02, 1, 4, 4, 0, 0.5, 2)
    frame = recorder.steps_frame()
    assert list(frame.columns) == list(STEP_COLUMNS)
    assert frame["num_tokens"].tolist() == [512, 4] and frame["kv_usage"].tolist() == [0.25, 0.5]
    assert np.shares_memory(frame["time_s"].to_numpy(), recorder.steps.chunks[0][0])


def test_the_cluster_steps_are_joined_in_time_order_and_not_copied_when_already_ordered() -> None:
    from ttftsim.simulate import _time_ordered

    dtypes = {"time_s": "float64", "replica": "int64"}

    def table(rows: list[tuple[float, int]], chunk_rows: int = 2) -> Columns:
        columns = Columns(("time_s", "replica"), dtypes, chunk_rows=chunk_rows)
        for row in rows:
            columns.append(row)
        return columns

    decode = [(0.0, 0), (0.2, 1), (0.2, 0)]
    joined = _time_ordered([table(decode), table([(0.1, 5), (0.2, 5)])])
    assert list(zip(joined["time_s"], joined["replica"], strict=True)) == [
        (0.0, 0),
        (0.1, 5),
        (0.2, 1),  # equal times keep the recorders' order: decode rows first, each in its own order
        (0.2, 0),
        (0.2, 5),
    ]
    assert list(joined.index) == [0, 1, 2, 3, 4]
    ordered = table(decode)
    alone = _time_ordered([ordered, table([])])  # nothing to join, already in order: the kept arrays themselves
    assert alone["replica"].tolist() == [0, 1, 0]
    assert np.shares_memory(alone["time_s"].to_numpy(), ordered.chunks[0][0])
    late = table([(0.3, 2), (0.1, 1), (0.2, 3), (0.1, 4)], chunk_rows=3)  # a long step recorded when it ended
    frame = _time_ordered([late])
    assert list(zip(frame["time_s"], frame["replica"], strict=True)) == [(0.1, 1), (0.1, 4), (0.2, 3), (0.3, 2)]
    assert list(late) == [(0.1, 1), (0.1, 4), (0.2, 3), (0.3, 2)]  # reordered where kept, not copied
    assert np.shares_memory(frame["replica"].to_numpy(), late.chunks[0][1])
    assert _time_ordered([table([]), table([])]).columns.tolist() == ["time_s", "replica"]


def test_the_requests_frame_is_in_request_order_and_the_recorder_keeps_that_order() -> None:
    recorder = Recorder()
    recorder.rows = Columns(("request_id", "status", "ttft_s"), {"request_id": "int64", **DTYPES}, chunk_rows=2)
    for row in [(4, "finished", 0.4), (1, "finished", 0.1), (3, "rejected", float("nan")), (1, "in_flight", 0.5)]:
        recorder.rows.append(row)
    frame = recorder.requests_frame()
    assert frame["request_id"].tolist() == [1, 1, 3, 4]
    assert frame["status"].tolist() == ["finished", "in_flight", "rejected", "finished"]  # ties as recorded
    assert list(frame.index) == [0, 1, 2, 3]
    assert np.shares_memory(frame["ttft_s"].to_numpy(), recorder.rows.chunks[0][2])
    assert [r[0] for r in recorder.rows] == [1, 1, 3, 4]


def test_a_row_appended_after_a_frame_leaves_that_frame_as_it_was() -> None:
    columns = Columns(("id", "status", "ttft_s"), DTYPES)
    columns.append((1, "finished", 0.5))
    before = columns.frame()
    columns.append((2, "in_flight", float("nan")))  # to a new chunk: the arrays `before` reads stay as they were
    assert before["id"].tolist() == [1] and before["ttft_s"].tolist() == [0.5]
    assert columns.frame()["id"].tolist() == [1, 2] and list(columns.column("status")) == ["finished", "in_flight"]


def test_rows_are_kept_in_chunks_and_read_back_across_them() -> None:
    columns = Columns(("id", "status", "ttft_s"), DTYPES, chunk_rows=2)
    rows = [(i, f"s{i}", i / 4) for i in range(5)]
    for row in rows:
        columns.append(row)
    assert [len(chunk[0]) for chunk in columns.chunks] == [2, 2] and list(columns.rows_from(4)) == [rows[4]]
    assert len(columns) == 5 and list(columns) == rows
    assert list(columns.rows_from(3)) == rows[3:] and list(columns.rows_from(5)) == []
    assert columns.column("status") == ["s0", "s1", "s2", "s3", "s4"]
    assert columns.frame()["ttft_s"].tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_inter_token_gaps_come_back_in_recorded_order_with_their_weights() -> None:
    """A stepped gap, a closed-form run's gaps (a numpy array, each seen by the run's 4 requests) and a list of
    gaps: one array of values and one of weights, in the order recorded; a later gap does not change samples
    already taken."""
    recorder = Recorder()
    recorder.itl(0.010)
    recorder.itl_run(np.array([0.020, 0.021, 0.022]), 4)
    recorder.itl_run([0.030, 0.031], 2)
    values, weights = recorder.itl_samples()
    assert values.tolist() == [0.010, 0.020, 0.021, 0.022, 0.030, 0.031]
    assert weights.tolist() == [1, 4, 4, 4, 2, 2] and weights.dtype == np.uint32
    recorder.itl(0.040, 3)
    assert values.tolist()[-1] == 0.031 and recorder.itl_samples()[1].tolist()[-1] == 3.0
    handed, _ = recorder.itl_samples(copy=False)  # the recorded arrays themselves, and new ones begun
    assert handed.tolist()[-1] == 0.040 and len(recorder.itl_samples()[0]) == 0
    recorder.itl(0.050)
    assert handed.tolist()[-1] == 0.040 and recorder.itl_samples()[0].tolist() == [0.050]


def test_chunks_keep_every_value_exact_whatever_the_mix_of_number_and_text_columns() -> None:
    big = 2**62 + 1  # an integer column is kept as int64, past the integers a double holds exactly
    tables = {
        ("id", "ttft_s"): [(big, 0.1 + 0.2), (-1, float("nan")), (7, -0.0)],  # numbers only
        ("id", "status", "ttft_s"): [(big, "finished", 0.3), (2, "rejected", float("nan")), (3, "x", 1e-300)],
        ("status", "id"): [("a", big), ("b", -5), ("c", 0)],  # one number column
        ("status",): [("a",), ("b",), ("c",)],  # none
    }
    for names, rows in tables.items():
        columns = Columns(names, {name: DTYPES[name] for name in names}, chunk_rows=2)
        for row in rows:
            columns.append(row)
        frame = columns.frame()
        assert frame.dtypes.astype(str).to_dict() == {name: DTYPES[name] for name in names}
        for index, name in enumerate(names):
            got, want = frame[name].tolist(), [row[index] for row in rows]
            assert [repr(v) for v in got] == [repr(v) for v in want], name  # nan, -0.0 and the big id to the bit


def test_a_packed_row_of_the_wrong_size_or_text_count_is_refused_and_nothing_is_kept() -> None:
    columns = Columns(("id", "status", "reason", "ttft_s"), {"reason": "object", **DTYPES})
    columns.append((1, "finished", "", 0.5))
    for packed, texts in [(columns.pack(2, 0.5), ("finished",)), (columns.pack(2, 0.5)[:-1], ("finished", ""))]:
        with pytest.raises(ValueError):
            columns.append_packed(packed, texts)
    assert list(columns) == [(1, "finished", "", 0.5)]


def test_a_row_the_columns_cannot_hold_exactly_is_refused() -> None:
    # no integer id, a float id, one past int64, too long, too short
    for row in [(float("nan"), 0.5), (1.0, 0.5), (2**63, 0.5), (1, 0.5, 7), (1,)]:
        columns = Columns(("id", "ttft_s"), {"id": "int64", "ttft_s": "float64"}, chunk_rows=1)
        with pytest.raises(ValueError):
            columns.append(row)
