"""Every SLO target a user can state (config/slo.py) judged with the one SLO implementation (metrics/slo.py):
figures worked by hand on tiny runs, the goodput target, priority classes, and what the schema refuses."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from ttftsim.config.slo import Slo, judged_slo, percentile_slo
from ttftsim.metrics.percentiles import slo_percentile, weighted_slo_percentile
from ttftsim.metrics.slo import SloFigures, SloVerdict, figure_key, judge, slo_figures

# four arrivals: three finished (one with a single output token: no TPOT), one never served
REQUESTS = pd.DataFrame(
    {
        "status": ["finished", "finished", "finished", "rejected"],
        "ttft_s": [0.1, 0.2, 0.3, None],
        "tpot_s": [0.02, 0.04, None, None],
        "e2e_s": [1.0, 2.0, 0.3, None],
        "session_id": [-1, -1, -1, -1],
        "generated_tokens": [50, 40, 1, 0],
        "priority": [0, 1, 0, 1],
    }
)
GAPS = (np.array([0.01, 0.05]), np.array([9.0, 1.0]))  # nine gaps of 10 ms, one of 50 ms


def test_figures_by_hand() -> None:
    figures = slo_figures(REQUESTS, None, GAPS)
    # TTFT over every arrival, sorted [0.1, 0.2, 0.3, inf]: P50 is the 2nd, P90/P99 the unserved one
    assert (figures.ttft_p50_s, figures.ttft_p90_s, figures.ttft_p99_s) == (0.2, math.inf, math.inf)
    assert figures.ttft_mean_s == pytest.approx(0.2)  # over the three that got a first token
    # TPOT percentiles: [0.02, 0.04, 0 (one token), inf (never finished)] -> P50 is 0.02
    assert (figures.tpot_p50_s, figures.tpot_p99_s) == (0.02, math.inf)
    assert figures.tpot_mean_s == pytest.approx(0.03)  # the two with a second token, as vllm bench serve
    assert figures.e2e_mean_s == pytest.approx(3.3 / 3)
    # ITL: ten pooled gaps; 90 % of them are 10 ms, so P90 is 10 ms and P95 50 ms; the mean 14 ms
    assert (figures.itl_p50_s, figures.itl_p90_s, figures.itl_p95_s) == (0.01, 0.01, 0.05)
    assert figures.itl_mean_s == pytest.approx(0.014)
    assert math.isnan(figures.goodput_share)  # no per-request target asked
    assert figures.output_tokens_per_unit == pytest.approx(91 / 3)


def test_no_gaps_recorded_is_not_a_pass() -> None:
    figures = slo_figures(REQUESTS)
    assert figures.itl_mean_s == math.inf and figures.itl_p99_s == math.inf
    assert not figures.meets(Slo(itl_p99_s=10.0))


def test_weighted_slo_percentile_is_that_of_the_samples_written_out() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        values = rng.choice([0.005, 0.01, 0.02, 0.03, 0.5, math.inf], size=int(rng.integers(1, 12)))
        weights = rng.integers(1, 6, size=len(values)).astype(np.float64)
        written_out = np.repeat(values, weights.astype(int))
        for q in (0.5, 0.9, 0.95, 0.99):
            assert weighted_slo_percentile(values, weights, q) == slo_percentile(written_out, q)
    assert weighted_slo_percentile(np.zeros(0), np.zeros(0), 0.5) == math.inf


def test_mean_and_percentile_targets_judged_each_with_its_figure() -> None:
    slo = Slo(tpot_mean_s=0.03, ttft_p50_s=0.19, e2e_p90_s=5.0, itl_p90_s=0.01)
    verdict = judge(slo, slo_figures(REQUESTS, slo, GAPS))
    assert verdict is not None and verdict.to_json() == {
        "ttft_p50_s": 0.19,
        "ttft_p50_counting_unserved_s": 0.2,
        "tpot_mean_s": 0.03,
        "tpot_mean_of_served_s": pytest.approx(0.03),
        "itl_p90_s": 0.01,
        "itl_p90_of_gaps_s": 0.01,
        "e2e_p90_s": 5.0,
        "e2e_p90_counting_unserved_s": "inf",
        "met": False,
    }
    assert [c.is_met for c in verdict.checks] == [False, True, True, False]
    assert SloVerdict.from_json(verdict.to_json()) == verdict


def test_goodput_share_is_distserve_attainment() -> None:
    # good: finished with TTFT <= 0.25 s and TPOT <= 30 ms: only the first (0.1 s, 20 ms); the second misses
    # TPOT, the third TTFT (0.3 s), the fourth was never served: 1 of 4
    slo = Slo(ttft_s=0.25, tpot_s=0.03, goodput_share=0.25)
    figures = slo_figures(REQUESTS, slo)
    assert figures.goodput_share == 0.25
    verdict = judge(slo, figures)
    assert verdict is not None and verdict.met
    assert verdict.to_json() == {"goodput_share": 0.25, "goodput_share_achieved": 0.25, "met": True}
    stricter = Slo(ttft_s=0.25, tpot_s=0.03, goodput_share=0.3)
    assert not slo_figures(REQUESTS, stricter).meets(stricter)
    # an end-to-end target alone: finished within 1.5 s -> two of four
    assert slo_figures(REQUESTS, Slo(e2e_s=1.5, goodput_share=0.5)).goodput_share == 0.5


def test_targets_per_priority_class() -> None:
    slo = Slo.model_validate({"ttft_p99_s": 1.0, "per_priority": {0: {"ttft_p99_s": 0.35}, 1: {"ttft_mean_s": 0.1}}})
    figures = slo_figures(REQUESTS, slo, GAPS)
    assert figures.per_priority[0].ttft_p99_s == 0.3  # priority 0: [0.1, 0.3]
    assert figures.per_priority[1].ttft_p99_s == math.inf  # priority 1: [0.2, unserved]
    verdict = judge(slo, figures)
    assert verdict is not None and verdict.to_json() == {
        "ttft_p99_s": 1.0,
        "p99_counting_unserved_s": "inf",
        "per_priority": {
            "0": {"ttft_p99_s": 0.35, "p99_counting_unserved_s": 0.3, "met": True},
            "1": {"ttft_mean_s": 0.1, "ttft_mean_of_served_s": 0.2, "met": False},
        },
        "met": False,
    }
    assert SloVerdict.from_json(verdict.to_json()) == verdict
    assert SloFigures.from_dict(figures.as_dict()) == figures


def test_figure_keys_keep_the_old_summary_names() -> None:
    assert figure_key("ttft_p99_s") == "p99_counting_unserved_s"
    assert figure_key("tpot_p99_s") == "tpot_p99_counting_unserved_s"
    assert figure_key("ttft_p90_s") == "ttft_p90_counting_unserved_s"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"goodput_share": 0.99}, "goodput_share (0.99) needs a per-request target"),
        ({"goodput_share": 1.5, "ttft_s": 1}, "less than or equal to 1"),
        ({"per_priority": {0: {"itl_p99_s": 0.1}}}, "itl_p99_s cannot be judged per class"),
        ({"per_priority": {1: {"ttft_s": 0.1}}}, "sets no target that is judged"),
        ({"tpot_mean_s": 0}, "greater than 0"),
    ],
)
def test_the_schema_refuses(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        Slo.model_validate(data)


def test_a_plan_takes_any_judged_target_and_a_deployment_needs_p99_ttft() -> None:
    assert judged_slo(Slo(tpot_mean_s=0.06), "a plan").tpot_mean_s == 0.06
    assert judged_slo(Slo(ttft_s=1.0, goodput_share=0.99), "a plan").goodput_share == 0.99
    with pytest.raises(ValueError, match="ttft_s \\(1\\) are per-request targets; a plan judges them only with"):
        judged_slo(Slo(ttft_p99_s=1.0, ttft_s=1.0), "a plan")
    with pytest.raises(ValueError, match="a plan needs a target to meet"):
        judged_slo(Slo(), "a plan")
    with pytest.raises(ValueError, match="ttft_p99_s is required"):
        percentile_slo(Slo(tpot_mean_s=0.06), "a deployment")
