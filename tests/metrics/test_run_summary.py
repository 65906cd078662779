"""The typed summary writes exactly summary.json: every recorded example reads back into a RunSummary and
writes out to the same bytes; the SLO verdict keeps its keys, with one figure per percentile target."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from ttftsim.config.slo import TARGETS, Slo
from ttftsim.metrics.run_summary import RunSummary
from ttftsim.metrics.slo import SloVerdict, judge, slo_figures

EXPECTED = Path(__file__).resolve().parents[2] / "examples" / "expected"


@pytest.mark.parametrize("path", sorted(EXPECTED.glob("*.json")), ids=lambda p: p.stem)
def test_recorded_summaries_round_trip_to_the_same_bytes(path: Path) -> None:
    text = path.read_text()
    summary = RunSummary.from_json(json.loads(text))
    assert json.dumps(summary.to_json(), indent=2, sort_keys=True) + "\n" == text


def test_a_summary_of_another_shape_is_one_value_error() -> None:
    data = json.loads((EXPECTED / "llama31-8b-h100.json").read_text())
    del data["ttft_interval_s"]
    with pytest.raises(ValueError, match="no ttft_interval_s"):
        RunSummary.from_json(data)


def _requests(ttft_s: list[float | None]) -> pd.DataFrame:
    n = len(ttft_s)
    served = [t is not None for t in ttft_s]
    return pd.DataFrame(
        {
            "status": ["finished" if s else "rejected" for s in served],
            "ttft_s": ttft_s,
            "tpot_s": [0.01 if s else None for s in served],
            "e2e_s": [1.0 if s else None for s in served],
            "session_id": [-1] * n,
            "generated_tokens": [10 if s else 0 for s in served],
        }
    )


def test_the_verdict_keeps_its_keys_and_counts_the_unserved_as_late() -> None:
    figures = slo_figures(_requests([0.1] * 98 + [None, None]))
    verdict = judge(Slo(ttft_p99_s=0.5), figures)
    assert verdict is not None and verdict.to_json() == {
        "ttft_p99_s": 0.5,
        "p99_counting_unserved_s": "inf",
        "met": False,
    }
    assert SloVerdict.from_json(verdict.to_json()) == verdict


def test_every_percentile_target_is_judged_with_its_own_figure() -> None:
    figures = slo_figures(_requests([0.1] * 100))
    verdict = judge(Slo(ttft_p99_s=0.5, tpot_p99_s=0.005, e2e_p99_s=2.0), figures)
    assert verdict is not None and verdict.to_json() == {
        "ttft_p99_s": 0.5,
        "p99_counting_unserved_s": 0.1,
        "tpot_p99_s": 0.005,
        "tpot_p99_counting_unserved_s": 0.01,
        "e2e_p99_s": 2.0,
        "e2e_p99_counting_unserved_s": 1.0,
        "met": False,  # TPOT 10 ms > 5 ms
    }
    assert judge(Slo(ttft_s=0.5), figures) is None  # per-request targets only: goodput, no verdict


def test_no_arrivals_is_nothing_to_judge() -> None:
    empty = slo_figures(_requests([])).as_dict()
    assert empty.pop("output_tokens_per_unit") == 0.0 and math.isnan(empty.pop("goodput_share"))
    assert empty == dict.fromkeys(TARGETS, math.inf)
    verdict = judge(Slo(ttft_p99_s=0.5), None)
    assert verdict is not None and verdict.to_json() == {
        "ttft_p99_s": 0.5,
        "p99_counting_unserved_s": None,
        "met": False,
    }
