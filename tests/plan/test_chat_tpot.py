"""Issue #19's scenario (examples/plans/chat-70b-tpot.yaml): Llama-3.1-70B chat at 40 req/s, P99 TTFT <= 1.5 s,
mean TPOT <= 60 ms, on A100, H100 or L40S. What the plan answers, and why, as its outputs say it.

With a mean-TPOT SLO mean TPOT binds the winning H100 TP2 fp8 replica just below its saturated throughput (6.61
req/s a replica; 44 ms of 60 ms at the planned share), so 7 replicas, 14 GPUs at $42/h. With the P99-TPOT
stand-in the issue's user had to write, P99 TPOT binds (9.84 req/s a replica on TP4) and the plan needs 20 GPUs
at $60/h: the mean-TPOT SLO recommends the cheaper fleet."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from rich.console import Console

from ttftsim.config.workload import LognormalLength
from ttftsim.plan.run import PlanResult, run_plan
from ttftsim.render.plan import render_plan
from ttftsim.workload.expected import expected_length

ROOT = Path(__file__).resolve().parents[2]
CHAT = ROOT / "examples" / "plans" / "chat-70b-tpot.yaml"


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, PlanResult]:
    out = tmp_path_factory.mktemp("chat")
    return out, run_plan(CHAT, out, workers=2)


def test_the_recommendation_and_its_reason(chat: tuple[Path, PlanResult]) -> None:
    out, _ = chat
    plan = json.loads((out / "plan.json").read_text())
    winner = plan["winner"]
    assert winner["label"] == "H100-SXM5-80GB TP2, w fp8, least_outstanding"
    assert (winner["replicas"], winner["gpus"], winner["cost_per_hour"]) == (7, 14, 42.0)
    assert (winner["binding"], winner["nearest"]) == ("tpot_mean_s", "tpot_mean_s")
    assert winner["max_rate"] == pytest.approx(6.61, abs=0.005)
    assert plan["recommendation"].startswith(
        "7 x H100-SXM5-80GB TP2, w fp8, least_outstanding ($42.00/h): mean TPOT is the limit, "
        "at 6.61 req/s per replica; P99 TTFT "
    )
    assert plan["recommendation"].endswith("mean TPOT 44 ms of 60 ms")
    assert winner["figures"]["tpot_mean_s"] == pytest.approx(winner["tpot_mean_s"])
    assert 0.04 < winner["tpot_mean_s"] < 0.06 and winner["ttft_p99_s"] < 1.5
    assert plan["slo"] == {"ttft_p99_s": 1.5, "tpot_mean_s": 0.06}


def test_every_gpu_type_shows_its_best_with_its_bound(chat: tuple[Path, PlanResult]) -> None:
    out, _ = chat
    best = json.loads((out / "plan.json").read_text())["best_per_gpu"]
    assert list(best) == ["H100-SXM5-80GB", "A100-SXM4-80GB", "L40S-48GB"]
    a100 = best["A100-SXM4-80GB"]
    assert (a100["label"], a100["replicas"], a100["cost_per_hour"]) == (
        "A100-SXM4-80GB TP4, w fp8, least_outstanding",
        18,
        pytest.approx(129.6),
    )
    assert a100["binding"] == "ttft_p99_s"
    l40s = best["L40S-48GB"]  # every L40S candidate misses P99 TTFT even at 5 % of its saturation
    assert l40s["status"] == "infeasible" and l40s["label"] == "L40S-48GB TP2, w fp8, least_outstanding"
    assert l40s["explanation"].startswith(
        "L40S-48GB TP2, w fp8, least_outstanding: infeasible: misses the SLO even at low load"
    )


def test_tpot_throughput_and_cost_per_token_are_columns(chat: tuple[Path, PlanResult]) -> None:
    out, result = chat
    rows = list(csv.DictReader((out / "ranked.csv").open()))
    for column in ("tpot_mean_s", "tpot_p99_s", "output_tokens_per_s", "cost_per_million_tokens", "binding"):
        assert column in rows[0]
    assert {"slo.ttft_p99_s", "slo.tpot_mean_s", "explanation"} <= set(rows[0])
    assert rows[0]["label"] == "H100-SXM5-80GB TP2, w fp8, least_outstanding"
    assert float(rows[0]["slo.tpot_mean_s"]) == pytest.approx(float(rows[0]["tpot_mean_s"]))
    unsized = [row for row in rows if row["status"] == "pruned"]  # out before sizing: no replica count, not 0
    assert unsized and {(row["needed"], row["replicas"], row["gpus"]) for row in unsized} == {("", "", "")}
    assert all(row["replicas"] for row in rows if row["status"] in ("confirmed", "estimate"))
    console = Console(width=400, record=True)
    render_plan(console, result, out)
    text = console.export_text()
    first = text.splitlines()[1]  # the answer comes right after the plan's line
    assert first.startswith("recommended: 7 x H100-SXM5-80GB TP2, w fp8, least_outstanding ($42.00/h):")
    assert "  L40S-48GB: L40S-48GB TP2, w fp8, least_outstanding: infeasible: misses the SLO" in text
    assert "mean TPOT ms" in text and "$/M out tok" in text
    demand = 40 * expected_length(LognormalLength(type="lognormal", mean=211, std=163, high=1000), Path())
    assert f"Llama-3.1-70B at 40 req/s ({demand:,.0f} output tokens/s)" in text.splitlines()[0]


def test_every_row_is_priced_at_the_same_demand(chat: tuple[Path, PlanResult]) -> None:
    """$/M tokens is $/h over the traffic's expected output tokens (40 req/s x the clipped lognormal's mean),
    for confirmed and estimated rows alike: two rows of the same $/h show the same $/M tokens."""
    out, result = chat
    demand = 40 * expected_length(LognormalLength(type="lognormal", mean=211, std=163, high=1000), Path())
    assert json.loads((out / "plan.json").read_text())["output_tokens_per_s"] == pytest.approx(demand, rel=1e-12)
    priced = [r for r in result.rows if r.cost_per_million_tokens == r.cost_per_million_tokens]
    assert {r.status for r in priced} >= {"confirmed", "estimate"}
    for row in priced:
        assert row.output_tokens_per_s == pytest.approx(demand, rel=1e-12)
        assert row.cost_per_million_tokens == pytest.approx(row.cost_per_hour / (demand * 3600) * 1e6, rel=1e-12)


def test_a_p99_tpot_stand_in_binds_on_tpot_and_costs_more(tmp_path: Path) -> None:
    """The same traffic judged by P99 TPOT <= 60 ms instead (the stand-in the issue had to use), on the H100
    fp8 candidates only (to keep the test short): P99 TPOT binds, and the fleet costs $60/h, not $42/h."""
    text = CHAT.read_text().replace("tpot_mean_s: 0.06", "tpot_p99_s: 0.06")
    text = text.replace("[A100-SXM4-80GB, H100-SXM5-80GB, L40S-48GB]", "[H100-SXM5-80GB]")
    text = text.replace("tensor_parallel_size: [2, 4, 8]", "tensor_parallel_size: [2, 4]")
    stand_in = tmp_path / "p99.yaml"
    stand_in.write_text(text.replace("quantization: [null, fp8]", "quantization: [fp8]"))
    result = run_plan(stand_in, tmp_path / "out", workers=2)
    assert result.winner is not None
    assert (result.winner.candidate.tensor_parallel_size, result.winner.replicas) == (4, 5)
    assert (result.winner.binding, result.winner.cost_per_hour) == ("tpot_p99_s", 60.0)
    assert result.winner.explanation.startswith(
        "5 x H100-SXM5-80GB TP4, w fp8, least_outstanding ($60.00/h): P99 TPOT is the limit, at 9.84 req/s"
    )
    assert all(r.binding == "tpot_p99_s" for r in result.rows)


def test_the_reports_plan_section_leads_with_the_answer(chat: tuple[Path, PlanResult], tmp_path: Path) -> None:
    from ttftsim.results import write_report

    out, result = chat
    assert result.winner is not None
    report = tmp_path / "report.html"
    assert write_report(out, report) == []
    html = report.read_text()
    answer = html.index(f"<p><b>{result.winner.explanation}</b></p>")
    assert answer < html.index("plotly")  # before the figure, which still carries plotly.js
    assert "<li>L40S-48GB: L40S-48GB TP2, w fp8, least_outstanding: infeasible: misses the SLO" in html
