"""Why the plan answers what it does (plan/explain.py) and the availability it sizes for, with known
answers: the binding target from hand-written probes, the plain-words sentence, replica counts for N+1,
min_replicas and zones, the confirming run's pod failure, and each GPU type's best row."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ttftsim.config.plan import Plan
from ttftsim.config.slo import Slo
from ttftsim.metrics.slo import SloFigures
from ttftsim.plan import evaluate
from ttftsim.plan.explain import THROUGHPUT, binding, closest, missed, refused, sentence, wanted, words
from ttftsim.plan.ranking import Row, best_per_gpu
from ttftsim.plan.run import load_plan
from ttftsim.plan.search import candidates

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "plans" / "quickstart.yaml"


def _probe(rate: float, **ratios: float) -> dict[str, object]:
    return {"rate": rate, "ratios": ratios}


def test_the_target_missed_at_the_lowest_rate_binds() -> None:
    probes = [
        _probe(1.0, ttft_p99_s=0.2, tpot_mean_s=0.5),
        _probe(10.0, ttft_p99_s=1.3, tpot_mean_s=1.1),  # both miss at 10: TTFT by more
        _probe(5.0, ttft_p99_s=0.6, tpot_mean_s=1.05),  # TPOT already misses at 5
        _probe(3.0, ttft_p99_s=0.4, tpot_mean_s=0.9),
    ]
    assert binding(probes) == "tpot_mean_s"
    assert closest(probes) == "tpot_mean_s"  # at 3 req/s, the highest that met both: TPOT at 0.9
    # both first miss at the same rate: the larger miss binds
    assert binding([_probe(1.0, ttft_p99_s=0.5, e2e_p99_s=0.5), _probe(2.0, ttft_p99_s=1.2, e2e_p99_s=1.4)]) == (
        "e2e_p99_s"
    )
    # nothing misses below saturation: the replica's throughput is the limit
    assert binding([_probe(1.0, ttft_p99_s=0.5), _probe(2.0, ttft_p99_s=0.99)]) == THROUGHPUT
    assert closest([_probe(1.0, ttft_p99_s=1.5)]) == ""  # no probe met the SLO


def test_targets_in_words() -> None:
    assert words("tpot_mean_s") == "mean TPOT"
    assert words("ttft_p99_s") == "P99 TTFT"
    assert words("e2e_p95_s") == "P95 end-to-end latency"
    assert words("per_priority.1.ttft_p90_s") == "P90 TTFT of priority 1"
    assert words("goodput_share") == "goodput"
    assert words(THROUGHPUT) == "throughput (saturation)"


def test_the_slo_as_a_user_states_it() -> None:
    slo = Slo.model_validate(
        {
            "ttft_p99_s": 1.5,
            "tpot_mean_s": 0.06,
            "ttft_s": 0.5,
            "tpot_s": 0.03,
            "goodput_share": 0.99,
            "per_priority": {0: {"ttft_p90_s": 0.2}},
        }
    )
    assert wanted(slo) == (
        "P99 TTFT <= 1.5 s, mean TPOT <= 60 ms, goodput >= 99.0% (TTFT <= 500 ms, TPOT <= 30 ms each), "
        "P90 TTFT of priority 0 <= 200 ms"
    )


def _figures(**values: float) -> SloFigures:
    base = dict.fromkeys(SloFigures.__dataclass_fields__, 0.0)
    base.pop("per_priority")
    return SloFigures(**(base | values))


def test_the_answer_in_plain_words() -> None:
    slo = Slo(ttft_p99_s=1.5, tpot_mean_s=0.06)
    figures = _figures(ttft_p99_s=0.346, tpot_mean_s=0.0521)
    head = "4 x H100-SXM5-80GB TP4, w fp8, least_outstanding ($48.00/h)"
    assert sentence(head, "tpot_mean_s", 12.8, slo, figures) == (
        f"{head}: mean TPOT is the limit, at 12.80 req/s per replica; P99 TTFT 346 ms of 1.5 s, "
        "mean TPOT 52 ms of 60 ms"
    )
    assert sentence(head, THROUGHPUT, 6.4, slo, None, "tpot_mean_s") == (
        f"{head}: throughput (saturation) is the limit, at 6.40 req/s per replica (nearest target there: mean TPOT)"
    )
    assert (
        missed(slo, _figures(ttft_p99_s=math.inf, tpot_mean_s=0.072))
        == "P99 TTFT inf of 1.5 s, mean TPOT 72 ms of 60 ms"
    )
    goodput = Slo(ttft_s=1.0, goodput_share=0.99)
    assert missed(goodput, _figures(goodput_share=0.985)) == "goodput 98.5% of 99.0%"


@pytest.mark.parametrize(
    ("availability", "needed", "replicas"),
    [
        ({}, 3, 3),
        ({"redundancy": "n_plus_1"}, 3, 4),
        ({"min_replicas": 2}, 1, 2),
        ({"min_replicas": 2}, 5, 5),
        ({"zones": 3}, 1, 3),  # one per zone
        ({"zones": 3}, 4, 6),  # an even spread
        ({"zones": 3, "redundancy": "n_plus_1"}, 5, 6),
        ({"zones": 2, "redundancy": "n_plus_1", "min_replicas": 5}, 1, 6),
    ],
)
def test_replicas_with_the_availability_asked(availability: dict[str, object], needed: int, replicas: int) -> None:
    plan = load_plan(QUICKSTART)
    plan = type(plan).model_validate(plan.model_dump() | {"availability": availability})
    assert evaluate.replica_count(plan, needed) == replicas


def test_sizing_keeps_what_the_peak_needs_beside_what_runs() -> None:
    plan = load_plan(QUICKSTART)  # 20 req/s, headroom 10 %
    plan = type(plan).model_validate(plan.model_dump() | {"availability": {"redundancy": "n_plus_1"}})
    cand = evaluate.Candidate("H100-SXM5-80GB", 1, None, None, True, True, None, "auto", "least_outstanding", 0)
    size = evaluate.sizing(plan, cand, 8.0)  # 7.2 req/s a replica with headroom: ceil(20 / 7.2) = 3
    assert (size["needed"], size["replicas"], size["gpus"]) == (3, 4, 4)
    assert size["cost_per_hour"] == pytest.approx(4 * evaluate.price_per_gpu_hour(plan, "H100-SXM5-80GB"))


def test_an_n_plus_1_confirming_run_loses_its_first_pod_a_quarter_in() -> None:
    plan = load_plan(QUICKSTART)  # 20 req/s for confirm_s 120: 2,400 arrivals over 120 s
    cand = evaluate.Candidate("H100-SXM5-80GB", 1, None, None, True, True, None, "auto", "least_outstanding", 0)
    assert evaluate.cluster_scenario(plan, cand, 2).cluster.faults == []  # type: ignore[union-attr]
    spare = type(plan).model_validate(plan.model_dump() | {"availability": {"redundancy": "n_plus_1"}})
    faults = evaluate.cluster_scenario(spare, cand, 2).cluster.faults  # type: ignore[union-attr]
    assert [(f.at_s, f.kind, f.index) for f in faults] == [(30.0, "pod", 0)]


def _row(hardware: str, status: str, cost: float, miss: float = math.nan) -> Row:
    cand = evaluate.Candidate(hardware, 1, None, None, True, True, None, "auto", "least_outstanding", 0)
    return Row(cand, status, cost_per_hour=cost, low_load_miss=miss)


def test_each_gpu_types_best_is_its_cheapest_known_cost_else_its_nearest_miss() -> None:
    rows = [
        _row("H100-SXM5-80GB", "confirmed", 42.0),
        _row("H100-SXM5-80GB", "estimate", 30.0),  # cheaper but a confirmed row ranks first
        _row("A100-SXM4-80GB", "pruned", math.nan),
        _row("A100-SXM4-80GB", "pruned", 129.6),  # bisected although pruned: its cost is shown
        _row("A100-SXM4-80GB", "infeasible", 200.0),
        _row("L40S-48GB", "pruned", math.nan),
        _row("L40S-48GB", "infeasible", math.nan, miss=3.7),
        _row("L40S-48GB", "infeasible", math.nan, miss=1.13),
    ]
    best = best_per_gpu(rows)
    assert best["H100-SXM5-80GB"] is rows[0]
    assert best["A100-SXM4-80GB"] is rows[3]
    assert best["L40S-48GB"] is rows[7]


def test_a_candidate_whose_requests_are_refused_says_how_many_and_why() -> None:
    """Prompts beyond engine.max_model_len are rejected, never served: every percentile is infinite, and the plan
    said only 'P99 TTFT inf' (cold trial D5). The low-load miss names the rejections and the engine's reason."""
    data = yaml.safe_load(QUICKSTART.read_text())  # prompts of mean 1,000 tokens
    data["engine"]["max_model_len"] = 1024
    data["search"].update(hardware=["H100-SXM5-80GB"], tensor_parallel_size=[1], max_num_seqs=[None])
    plan = Plan.model_validate(data | {"probe_requests": 100})
    (cand,) = candidates(plan)
    result = evaluate.capacity(plan, str(ROOT), cand, saturated=20.0)
    assert (result["feasible"], result["reason"]) == (
        False,
        "misses the SLO even at low load (1.00 req/s): P99 TTFT inf of 500 ms; 39 rejected of 100 requests, never "
        "served: e.g. prompt 1250 + output 205 tokens exceed max_model_len 1024",
    )


def test_refusals_are_counted_with_the_most_frequent_kinds_first_reason() -> None:
    requests = pd.DataFrame(
        {
            "status": ["finished", "failed", "rejected", "rejected", "rejected"],
            "reason": [
                "",
                "pod lost",
                "prompt 9 + output 1 tokens exceed max_model_len 8",
                "queue full",
                "prompt 12 + output 3 tokens exceed max_model_len 8",
            ],
        }
    )
    assert refused(requests) == (  # each kind counted apart (they were all said to be rejected)
        "3 rejected and 1 failed of 5 requests, never served: e.g. prompt 9 + output 1 tokens exceed max_model_len 8"
    )
    assert refused(requests.iloc[:1]) == ""


def test_the_replicas_column_says_what_each_extra_replica_is_for() -> None:
    """The peak's need, the availability's spare, and what the confirming cluster run added while it missed
    (these were all said to be "for availability")."""
    from types import SimpleNamespace

    from ttftsim.plan.run import load_plan
    from ttftsim.render.plan import _replicas

    plan = load_plan(Path(__file__).resolve().parents[2] / "examples" / "plans" / "quickstart.yaml")
    spare = plan.model_copy(update={"availability": plan.availability.model_copy(update={"redundancy": "n_plus_1"})})
    assert _replicas(plan, SimpleNamespace(needed=2, replicas=2)) == "2"
    assert _replicas(plan, SimpleNamespace(needed=2, replicas=3)) == "3 (2 + 1 the cluster run added)"
    assert _replicas(spare, SimpleNamespace(needed=2, replicas=3)) == "3 (2 + 1 for availability)"
    both = "4 (1 + 1 for availability + 2 the cluster run added)"
    assert _replicas(spare, SimpleNamespace(needed=1, replicas=4)) == both
