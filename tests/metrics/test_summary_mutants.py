"""summarize() of a six-request run, every value of summary.json read back by its key and worked out by
hand: status counts, linear-interpolation percentiles (position (n - 1) q of the sorted values), weighted
inter-token gaps written out one by one, throughput over the span, goodput, prefix hit rate, the
breakdown's means over the requests that got a first token, and the SLO verdict."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ttftsim.config.slo import Slo
from ttftsim.metrics.run_summary import Distribution
from ttftsim.metrics.summary import BREAKDOWN, distribution, quantile_intervals, summarize, weighted_distribution

NAN = math.nan
# three gaps of 20 ms, one of 50 ms, two of 100 ms
GAPS = (np.array([0.1, 0.02, 0.05]), np.array([2.0, 3.0, 1.0]))


def _requests() -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "status": ["finished", "finished", "in_flight", "rejected", "aborted", "failed"],
            "ttft_s": [0.1, 0.3, 0.2, NAN, NAN, NAN],
            "tpot_s": [0.01, 0.03, NAN, NAN, NAN, NAN],
            "e2e_s": [1.0, 2.0, NAN, NAN, NAN, NAN],
            "num_preemptions": [0, 2, 0, 0, 1, 0],
            "generated_tokens": [10, 20, 3, 0, 0, 0],
            "prompt_tokens": [100, 200, 50, 70, 80, 90],
            "session_id": [-1] * 6,
        }
    )
    for column in BREAKDOWN:
        frame[column] = 0.0
    frame["queue_s"] = [0.01, 0.05, 0.03, NAN, NAN, NAN]
    frame["prefill_s"] = [0.06, 0.2, 0.1, NAN, NAN, NAN]
    return frame


def _approx(values: Mapping[str, float]) -> dict[str, object]:
    return {key: pytest.approx(value, abs=1e-12) for key, value in values.items()}


def test_every_figure_of_a_six_request_run() -> None:
    summary = summarize(_requests(), GAPS, Slo(ttft_s=0.2, ttft_p99_s=0.5), (400, 100), 0.5).to_json()
    assert summary["requests"] == {
        "arrived": 6,
        "finished": 2,
        "rejected": 1,
        "in_flight": 1,
        "aborted": 1,
        "failed": 1,
        "preemptions": 3,
    }
    # TTFT of the three served, sorted 0.1, 0.2, 0.3: P90 at position 1.8 = 0.2 + 0.8 x 0.1
    assert summary["ttft_s"] == _approx({"mean": 0.2, "p50": 0.2, "p90": 0.28, "p99": 0.298, "p999": 0.2998})
    # TPOT and end-to-end of the two finished only
    assert summary["tpot_s"] == _approx({"mean": 0.02, "p50": 0.02, "p90": 0.028, "p99": 0.0298, "p999": 0.02998})
    assert summary["e2e_s"] == _approx({"mean": 1.5, "p50": 1.5, "p90": 1.9, "p99": 1.99, "p999": 1.999})
    # gaps 0.02 0.02 0.02 0.05 0.1 0.1: P50 at position 2.5 = 0.035; P90 at 4.5 = 0.1; mean 0.31 / 6
    assert summary["itl_s"] == _approx({"mean": 0.31 / 6, "p50": 0.035, "p90": 0.1, "p99": 0.1, "p999": 0.1})
    assert summary["ttft_breakdown_mean_s"] == _approx(
        {name: 0.0 for name in BREAKDOWN} | {"queue_s": 0.03, "prefill_s": 0.12}
    )
    # over half a second: 2 finished, 33 output tokens (every request's), 300 prompt tokens (the finished'),
    # one good request (finished with TTFT <= 0.2 s)
    assert summary["throughput"] == _approx(
        {
            "span_s": 0.5,
            "requests_per_s": 4.0,
            "output_tokens_per_s": 66.0,
            "prompt_tokens_per_s": 600.0,
            "goodput_requests_per_s": 2.0,
        }
    )
    assert summary["prefix_cache"] == {"query_tokens": 400, "hit_tokens": 100, "hit_rate": 0.25}
    assert summary["slo"] == {"ttft_p99_s": 0.5, "p99_counting_unserved_s": "inf", "met": False}
    assert summary["ttft_interval_s"]["num_samples"] == 3
    assert summary["ttft_interval_s"]["p50"] == {"lo": 0.1, "hi": 0.3, "rank_lo": 1, "rank_hi": 3} | {
        "coverage": pytest.approx(0.75)  # P(1 <= B <= 2), B ~ Binomial(3, 1/2) = 6/8
    }


def test_a_met_slo_and_no_prefix_queries() -> None:
    requests = _requests().iloc[:2]
    summary = summarize(requests, GAPS, Slo(ttft_p99_s=0.5), (0, 0), 2.0).to_json()
    assert summary["prefix_cache"] == {"query_tokens": 0, "hit_tokens": 0, "hit_rate": 0.0}
    assert summary["slo"] == {"ttft_p99_s": 0.5, "p99_counting_unserved_s": 0.3, "met": True}
    assert summary["throughput"]["goodput_requests_per_s"] is None  # no per-request target to tell a good one by
    assert summary["requests"] == {
        "arrived": 2,
        "finished": 2,
        "rejected": 0,
        "in_flight": 0,
        "aborted": 0,
        "failed": 0,
        "preemptions": 2,
    }


def test_the_verdict_judges_gaps_and_goodput_from_the_run() -> None:
    slo = Slo(itl_p99_s=0.08, ttft_s=0.2, goodput_share=0.2)
    summary = summarize(_requests(), GAPS, slo, (0, 0), 1.0).to_json()
    # the gaps' P99 (inverted CDF of 6 gaps) is 0.1 > 0.08; goodput 1 of 6 arrivals < 0.2
    assert summary["slo"] == {
        "itl_p99_s": 0.08,
        "itl_p99_of_gaps_s": 0.1,
        "goodput_share": 0.2,
        "goodput_share_achieved": pytest.approx(1 / 6),
        "met": False,
    }


def test_two_values_have_an_interval() -> None:
    intervals = quantile_intervals(np.array([0.2, 0.1]))
    assert intervals.num_samples == 2
    assert asdict(intervals.p50) == {"lo": 0.1, "hi": 0.2, "rank_lo": 1, "rank_hi": 2, "coverage": pytest.approx(0.5)}


def test_no_slo_target_leaves_no_verdict() -> None:
    summary = summarize(_requests(), GAPS, Slo(), (1, 1), 1.0).to_json()
    assert "slo" not in summary


def test_a_run_where_nobody_got_a_token() -> None:
    requests = _requests().iloc[3:].copy()
    requests["ttft_s"] = [None, None, None]  # an object column, as a frame built from records has it
    summary = summarize(requests, (np.zeros(0), np.zeros(0)), Slo(ttft_p99_s=1.0), (0, 0), 1.0).to_json()
    assert summary["ttft_s"] == dict.fromkeys(("mean", "p50", "p90", "p99", "p999"))
    assert summary["itl_s"] == dict.fromkeys(("mean", "p50", "p90", "p99", "p999"))
    assert summary["ttft_breakdown_mean_s"] == dict.fromkeys(BREAKDOWN)
    assert summary["slo"] == {"ttft_p99_s": 1.0, "p99_counting_unserved_s": "inf", "met": False}
    assert summary["ttft_interval_s"]["num_samples"] == 0
    assert (summary["requests"]["finished"], summary["requests"]["rejected"]) == (0, 1)


def test_no_arrivals_at_all_is_judged_not_met() -> None:
    empty = _requests().iloc[0:0]
    summary = summarize(empty, (np.zeros(0), np.zeros(0)), Slo(ttft_p99_s=1.0), (0, 0), 1.0).to_json()
    assert summary["slo"] == {"ttft_p99_s": 1.0, "p99_counting_unserved_s": None, "met": False}
    assert summary["requests"]["arrived"] == 0


def test_one_value_is_every_percentile_and_non_finite_values_are_left_out() -> None:
    assert distribution(np.array([0.5])) == Distribution(0.5, 0.5, 0.5, 0.5, 0.5)
    assert distribution(np.array([np.inf, 0.5, np.nan, 1.5])) == Distribution(1.0, 1.0, 1.4, 1.49, 1.499)
    assert distribution(np.array([np.inf])) == Distribution(None, None, None, None, None)


def test_weighted_gaps_equal_the_gaps_written_out() -> None:
    got = asdict(weighted_distribution(np.array([0.3, 0.1]), np.array([1.0, 1.0])))
    assert got == _approx({"mean": 0.2, "p50": 0.2, "p90": 0.28, "p99": 0.298, "p999": 0.2998})
    one = asdict(weighted_distribution(np.array([0.4]), np.array([3.0])))
    assert one == _approx({"mean": 0.4, "p50": 0.4, "p90": 0.4, "p99": 0.4, "p999": 0.4})
    assert weighted_distribution(np.array([0.4]), np.array([0.0])) == Distribution(None, None, None, None, None)
    assert weighted_distribution(np.zeros(0), np.zeros(0)) == Distribution(None, None, None, None, None)


def test_the_terminal_gives_goodput_only_where_a_request_can_be_good_or_not() -> None:
    """Without a per-request target every finished request would count as good, goodput would repeat the
    throughput beside a missed SLO: it is left out (null in the JSON), as vllm bench serve without --goodput."""
    from rich.console import Console

    from ttftsim.render.summary import render_summary
    from ttftsim.simulate import load_scenario, simulate

    example = load_scenario(Path(__file__).resolve().parents[2] / "examples" / "llama31-8b-h100.yaml")
    short = example.workload.model_copy(update={"num_requests": 40, "duration_s": None})
    for slo, said in ((Slo(ttft_p99_s=0.5), None), (Slo(ttft_s=1e-6, ttft_p99_s=0.5), "goodput 0.00 req/s")):
        result = simulate(example.model_copy(update={"workload": short, "slo": slo}))
        console = Console(width=300, record=True)
        render_summary(console, result.summary())
        line = next(x for x in console.export_text().splitlines() if x.startswith("throughput:"))
        assert ("goodput" not in line) if said is None else (said in line), line
