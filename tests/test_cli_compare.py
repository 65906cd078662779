"""`ttftsim compare`: the same traffic through two scenarios."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_cli import _assert_one_line_error, run

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama31-8b-h100.yaml"


def _rows(result: dict[str, object]) -> dict[str, dict[str, float]]:
    return {row["metric"]: row for row in result["rows"]}  # type: ignore[attr-defined, index]


def test_a_scenario_against_itself_differs_in_nothing() -> None:
    result = run("compare", str(EXAMPLE), str(EXAMPLE), "--json")
    assert result.returncode == 0, result.stderr
    assert all(row["delta"] in (0.0, None) for row in _rows(json.loads(result.stdout)).values())


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
