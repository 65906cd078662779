"""The server's side of a run: vLLM's TTFT histogram over the run (two real /metrics snapshots of the CPU
server bracketing the poisson-2rps-detailed run) beside the client's values and the prediction."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_cli import _assert_one_line_error, run
from ttftsim.accuracy.reports import measured_cases
from ttftsim.accuracy.server_view import server_histogram, server_view, table_lines

REPORTS = Path(__file__).resolve().parents[1] / "data" / "reports"
CLIENT = REPORTS / "vllm-bench-0.32.0" / "poisson-2rps-detailed.json"
AFTER = REPORTS / "prometheus-2.42" / "metrics-after.txt"
BEFORE = REPORTS / "prometheus-2.42" / "metrics-before.txt"
DEPLOYMENT = REPORTS / "cpu-server.yaml"


def sample(path: Path, series: str) -> float:
    """One vllm:time_to_first_token_seconds series' value, read from the file by hand."""
    pattern = re.compile(rf"^vllm:time_to_first_token_seconds_{series}\{{[^}}]*\}} (\S+)$", re.M)
    return float(pattern.search(path.read_text()).group(1))  # type: ignore[union-attr]


def test_server_mean_is_the_histograms_sum_over_its_count_and_the_share_is_the_gap() -> None:
    histogram = server_histogram(AFTER, BEFORE)
    count = sample(AFTER, "count") - sample(BEFORE, "count")
    mean = (sample(AFTER, "sum") - sample(BEFORE, "sum")) / count
    with measured_cases(CLIENT, DEPLOYMENT) as (cases, base):
        view = server_view(cases[0], base, histogram)
    assert count == 30 and view.num_server_requests == 30
    assert view.server["ttft_mean"] == pytest.approx(mean)
    client_mean = cases[0].stages[0].measured["ttft_mean"]
    assert view.frontend_share()["ttft_mean"] == pytest.approx((client_mean - mean) / client_mean)
    # 16 of the 30 requests were at or below 40 ms by the server's histogram, 15 by the client's own values
    row = next(r for r in view.buckets if r.bound_s == 0.04)
    assert (row.server, row.client) == (pytest.approx(16 / 30), pytest.approx(15 / 30))
    # the client's median read from its values in the server's buckets: rank 15 of 30 is the top of (20, 40] ms
    assert view.client_bucketed["ttft_p50"] == pytest.approx(0.04)
    assert row.predicted is not None and 0.0 <= row.predicted <= 1.0
    assert any(line.startswith("mean") and "(10%)" in line for line in table_lines(view))
    assert view.num_client_requests == 30 and not view.counts_differ()  # the same run: no warning
    assert not [line for line in table_lines(view) if line.startswith("warning")]


def test_server_metrics_of_another_run_are_said() -> None:
    """The 4-client report (24 requests) beside the snapshots of the 2 req/s run (30): compared without a word
    before (cold trial E5)."""
    with measured_cases(REPORTS / "vllm-bench-0.32.0" / "concurrency-4-summary.json", DEPLOYMENT) as (cases, base):
        view = server_view(cases[0], base, server_histogram(AFTER, BEFORE))
    assert (view.num_server_requests, view.num_client_requests) == (30, 24) and view.counts_differ()
    assert table_lines(view)[1].startswith("warning: the server's histogram counts 30 requests, the report 24: ")


def test_server_before_alone_is_one_line() -> None:
    result = run("accuracy", str(CLIENT), "--deployment", str(DEPLOYMENT), "--server-before", str(BEFORE))
    _assert_one_line_error(result, "--server-before", "--server-metrics")


def test_server_metrics_need_one_open_loop_run() -> None:
    guidellm = REPORTS / "guidellm-0.8.1" / "benchmarks.json"
    result = run("accuracy", str(guidellm), "--deployment", str(DEPLOYMENT), "--server-metrics", str(AFTER))
    _assert_one_line_error(result, "--server-metrics", "2 run(s)")
