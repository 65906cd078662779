"""A plan that loses a tensor-parallel size to the all-reduce says so (plan/allreduce.py): Llama-3.1-70B on L40S at
TP2, TP4 and TP8. The calibrated all-reduce (l40s-48gb.json, measured on its source system's PCIe: 3.7 GB/s bus
bandwidth at 4 ranks for a prefill's messages) makes a TP4 prefill 3.5 times as long as a TP2 one, so TP4 and TP8
miss the SLO even at low load. Before, the plan said only that ('misses the SLO even at low load'), nowhere why, and
the terminal's table leaves infeasible rows out: TP4 and TP8 went unmentioned."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from tests.test_cli import run
from ttftsim.plan.run import PlanResult, run_plan
from ttftsim.render.plan import render_plan

PLAN: dict[str, Any] = {
    "name": "l40s-70b",
    "model": "Llama-3.1-70B",
    "engine": {"vllm_version": "0.15.1", "max_model_len": 8192},
    "workload": {
        "type": "synthetic",
        "arrivals": {"type": "poisson", "rate": 2},
        "prompt_tokens": {"type": "lognormal", "mean": 1155, "std": 1109, "high": 7000},
        "output_tokens": {"type": "lognormal", "mean": 211, "std": 163, "high": 1000},
    },
    "slo": {"ttft_p99_s": 3, "tpot_mean_s": 0.1},
    "search": {"hardware": ["L40S-48GB"], "tensor_parallel_size": [2, 4, 8], "quantization": ["fp8"]},
    "probe_requests": 100,
    "confirm_s": 30,
    "confirm_top": 1,
    "seed": 1,
}
SOURCE = (
    "the all-reduce's time is the calibration's (l40s-48gb.json), measured on its source system, whose GPUs talk over "
    "PCIe: bus bandwidth 3.7 GB/s at TP4 and 1.9 GB/s at TP8, where the profile's 31.5 GB/s PCIe link would give "
    "23 GB/s under the roofline; servers whose GPUs are linked otherwise (NVLink bridges, another PCIe topology) "
    "differ, and TP4 and TP8 may serve there"
)


def _plan(folder: Path, plan: dict[str, Any]) -> PlanResult:
    path = folder / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return run_plan(path, folder / "out")


@pytest.fixture(scope="module")
def fp8(tmp_path_factory: pytest.TempPathFactory) -> PlanResult:
    return _plan(tmp_path_factory.mktemp("fp8"), PLAN)


def test_each_size_the_all_reduce_rules_out_says_its_share(fp8: PlanResult) -> None:
    rows = {row.candidate.tensor_parallel_size: row for row in fp8.rows}
    assert [rows[tp].status for tp in (2, 4, 8)] == ["confirmed", "infeasible", "infeasible"]
    assert rows[4].reason == (
        "misses the SLO even at low load (0.03 req/s): P99 TTFT 8.05 s of 3 s; the all-reduce is 91% of a "
        "1,145-token prefill step (1.33 s)"
    )
    assert rows[8].reason.endswith("; the all-reduce is 98% of a 1,145-token prefill step (2.89 s)")
    assert all(rows[tp].explanation.endswith(rows[tp].reason) for tp in (4, 8))
    assert "all-reduce" not in rows[2].explanation  # in the running, and the all-reduce 42% of its step


def test_the_plan_warns_with_the_smaller_size_beside_and_where_the_figure_comes_from(fp8: PlanResult) -> None:
    warning = (
        "L40S-48GB TP4 and TP8 are out, slowed by the all-reduce: a 1,145-token prefill step takes 1.33 s at TP4 "
        f"(91% all-reduce) and 2.89 s at TP8 (98%), against 382 ms at TP2 (42%); {SOURCE}"
    )
    assert [w for w in fp8.warnings if "all-reduce" in w] == [warning]
    console = Console(width=2000, record=True)
    render_plan(console, fp8, Path("out"))
    assert f"warning: {warning}" in console.export_text()  # the terminal's table leaves TP4 and TP8 out


def test_the_share_is_the_one_step_shows() -> None:
    """`ttftsim step` times the same prefill on the same GPUs: its all-reduce share is the plan's."""
    step = ["step", "--model", "Llama-3.1-70B", "--hardware", "L40S-48GB", "--tp", "4", "--weight-dtype", "fp8"]
    shown = run(*step, "--prompt-tokens", "1145")
    assert shown.returncode == 0, shown.stderr
    share = re.search(r"allreduce\s*│\s*[\d.,]+\s*│\s*([\d.]+)%", shown.stdout)
    assert share is not None and round(float(share.group(1))) == 91


def test_with_no_candidate_left_the_closest_says_it(tmp_path: Path) -> None:
    """In bf16 TP2 does not fit (141 GB of weights): TP4 comes closest, and the all-reduce is why it misses."""
    search = {**PLAN["search"], "quantization": [None]}
    result = _plan(tmp_path, PLAN | {"search": search, "slo": {"ttft_p99_s": 3, "tpot_mean_s": 0.06}})
    assert result.winner is None
    assert result.closest() == (
        "L40S-48GB TP4, least_outstanding: misses the SLO even at low load (0.03 req/s): P99 TTFT 8.82 s of 3 s, "
        "mean TPOT 61 ms of 60 ms; the all-reduce is 84% of a 1,145-token prefill step (1.44 s)"
    )
    assert [w for w in result.warnings if "all-reduce" in w] == [
        "L40S-48GB TP4 and TP8 are out, slowed by the all-reduce: a 1,145-token prefill step takes 1.44 s at TP4 "
        f"(84% all-reduce) and 2.94 s at TP8 (96%); {SOURCE}"
    ]
