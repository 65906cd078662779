"""Every shipped example runs and reproduces its recorded summary (the simulator is seeded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.reference_data import require_shared

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _compare(actual: Any, expected: Any, where: str = "") -> None:
    if isinstance(expected, dict):
        assert set(actual) == set(expected), where
        for key in expected:
            _compare(actual[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, float):
        assert actual == pytest.approx(expected, rel=1e-6, abs=1e-12), where
    else:
        assert actual == expected, where


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_example_reproduces_its_recorded_summary(path: Path) -> None:
    from examples.record import recorded_summary

    if "../shared" in path.read_text():
        require_shared(f"{path.name} replays a trace from it")
    expected = json.loads((EXAMPLES / "expected" / f"{path.stem}.json").read_text())
    _compare(json.loads(json.dumps(recorded_summary(path))), expected)


@pytest.mark.parametrize("path", sorted((EXAMPLES / "expected").glob("*.json")), ids=lambda p: p.stem)
def test_recorded_summaries_hold_the_invariants_of_any_correct_run(path: Path) -> None:
    from examples.record import invariant_problems

    assert invariant_problems(json.loads(path.read_text())) == []


def test_the_invariant_check_catches_what_it_names() -> None:
    from examples.record import invariant_problems

    good = json.loads((EXAMPLES / "expected" / "llama31-8b-h100.json").read_text())
    lost = json.loads(json.dumps(good))
    lost["requests"]["finished"] -= 1
    assert invariant_problems(lost) == [
        f"requests: {good['requests']['arrived']} arrived but {good['requests']['arrived'] - 1} are accounted for"
    ]
    swapped = json.loads(json.dumps(good))
    swapped["ttft_s"]["p50"], swapped["ttft_s"]["p99"] = good["ttft_s"]["p99"], good["ttft_s"]["p50"]
    assert [p.split(":")[0] for p in invariant_problems(swapped)] == ["ttft_s"]
    slow_first_token = json.loads(json.dumps(good))
    slow_first_token["ttft_s"]["mean"] = good["e2e_s"]["mean"] * 2
    assert any(p.startswith("mean TTFT") for p in invariant_problems(slow_first_token))
