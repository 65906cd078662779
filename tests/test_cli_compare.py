"""`ttftsim compare`: the same traffic through two scenarios."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.test_cli import _assert_one_line_error, run
from ttftsim.compare import changes, compare, differences
from ttftsim.plan.run import run_plan
from ttftsim.render.compare import _num
from ttftsim.simulate import load_scenario

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama31-8b-h100.yaml"


def _rows(result: dict[str, object]) -> dict[str, dict[str, float]]:
    return {row["metric"]: row for row in result["rows"]}  # type: ignore[attr-defined, index]


def test_a_scenario_against_itself_differs_in_nothing() -> None:
    result = run("compare", str(EXAMPLE), str(EXAMPLE), "--json")
    assert result.returncode == 0, result.stderr
    compared = json.loads(result.stdout)
    assert all(row["delta"] in (0.0, None) for row in _rows(compared).values())
    assert (compared["differences"], compared["notes"]) == ([], [])


def test_the_header_names_both_files_what_b_changes_and_that_b_traffic_is_not_used(tmp_path: Path) -> None:
    other = tmp_path / "b.yaml"
    text = EXAMPLE.read_text().replace('vllm_version: "0.15.1"', 'vllm_version: "0.15.1"\n  max_num_seqs: 12')
    other.write_text(text.replace("rate: 8", "rate: 1").replace("H100-SXM5-80GB", "H200-SXM-141GB"))
    compared = json.loads(run("compare", str(EXAMPLE), str(other), "--json").stdout)
    changed = ["hardware: H100-SXM5-80GB -> H200-SXM-141GB", "engine.max_num_seqs: default -> 12"]
    assert compared["differences"] == changed
    assert compared["notes"][0] == (
        "b.yaml's own workload, seed or horizon is not used: both run llama31-8b-h100.yaml's traffic (compare "
        "deploys two configurations under one traffic; simulate each file for its own)"
    )
    assert compared["notes"][1].startswith("cost ($/M output tokens) is at the traffic's demand")  # B misses its SLO
    shown = run("compare", str(EXAMPLE), str(other)).stdout
    assert f"A llama31-8b-h100-chat ({EXAMPLE})  vs  B llama31-8b-h100-chat ({other})" in shown
    assert "B differs from A in: " + "; ".join(changed) in shown


def test_b_gets_a_traffic_and_the_slower_config_shows_up(tmp_path: Path) -> None:
    slow = tmp_path / "b.yaml"
    text = EXAMPLE.read_text().replace('vllm_version: "0.15.1"', 'vllm_version: "0.15.1"\n  max_num_seqs: 12')
    slow.write_text(text.replace("rate: 8", "rate: 1"))  # B's own traffic is ignored: A's is used
    rows = _rows(json.loads(run("compare", str(EXAMPLE), str(slow), "--json").stdout))
    assert rows["throughput (req/s)"]["relative"] is not None and abs(rows["throughput (req/s)"]["relative"]) < 0.2
    assert rows["TTFT P99 (ms)"]["b"] > 2 * rows["TTFT P99 (ms)"]["a"]  # 12 sequences at a time: queueing
    assert rows["queue (mean ms)"]["delta"] > 0
    assert rows["cost ($/hour)"]["delta"] == 0.0


def test_bad_scenario_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("rate: 8", "rate: fast"))
    _assert_one_line_error(run("compare", str(EXAMPLE), str(bad)), str(bad), "rate")


def test_every_part_of_the_mean_ttft_is_a_row_and_a_missed_slo_is_flagged(tmp_path: Path) -> None:
    """The breakdown's rows add up to the mean TTFT (the frontend and the API server's stream were missing), and
    a side that misses its own SLO says so under the table."""
    slow = tmp_path / "b.yaml"
    text = EXAMPLE.read_text().replace('vllm_version: "0.15.1"', 'vllm_version: "0.15.1"\n  max_num_seqs: 4')
    slow.write_text(text)
    compared = json.loads(run("compare", str(EXAMPLE), str(slow), "--json").stdout)
    rows = _rows(compared)
    parts = ["gateway: cold start, retries", "queue", "recompute", "prefill", "waiting behind chunks"]
    parts += ["stream: API server", "frontend: HTTP, hand-offs"]
    for side in ("a", "b"):
        total = sum(rows[f"{part} (mean ms)"][side] for part in parts)
        assert total == pytest.approx(rows["TTFT mean (ms)"][side], rel=1e-9)
    assert (rows["SLO met (1 yes, 0 no)"]["a"], rows["SLO met (1 yes, 0 no)"]["b"]) == (1.0, 0.0)
    shown = run("compare", str(EXAMPLE), str(slow))
    assert shown.returncode == 1  # as simulate's: a side that misses its SLO (a CI gate can read it)
    shown = shown.stdout
    assert f"B misses its SLO ({slow})" in shown
    assert re.search(r"SLO met +│ yes +│ no ", shown) and "(1 yes, 0 no)" not in shown  # words in the terminal


def test_a_difference_that_rounds_to_zero_has_no_sign() -> None:
    shown = [_num(v) for v in (-0.0, -0.001, 0.004, -0.006, -12.5, 150.0)]
    assert shown == ["0", "0.00", "0.00", "-0.01", "-12.50", "150"]


def test_an_empty_mapping_the_other_side_fills_is_said_by_its_fields_alone() -> None:
    """A's node_affinity.required is {} and B's sets a pool: one line for the pool, none for the empty mapping."""
    pairs = EXAMPLE.parent / "advice" / "pairs"
    before, after = load_scenario(pairs / "01-1-before.yaml"), load_scenario(pairs / "01-1-after.yaml")
    assert differences(before, after) == [
        "cluster.pod.gpus: 0 -> 1",
        "cluster.pod.node_affinity.required.pool: default -> gpu",
    ]


def test_only_an_empty_mapping_gives_way_to_the_fields_set_in_it() -> None:
    assert changes({"required": {}}, {"required.pool": "gpu"}) == ["required.pool: default -> gpu"]
    labels = {"labels.nvidia.com/gpu": "a", "labels.nvidia.com/gpu.product": "H100"}  # two labels, one with a dot
    assert changes(labels, labels | {"labels.nvidia.com/gpu": "b"}) == ["labels.nvidia.com/gpu: a -> b"]


def test_b_without_an_slo_is_judged_against_a_s(tmp_path: Path) -> None:
    """B answers A's question under A's traffic: with no SLO of its own it is judged against A's, and says so."""
    text = EXAMPLE.read_text()
    start = text.index("slo:")
    end = text.index("\n", text.index("\n", start) + 1) + 1  # the slo: line and its one target
    bare = tmp_path / "b.yaml"
    bare.write_text(text[:start] + text[end:])
    assert "slo:" not in bare.read_text()
    compared = json.loads(run("compare", str(EXAMPLE), str(bare), "--json").stdout)
    assert _rows(compared)["SLO met (1 yes, 0 no)"]["b"] == 1.0
    assert "b.yaml sets no SLO: it is judged against llama31-8b-h100.yaml's" in compared["notes"]


def test_a_result_given_for_a_scenario_is_named_a_result(tmp_path: Path) -> None:
    """A summary.json of simulate --out is not a scenario: the error says what it is and what reads it (a cold
    trial met 'slo.met: unknown field')."""
    out = tmp_path / "out"
    assert run("simulate", str(EXAMPLE), "--out", str(out)).returncode == 0
    summary = out / "summary.json"
    _assert_one_line_error(run("compare", str(summary), str(EXAMPLE)), str(summary), "this is a run's result")


def test_a_calibrated_range_left_is_said_once(tmp_path: Path) -> None:
    """The summary lists the calibrated ranges a run left; stderr does not say them a second time."""
    long = tmp_path / "long.yaml"
    text = EXAMPLE.read_text()
    lengths = "prompt_tokens: {type: lognormal, mean: 1000, std: 800, high: 8000}"
    assert lengths in text
    long.write_text(text.replace(lengths, "prompt_tokens: {type: fixed, value: 20000}").replace("rate: 8", "rate: 0.2"))
    shown = run("simulate", str(long))
    said = (shown.stdout + shown.stderr).count("outside the calibrated range")
    assert said == 1, shown.stdout + shown.stderr


def test_cost_per_million_tokens_is_the_plan_s_and_an_overloaded_side_is_priced_at_the_demand(tmp_path: Path) -> None:
    """compare prices $/M output tokens as plan does (metrics/token_price.py): the example's deployment planned
    alone (one candidate, one replica) gets the very same figure. B, 4 sequences at a time, cannot keep up (its
    last request finishes minutes after the traffic ends); priced over its own run (what compare did) it cost
    1.43 $/M against A's 0.53, a figure no plan gives: at the demand it costs what A costs, and a note says B
    misses its SLO there."""
    scenario = yaml.safe_load(EXAMPLE.read_text())
    plan = tmp_path / "plan.yaml"
    search = {"hardware": [scenario["hardware"]], "tensor_parallel_size": [1]}
    fields = {"model": scenario["model"], "engine": scenario["engine"], "workload": scenario["workload"]}
    plan.write_text(yaml.safe_dump(fields | {"slo": scenario["slo"], "search": search, "probe_requests": 100}))
    planned = run_plan(plan, tmp_path / "plan").winner
    assert planned is not None and (planned.replicas, planned.gpus) == (1, 1)
    slow = tmp_path / "b.yaml"
    slow.write_text(EXAMPLE.read_text().replace('vllm_version: "0.15.1"', 'vllm_version: "0.15.1"\n  max_num_seqs: 4'))
    compared = compare(EXAMPLE, slow)
    rows = _rows(compared)
    assert rows["cost ($/hour)"]["a"] == planned.cost_per_hour
    assert rows["cost ($/M output tokens)"]["a"] == planned.cost_per_million_tokens  # exactly: one definition
    assert rows["cost ($/M output tokens)"]["b"] == planned.cost_per_million_tokens
    assert rows["output tokens/s"]["b"] < 0.4 * rows["output tokens/s"]["a"]  # overloaded: it served far less
    demand = planned.output_tokens_per_s
    generated = rows["output tokens/s"]["b"]
    assert compared["notes"] == [
        f"cost ($/M output tokens) is at the traffic's demand ({demand:,.0f} output tokens/s), as `ttftsim plan` "
        f"prices a deployment, not at what a run generated: B misses its SLO (generating {generated:,.0f} output "
        "tokens/s over its run), so its figure is what that traffic's tokens cost on a deployment that does not "
        "serve them in time"
    ]
    shown = run("compare", str(EXAMPLE), str(slow)).stdout
    assert f"note: {compared['notes'][0]}" in shown
