"""SLO figures, the typed summary's JSON, order-statistic intervals and weighted percentiles: the cases the
mutation run (docs/testing.md) showed no test could tell apart. Known answers: binomial probabilities
written out by hand (or read from scipy.stats.binom), numpy's own quantile of the samples written out,
and per-request SLO checks at exactly the target."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from ttftsim.config.slo import Slo, Targets
from ttftsim.metrics.intervals import (
    Interval,
    mean_interval,
    overlaps,
    point,
    rank_interval,
    reported_levels,
    reported_quantile_interval,
    sample_quantile_interval,
)
from ttftsim.metrics.percentiles import weighted_percentile, weighted_slo_percentile
from ttftsim.metrics.run_summary import ClusterFigures, ColdStarts, PrefixCache, RunSummary, SimulationFacts
from ttftsim.metrics.slo import SloVerdict, good_requests, judge, slo_figures
from ttftsim.metrics.summary import summarize

NAN = math.nan


def _requests() -> pd.DataFrame:
    """a: one-token request at exactly the TTFT and end-to-end targets; b: served, still running;
    c: TTFT too long; d: TPOT exactly at target; e: TPOT too long; f: aborted with an end-to-end figure."""
    return pd.DataFrame(
        {
            "status": ["finished", "in_flight", "finished", "finished", "finished", "aborted"],
            "ttft_s": [0.2, 0.1, 0.5, 0.1, 0.1, 0.1],
            "tpot_s": [NAN, NAN, 0.01, 0.05, 0.06, NAN],
            "e2e_s": [1.0, NAN, 0.9, 0.5, 0.5, 5.0],
            "generated_tokens": [1, 4, 10, 10, 10, 2],
            "session_id": [0, -1, 0, 1, -1, -1],
            "priority": [0, 0, 1, 1, 1, 0],
        }
    )


PER_REQUEST = Slo(ttft_s=0.2, tpot_s=0.05, e2e_s=1.0)


def test_good_requests_meet_every_per_request_target_at_or_below_it() -> None:
    assert list(good_requests(_requests(), PER_REQUEST)) == [True, False, False, True, False, False]
    assert list(good_requests(_requests(), Slo(e2e_s=0.95))) == [False, False, True, True, True, False]
    assert list(good_requests(_requests(), None)) == [True, False, True, True, True, False]


def test_figures_of_the_six_requests() -> None:
    figures = slo_figures(_requests(), PER_REQUEST, (np.array([0.05]), np.array([1.0])))
    assert figures.goodput_share == pytest.approx(2 / 6)
    assert figures.e2e_mean_s == pytest.approx((1.0 + 0.9 + 0.5 + 0.5) / 4)  # the finished only, not 5.0
    assert figures.itl_mean_s == 0.05  # a single gap
    assert figures.tpot_mean_s == pytest.approx(0.04)  # finished with a TPOT: 0.01, 0.05, 0.06
    # output tokens per unit: sessions 0 and 1 are two units, the finished one-off request a third: 31 / 3
    assert figures.output_tokens_per_unit == pytest.approx(31 / 3)
    assert figures.meets(Slo()) and figures.meets(Slo(ttft_p50_s=0.2)) and not figures.meets(Slo(ttft_p50_s=0.05))


def test_each_priority_class_is_judged_by_its_own_targets() -> None:
    slo = Slo(ttft_s=1.0, per_priority={1: Targets(ttft_s=0.2, goodput_share=0.5, ttft_p99_s=0.3)})
    figures = slo_figures(_requests(), slo)
    assert figures.goodput_share == pytest.approx(4 / 6)
    assert figures.per_priority[1].goodput_share == pytest.approx(2 / 3)  # c's 0.5 s misses the class target
    verdict = judge(slo, figures)
    assert verdict is not None and verdict.to_json() == {
        "per_priority": {
            "1": {
                "ttft_p99_s": 0.3,
                "p99_counting_unserved_s": 0.5,
                "goodput_share": 0.5,
                "goodput_share_achieved": pytest.approx(2 / 3),
                "met": False,
            }
        },
        "met": False,
    }
    assert SloVerdict.from_json(verdict.to_json()) == verdict
    unjudged = judge(slo, None)
    assert unjudged is not None and unjudged.to_json()["per_priority"]["1"]["p99_counting_unserved_s"] is None


def test_goodput_share_and_infinite_figures_round_trip() -> None:
    figures = slo_figures(_requests(), PER_REQUEST)
    slo = Slo(ttft_s=0.2, tpot_s=0.05, e2e_s=1.0, goodput_share=0.3, tpot_p99_s=0.1)
    verdict = judge(slo, figures)
    assert verdict is not None
    data = verdict.to_json()
    assert data == {
        "tpot_p99_s": 0.1,
        "tpot_p99_counting_unserved_s": "inf",  # two arrivals never finished
        "goodput_share": 0.3,
        "goodput_share_achieved": pytest.approx(1 / 3),
        "met": False,
    }
    assert [check.is_met for check in verdict.checks] == [False, True]
    assert SloVerdict.from_json(data) == verdict
    none = SloVerdict.from_json({"ttft_p99_s": 0.5, "p99_counting_unserved_s": None, "met": False})
    assert none.checks[0].figure_s is None


# ---- the typed summary ----


def _summary() -> RunSummary:
    frame = _requests().assign(num_preemptions=0, prompt_tokens=10, queue_s=0.0)
    for column in ("gateway_s", "recompute_s", "prefill_s", "waiting_s", "stream_s", "frontend_s"):
        frame[column] = 0.0
    return summarize(frame, (np.array([0.05]), np.array([1.0])), Slo(ttft_p99_s=1.0), (10, 5), 2.0)


def test_a_summary_with_simulation_facts_and_warnings_round_trips() -> None:
    lmcache = PrefixCache(96, 32, 1 / 3)
    summary = dataclasses.replace(
        _summary(), simulation=SimulationFacts(12.5, 300), warnings=("w",), external_prefix_cache=lmcache
    )
    data = summary.to_json()
    assert data["external_prefix_cache"] == {"query_tokens": 96, "hit_tokens": 32, "hit_rate": 1 / 3}
    assert data["simulation"] == {"sim_end_s": 12.5, "iterations": 300}
    assert data["warnings"] == ["w"]
    assert RunSummary.from_json(data) == summary
    plain = _summary()
    assert RunSummary.from_json(plain.to_json()) == plain  # no config, cluster, simulation, warnings, LMCache
    assert "external_prefix_cache" not in plain.to_json()
    assert plain.ttft_interval_s.by_level() == {
        "p50": plain.ttft_interval_s.p50,
        "p90": plain.ttft_interval_s.p90,
        "p99": plain.ttft_interval_s.p99,
        "p999": plain.ttft_interval_s.p999,
    }


def test_a_malformed_summary_is_one_value_error() -> None:
    data = _summary().to_json() | {"requests": 5}
    with pytest.raises(ValueError, match=r"^not a summary this ttftsim version reads: 'int' object"):
        RunSummary.from_json(data)


def test_cluster_figures_keep_optional_parts_only_when_present() -> None:
    cluster = ClusterFigures(1.0, 8.0, 20.0, None, 0.5, 2, ColdStarts(1, 30.0, 30.0), 2, 1, 0, 0, (), (), 0, ())
    with_alerts = dataclasses.replace(cluster, alerts={"pages": 1})
    assert "alerts" not in cluster.to_json() and with_alerts.to_json()["alerts"] == {"pages": 1}
    assert ClusterFigures.from_json(with_alerts.to_json()) == with_alerts
    assert ClusterFigures.from_json(cluster.to_json()) == cluster


# ---- intervals ----


def test_bad_levels_and_confidences_are_refused() -> None:
    for q, confidence in ((0.0, 0.95), (1.0, 0.95), (0.5, 0.0), (0.5, 1.0)):
        with pytest.raises(ValueError, match="need num_samples >= 2"):
            rank_interval(10, q, confidence)
    assert rank_interval(10, 0.5).q == 0.5


def test_p5_of_three_keeps_its_upper_rank_when_the_lower_tail_cannot_be_met() -> None:
    # B ~ Binomial(3, 0.05): F(0) = 0.95^3 = 0.857375 > 0.025; F(1) = 0.857375 + 3 x 0.05 x 0.95^2 = 0.99275
    ranks = rank_interval(3, 0.05)
    assert (ranks.rank_lo, ranks.rank_hi) == (1, 2)
    assert ranks.coverage == pytest.approx(0.99275 - 0.857375, abs=1e-12)


def test_p99_of_two_is_clamped_to_the_two_values() -> None:
    # F(0) = 0.01^2 = 0.0001, F(1) = 1 - 0.99^2 = 0.0199: coverage of X(1)..X(2) is 0.0198
    ranks = rank_interval(2, 0.99)
    assert (ranks.rank_lo, ranks.rank_hi) == (1, 2)
    assert ranks.coverage == pytest.approx(0.0198, abs=1e-12)


def test_p1_of_300_widens_upward_to_keep_the_coverage() -> None:
    # F(0) = 0.99^300 = 0.049 > 0.025: no lower rank; the upper one is the smallest k with F(k-1) >= F(0) + 0.95
    ranks = rank_interval(300, 0.01)
    f0 = 0.99**300
    assert (ranks.rank_lo, ranks.rank_hi) == (1, 11)
    assert binom.cdf(9, 300, 0.01) < f0 + 0.95 <= binom.cdf(10, 300, 0.01)
    assert ranks.coverage == pytest.approx(binom.cdf(10, 300, 0.01) - f0, abs=1e-12)


def test_p1_of_17_reads_the_cdf_right_at_the_end_of_its_window() -> None:
    # F(0) = 0.99^17 = 0.843 > 0.025: no lower rank; F(1) = F(0) + 17 x 0.01 x 0.99^16 = 0.988 >= 0.975
    ranks = rank_interval(17, 0.01)
    assert (ranks.rank_lo, ranks.rank_hi) == (1, 2)
    assert ranks.coverage == pytest.approx(17 * 0.01 * 0.99**16, abs=1e-12)


def test_sample_interval_of_two_values_and_at_another_confidence() -> None:
    two = sample_quantile_interval(np.array([3.0, 1.0]), 0.5)
    assert (two.lo, two.hi, two.basis) == (1.0, 3.0, "order statistics X(1)..X(2) of 2")
    assert two.coverage == pytest.approx(0.5, abs=1e-12)  # P(B = 1) = 1/2
    values = np.arange(1.0, 12.0)  # 1 .. 11
    half = sample_quantile_interval(values, 0.5, confidence=0.5)
    # F(3) = 232/2048 <= 0.25 < F(4) = 562/2048; F(6) = 1486/2048 < 0.75 <= F(7) = 1816/2048: X(4)..X(8)
    assert (half.lo, half.hi) == (4.0, 8.0)
    assert half.coverage == pytest.approx((1816 - 232) / 2048, abs=1e-12)


def test_reported_interval_reads_the_levels_at_exactly_the_ranks() -> None:
    # median of 11: ranks 2..10 (F(1) = 12/2048 <= 0.025 < F(2) = 67/2048; F(8) < 0.975 <= F(9) = 2036/2048),
    # at levels 1/10 and 9/10, reported exactly
    levels = {0.05: 1.0, 0.1: 2.0, 0.5: 5.0, 0.9: 8.0, 0.95: 9.0}
    got = reported_quantile_interval(levels, 11, 0.5)
    assert (got.lo, got.hi) == (2.0, 8.0)
    assert got.coverage == pytest.approx((2036 - 12) / 2048, abs=1e-12)  # F(9) - F(1)
    assert got.basis == "reported p10..p90 around ranks 2..10 of 11 (levels 0.1000..0.9000)"
    ends = reported_quantile_interval({0.0: 0.5, 1.0: 9.5}, 11, 0.5)
    assert (ends.lo, ends.hi, ends.basis) == (
        0.5,
        9.5,
        "reported min..max around ranks 2..10 of 11 (levels 0.1000..0.9000)",
    )
    # at 50% confidence: ranks 4..8 (F(3) = 232/2048 <= 0.25, F(7) = 1816/2048 >= 0.75), levels 0.3 and 0.7
    half = reported_quantile_interval({0.2: 2.0, 0.3: 3.0, 0.7: 7.0, 0.8: 8.0}, 11, 0.5, confidence=0.5)
    assert (half.lo, half.hi) == (3.0, 7.0)
    nothing = reported_quantile_interval({0.5: 5.0}, 11, 0.5)
    assert (nothing.lo, nothing.hi) == (None, None)
    assert nothing.basis.startswith("reported -..- around ranks 2..10")
    assert reported_quantile_interval(levels, 1, 0.5) == Interval(None, None, None, "1 samples: no interval")
    # two samples: ranks 1..2 are levels 0 and 1, which nothing reported reaches
    assert (
        reported_quantile_interval(levels, 2, 0.5).basis
        == "reported -..- around ranks 1..2 of 2 (levels 0.0000..1.0000)"
    )


def test_reported_levels_leave_out_levels_beyond_one() -> None:
    assert reported_levels({"p150": 1.0, "p100": 2.0, "max": 3.0}) == {1.0: 3.0}
    assert reported_levels({"p99.9": 1.0, "median": 2.0, "mean": 3.0}) == {0.999: 1.0, 0.5: 2.0}


def test_mean_interval_of_two_values() -> None:
    # mean 2, s = sqrt(2), half width 1.959964 x sqrt(2) / sqrt(2)
    got = mean_interval(np.array([1.0, 3.0, np.nan]))
    assert got.lo == pytest.approx(2 - 1.959964, abs=1e-6) and got.hi == pytest.approx(2 + 1.959964, abs=1e-6)
    assert (got.coverage, got.basis) == (0.95, "mean +/- 1.96 standard errors, n=2")
    assert mean_interval(np.array([1.0])) == Interval(None, None, None, "1 samples: no interval")


def test_overlaps_with_open_sides_and_touching_ends() -> None:
    left_open = Interval(None, 1.0, None, "")
    right_open = Interval(1.0, None, None, "")
    assert overlaps(left_open, right_open) and overlaps(right_open, left_open)  # they touch at 1
    assert not overlaps(Interval(None, 0.5, None, ""), right_open)
    assert not overlaps(right_open, Interval(None, 0.5, None, ""))
    assert overlaps(Interval(None, None, None, ""), Interval(3.0, 4.0, None, ""))
    assert point(2.5, "reported mean") == Interval(2.5, 2.5, None, "reported mean")


# ---- weighted percentiles ----


def test_weighted_percentile_is_numpys_to_the_last_bit() -> None:
    # 0.1 + 0.6 x 0.5 = 0.4, but numpy interpolates from the nearer end at share >= 0.5: 0.7 - 0.3
    assert weighted_percentile(np.array([0.7, 0.1]), np.array([1.0, 1.0]), 0.5) == 0.39999999999999997
    assert np.quantile([0.1, 0.7], 0.5) == 0.39999999999999997
    # samples 0.1 x 3, 0.7: position 0.75 x 3 = 2.25, between the third 0.1 and 0.7
    assert weighted_percentile(np.array([0.7, 0.1]), np.array([1.0, 3.0]), 0.75) == np.quantile([0.1] * 3 + [0.7], 0.75)
    assert weighted_percentile(np.array([0.7, 0.1]), np.array([1.0, 3.0]), 0.7) == pytest.approx(0.1 + 0.1 * 0.6)


def test_weighted_slo_percentile_without_weight_is_infinite() -> None:
    assert weighted_slo_percentile(np.array([0.1]), np.array([0.0]), 0.5) == math.inf
    assert weighted_slo_percentile(np.zeros(0), np.zeros(0), 0.5) == math.inf
    assert weighted_slo_percentile(np.array([0.1, 0.3]), np.array([1.0, 1.0]), 0.5) == 0.1
