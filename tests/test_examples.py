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
