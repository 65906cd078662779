"""Alert rules (seed claim 12): Prometheus' pending/firing state machine step by step, the figures that
judge pages against SLO-violation windows by hand, a scale_out action, and the section's bad input."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cluster.factories import FAST_POD, cluster_sim, cluster_spec
from ttftsim.cluster.alerts import AlertEvaluator, Firing, alert_figures
from ttftsim.cluster.bandwidth import BandwidthMeter
from ttftsim.cluster.run import violating_windows
from ttftsim.config.cluster import Cluster
from ttftsim.config.cluster_control import Alerting
from ttftsim.config.loading import parse_mapping
from ttftsim.engine.recorder import Recorder
from ttftsim.errors import InputError

PAGE = {"name": "TtftP99High", "metric": "ttft_p99_s", "threshold": 0.5, "for_s": 60, "severity": "page"}


def test_a_rule_is_pending_for_its_for_duration_then_fires_and_resolves() -> None:
    env, cluster = cluster_sim(cluster_spec(pod=FAST_POD))
    spec = Alerting(rules=[PAGE, {**PAGE, "name": "AtOnce", "for_s": 0}], evaluation_interval_s=30)
    assert cluster.prometheus is None  # no HPA, controller or rules: nothing scrapes
    evaluator = AlertEvaluator(env, spec, cluster.lifecycle, None, BandwidthMeter(Recorder(), list, 30), int)  # type: ignore[arg-type]
    slow, at_once = spec.rules
    for time_s, value in [(0, 0.6), (30, 0.7), (60, 0.8), (90, 0.4), (120, math.nan), (150, 0.9), (180, 0.3)]:
        if time_s > env.now:
            env.run(until=time_s)
        evaluator.evaluate(slow, value)
        evaluator.evaluate(at_once, value)
    slow_rows = [(r["time_s"], r["state"]) for r in evaluator.transitions if r["alert"] == "TtftP99High"]
    # 0 s: active, pending; 30 s: 30 s < 60 s; 60 s: held 60 s, fires; 90 s: below, resolves; 120 s: no data
    # (NaN) stays inactive; 150 s: pending again; 180 s: inactive before its 60 s
    assert slow_rows == [(0, "pending"), (60, "firing"), (90, "inactive"), (150, "pending"), (180, "inactive")]
    evaluator.close()
    assert evaluator.firings == [
        Firing("TtftP99High", "page", 60.0, 90.0),
        Firing("AtOnce", "page", 0.0, 90.0),  # without `for`, fires at its first active evaluation
        Firing("AtOnce", "page", 150.0, 180.0),
    ]


def test_pages_are_judged_against_the_violating_windows_and_the_one_after() -> None:
    pages = [
        Firing("a", "page", 130.0, 200.0),  # windows 2 and 3: catches the violations in 2 and 3
        Firing("a", "page", 400.0, 430.0),  # window 6: no violation in 6 or 5: a false page
        Firing("a", "page", 610.0, 620.0),  # window 10
        Firing("b", "ticket", 0.0, 600.0),  # tickets never catch or count as false pages
    ]
    figures = alert_figures(pages, {2, 3, 10}, 60.0, scale_outs=0)
    assert (figures.firings, figures.pages, figures.tickets) == (4, 3, 1)
    assert figures.page_minutes == pytest.approx((70 + 30 + 10) / 60)
    assert figures.ticket_minutes == 10.0
    assert figures.false_pages == 1
    assert figures.slo_violation_minutes == 3.0 and figures.missed_slo_minutes == 0.0
    late = alert_figures([Firing("a", "page", 300.0, 320.0)], {4, 7}, 60.0, scale_outs=0)
    assert late.false_pages == 0 and late.missed_slo_minutes == 1.0  # window 4 caught a window late, 7 missed
    none = alert_figures([], None, 60.0, scale_outs=2)
    assert none.missed_slo_minutes is None and none.false_pages == 0 and none.scale_outs == 2


def test_violating_windows_are_those_whose_p99_by_arrival_misses_the_target() -> None:
    requests = pd.DataFrame(
        {
            "arrival_s": [1.0, 2.0, 61.0, 62.0, 130.0],
            "ttft_s": [0.1, 0.2, 0.1, 2.0, math.nan],  # window 1: P99 is 2 s; window 2: never served
        }
    )
    assert violating_windows(requests, 1.0, 60.0) == {1, 2}
    late = pd.DataFrame({"arrival_s": [3.0], "ttft_s": [5.0]})  # window 0's P99 too, recorded out of order
    shuffled = pd.concat([requests, late]).iloc[[5, 2, 0, 4, 3, 1]]
    assert violating_windows(shuffled, 1.0, 60.0) == {0, 1, 2}
    assert violating_windows(shuffled, 10.0, 60.0) == {2} and violating_windows(shuffled.iloc[:0], 1.0, 60.0) == set()


def test_a_scale_out_rule_adds_a_replica_after_alertmanagers_group_wait() -> None:
    pool = {"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": 1, "initial_nodes": 2, "max_nodes": 2}
    rule = {"name": "Queue", "metric": "gateway_queue", "op": ">", "threshold": -1, "severity": "ticket"}
    alerting = {"rules": [{**rule, "action": "scale_out"}], "max_replicas": 2}
    env, cluster = cluster_sim(cluster_spec(node_pools=[pool], pod=FAST_POD, alerting=alerting))
    env.run(until=29.0)
    assert len(cluster.lifecycle.serving()) == 1  # fired at 0 s; the webhook waits group_wait (30 s)
    env.run(until=31.0)
    assert cluster.lifecycle.desired == 2 and cluster.pods[1].created_s == 30.0
    env.run(until=200.0)
    assert cluster.alerts is not None and cluster.alerts.scale_outs == 1  # still the one firing: no more


def _cluster(**fields: Any) -> Cluster:
    data = {"node_pools": [{"name": "gpu", "hardware": "H100-SXM5-80GB"}], **fields}
    return parse_mapping(Cluster, data, "s.yaml")


@pytest.mark.parametrize(
    ("fields", "where", "message"),
    [
        (
            {
                "controller": {"type": "closed_loop", "max_replicas": 3},
                "autoscaling": {"max_replicas": 3, "metrics": [{"name": "ttft_p99_s", "target": 1}]},
            },
            "s.yaml",
            "controller: the HPA (autoscaling) already sets the replica count",
        ),
        (
            {"controller": {"type": "ttft_p99", "max_replicas": 1}, "replicas": 2},
            "s.yaml",
            "controller.max_replicas 1 < replicas 2",
        ),
        (
            {"controller": {"type": "pid", "max_replicas": 1}},
            "s.yaml: controller.type",
            "'pid' is not one of closed_loop, ttft_p99",
        ),
        (
            {"alerting": {"rules": [{**PAGE, "action": "scale_out"}]}},
            "s.yaml: alerting",
            "max_replicas: a rule with action scale_out needs a replica bound",
        ),
        (
            {
                "alerting": {"rules": [{**PAGE, "action": "scale_out"}], "max_replicas": 3},
                "controller": {"type": "ttft_p99", "max_replicas": 3},
            },
            "s.yaml",
            "alerting.rules: a scale_out action and controller would both set the replica count",
        ),
        (
            {"alerting": {"rules": [PAGE, PAGE]}},
            "s.yaml: alerting",
            "alert names must be unique, ['TtftP99High'] repeat",
        ),
        (
            {"alerting": {"rules": [{**PAGE, "metric": "gpu_util"}]}},
            "s.yaml: alerting.rules.0.metric",
            "Input should be",
        ),
        (
            {"alerting": {"rules": [{**PAGE, "for_s": -1}]}},
            "s.yaml: alerting.rules.0.for_s",
            "greater than or equal to 0",
        ),
    ],
)
def test_inconsistent_sections_are_one_line_errors_naming_the_field(
    fields: dict[str, Any], where: str, message: str
) -> None:
    with pytest.raises(InputError) as error:
        _cluster(**fields)
    line = error.value.one_line()
    assert "\n" not in line and line.startswith(where) and message in line, line


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.just(math.nan), st.floats(0, 2)), min_size=1, max_size=30),
    st.sampled_from([0.0, 30.0, 60.0, 90.0]),
)
def test_a_rule_fires_only_after_holding_for_its_duration_and_firings_never_overlap(
    values: list[float], for_s: float
) -> None:
    env, cluster = cluster_sim(cluster_spec(pod=FAST_POD))
    spec = Alerting(rules=[{**PAGE, "for_s": for_s}], evaluation_interval_s=30)
    evaluator = AlertEvaluator(env, spec, cluster.lifecycle, None, BandwidthMeter(Recorder(), list, 30), int)  # type: ignore[arg-type]
    for step, value in enumerate(values):
        if step * 30 > env.now:
            env.run(until=step * 30)
        evaluator.evaluate(spec.rules[0], value)
    evaluator.close()
    above = [not math.isnan(v) and v > 0.5 for v in values]
    for firing in evaluator.firings:
        first, last = int(firing.start_s // 30), int(firing.end_s // 30)
        held_from = first
        while held_from > 0 and above[held_from - 1]:
            held_from -= 1
        assert firing.start_s - held_from * 30 >= for_s  # held for `for` before it fired
        assert all(above[first:last]) and (last == len(values) - 1 or not above[last])  # resolved when it stopped
    ends = [(f.start_s, f.end_s) for f in evaluator.firings]
    assert all(b[0] >= a[1] for a, b in itertools.pairwise(ends))
