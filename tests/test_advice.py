"""The advice generator (quick mode, as CI runs it) and the arithmetic the articles get wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.test_cli import _assert_one_line_error, run
from ttftsim.advice import BREAKDOWN, Claim, alert_verdict, deep_merge, load_claims, merge_report, shorten, verdict
from ttftsim.explain import decode_intensity, kv_bytes, prefill_flops

CLAIMS = Path(__file__).resolve().parents[1] / "examples" / "advice" / "claims.yaml"


def test_every_claim_1_to_23_has_an_entry_and_a_row(tmp_path: Path) -> None:
    claims = load_claims(CLAIMS)
    assert [c.id for c in claims] == list(range(1, 24))
    out, pairs = tmp_path / "advice.md", tmp_path / "pairs"
    result = run("advice", "--quick", "--claims", str(CLAIMS), "--out", str(out), "--pairs", str(pairs))
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    for claim in claims:
        assert f"## {claim.id}. {claim.title}" in text
        assert f"| {claim.id} | {claim.title} |" in text
        if claim.modelled:
            assert (pairs / f"{claim.id:02d}-1-before.yaml").exists()
        else:
            assert "**Not modelled**" in text.split(f"## {claim.id}. ")[1].split("\n## ")[0]
    assert "Quick mode" in text and "327,680 bytes per token" in text
    # a pair runs on its own with `ttftsim compare`
    assert run("compare", str(pairs / "15-1-before.yaml"), str(pairs / "15-1-after.yaml")).returncode == 0


def test_overlays_merge_but_a_new_distribution_type_replaces() -> None:
    base = {"workload": {"prompt_tokens": {"type": "lognormal", "mean": 1000, "std": 800}, "num_requests": 10}}
    merged = deep_merge(base, {"workload": {"prompt_tokens": {"type": "fixed", "value": 8192}}})
    assert merged["workload"] == {"prompt_tokens": {"type": "fixed", "value": 8192}, "num_requests": 10}
    same = deep_merge(base, {"workload": {"prompt_tokens": {"mean": 500}}})
    assert same["workload"]["prompt_tokens"] == {"type": "lognormal", "mean": 500, "std": 800}
    short = shorten({"workload": {"duration_s": 360}, "cluster": {"faults": [{"at_s": 120}]}})
    assert short["workload"]["duration_s"] == 60 and short["cluster"]["faults"][0]["at_s"] == pytest.approx(20)


def test_the_articles_arithmetic_done_right() -> None:
    kv = kv_bytes("Llama-3.1-70B", "bf16", 32768)
    assert kv["bytes_per_token"] == 2 * 80 * 8 * 128 * 2 == 327_680  # 320 KiB, GQA
    assert kv["total_bytes"] / 1e9 == pytest.approx(10.74, abs=0.01)  # not "50 GB"
    flops = prefill_flops("Llama-3.1-70B", 5000)
    assert flops["dense_flops"] == pytest.approx(2 * flops["non_embedding_params"] * 5000)
    assert 6.8e14 < flops["total_flops"] < 7.3e14  # ~700 TFLOP, not 7 trillion
    assert decode_intensity("Llama-3.1-70B", 1) == pytest.approx(1.0, abs=0.05)  # ~1 FLOP/byte at batch 1
    assert decode_intensity("Llama-3.1-70B", 64) > 40  # grows with the batch
    result = run("explain", "kv", "--model", "Llama-3.1-70B", "--tokens", "32768")
    assert result.returncode == 0 and "327,680 bytes/token" in result.stdout and "10.74 GB" in result.stdout


def test_bad_claims_and_options_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "claims.yaml"
    bad.write_text(CLAIMS.read_text().replace("metric: ttft_p99", "metric: ttft_p42", 1))
    _assert_one_line_error(run("advice", "--quick", "--claims", str(bad), "--out", str(tmp_path / "a.md")), "metric")
    _assert_one_line_error(run("advice", "--only", "one"), "--only")
    missing = run("advice", "--quick", "--claims", str(tmp_path / "none.yaml"), "--out", str(tmp_path / "a.md"))
    _assert_one_line_error(missing, "--claims: file not found: the claims are examples/advice/claims.yaml of a")
    _assert_one_line_error(run("explain", "kv", "--model", "Llama-3.1-70B", "--dtype", "int3"), "--dtype")


def _rows(figures: dict[str, tuple[float | None, float | None]]) -> dict[str, dict[str, float | None]]:
    rows: dict[str, dict[str, float | None]] = {}
    for label, (a, b) in figures.items():
        delta = None if a is None or b is None else b - a
        rows[label] = {"a": a, "b": b, "delta": delta, "relative": None if delta is None or not a else delta / a}
    return rows


def _alert_rows(pages: tuple[int, int], false: tuple[int, int], missed: tuple[int, int]) -> dict[str, Any]:
    return _rows(
        {
            "alert pages": pages,
            "false pages": false,
            "SLO minutes no page caught": missed,
            "SLO-violation minutes": (5, 4),
        }
    )


def test_alert_rule_sets_are_judged_on_false_pages_and_missed_violation_minutes() -> None:
    assert alert_verdict(_alert_rows((3, 1), (2, 0), (1, 1))) == (
        "helps (alert pages 3 -> 1, false pages 2 -> 0, SLO minutes no page caught 1 -> 1, "
        "SLO-violation minutes 5 -> 4)"
    )
    assert alert_verdict(_alert_rows((1, 3), (0, 1), (2, 0))).startswith("trade-off (")  # noisier, misses less
    assert alert_verdict(_alert_rows((2, 2), (0, 0), (1, 2))).startswith("hurts (")
    assert alert_verdict(_alert_rows((1, 1), (0, 0), (0, 0))).startswith("same noise and misses (")
    no_rules = _rows({k: (None, None) for k in ("alert pages", "false pages", "SLO minutes no page caught")})
    no_rules["SLO-violation minutes"] = _rows({"x": (2, 2)})["x"]
    assert alert_verdict(no_rules).startswith("no alert figures to compare")


def test_a_verdict_quotes_the_claims_other_rows_and_skips_those_without_figures() -> None:
    claim = Claim(id=5, title="t", claim="c", also=["cold start median (s)", "SLO-violation minutes"])
    figures: dict[str, tuple[float | None, float | None]] = {k: (0.0, 0.0) for k in BREAKDOWN}
    figures |= {"TTFT P99 (ms)": (1000.0, 250.0), "requests rejected": (0.0, 0.0), "queue (mean ms)": (900.0, 100.0)}
    figures |= {"cold start median (s)": (None, None), "SLO-violation minutes": (5.0, 2.0)}
    assert verdict(claim, _rows(figures)) == "helps: -75% (mostly queueing, -800 ms mean; SLO-violation minutes 5 -> 2)"


def test_every_claim_has_a_prediction() -> None:
    assert [c.id for c in load_claims(CLAIMS) if not c.modelled or not c.runs] == []


def test_a_tpot_claim_is_judged_on_tpot_and_quotes_its_figures() -> None:
    claim = Claim(id=20, title="t", claim="c", metric="tpot_p50", claimed=(-0.5, -0.75), also=["TTFT P99 (ms)"])
    figures: dict[str, tuple[float | None, float | None]] = {k: (0.0, 0.0) for k in BREAKDOWN}
    figures |= {"TPOT P50 (ms)": (8.0, 4.0), "TTFT P99 (ms)": (150.0, 160.0), "requests rejected": (0.0, 0.0)}
    assert verdict(claim, _rows(figures)) == "holds: -50% (TPOT P50 (ms) 8 -> 4; TTFT P99 (ms) 150 -> 160)"


def test_only_replaces_its_claims_rows_and_sections_in_an_existing_report() -> None:
    """`advice --only 2` over an existing report: claim 2's table row and section change, claim 1's stay; quick
    numbers never replace full ones, and a claim the report lacks gives the fresh report."""
    existing = (
        "# t\n\n| 1 | A | - | 1 | helps |\n| 2 | B | - | 1 | hurts |\n\n"
        "## 1. A\n\nold one\n\n## 2. B\n\nold two\n\n## The arithmetic\n\nx\n"
    )
    fresh = "# t\n\n| 2 | B | - | 2 | helps / holds |\n\n## 2. B\n\nnew two\n\n## The arithmetic\n\nx\n"
    expected = existing.replace("| 2 | B | - | 1 | hurts |", "| 2 | B | - | 2 | helps / holds |")
    assert merge_report(existing, fresh, {2}) == expected.replace("old two", "new two")
    quick = fresh.replace("# t\n", "# t **Quick mode: shortened**\n")
    assert merge_report(existing, quick, {2}) == quick
    other = fresh.replace("| 2 |", "| 3 |").replace("## 2.", "## 3.")
    assert merge_report(existing, other, {3}) == other


def test_explain_kv_keeps_a_windowed_layers_last_tokens_only() -> None:
    """gemma-2-9b at 32,768 tokens: 21 full layers hold every token, 21 windowed ones their last 4,096 (as memory and
    vLLM's groups count them), 8,192 bytes a layer and token; explain counted all 42 in full (cold trial F10)."""
    kv = kv_bytes("gemma-2-9b", "bf16", 32768)
    per_layer = 2 * 8 * 256 * 2
    assert kv["total_bytes"] == 21 * per_layer * 32768 + 21 * per_layer * 4096
    assert kv["window"] == "21 of 42 layers keep only their last 4,096 tokens"
    short = kv_bytes("gemma-2-9b", "bf16", 4096)
    assert short["total_bytes"] == 42 * per_layer * 4096 and short["window"] is None
