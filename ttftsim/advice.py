"""`ttftsim advice`: every claim of the common TTFT advice (../shared/reference/seed-claims.md) as runnable
before/after scenario pairs, their predicted effect, and a verdict with the reason read off the TTFT
breakdown; writes examples/advice/pairs/ and docs/advice.md."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field

from ttftsim.compare import compare
from ttftsim.config.base import StrictModel
from ttftsim.config.loading import parse_mapping, read_mapping
from ttftsim.config.scenario import Scenario
from ttftsim.explain import decode_intensity, kv_bytes, prefill_flops
from ttftsim.inputs.structured import load_structured

QUICK_REQUESTS = 200
QUICK_SECONDS = 60.0
NO_EFFECT = 0.02
BREAKDOWN = {"queue (mean ms)": "queueing", "prefill (mean ms)": "prefill compute", "recompute (mean ms)": "recompute"}
BREAKDOWN["waiting behind chunks (mean ms)"] = "waiting behind other chunks"
BREAKDOWN["gateway: cold start, retries (mean ms)"] = "waiting at the gateway for a ready replica"


class Run(StrictModel):
    label: str = Field(description="What changes")
    base: str = Field(description="Scenario file, relative to the claims file")
    before: dict[str, Any] = Field(default_factory=dict, description="Overlay for the baseline")
    after: dict[str, Any] = Field(default_factory=dict, description="Overlay for the lever")


class Claim(StrictModel):
    id: int = Field(ge=1, description="Number in seed-claims.md")
    title: str = Field(description="Short name")
    claim: str = Field(description="What the advice says")
    metric: str = Field(
        default="ttft_p99",
        pattern="^(ttft_p(50|99)|tpot_p50|alerts)$",
        description="The percentile the claim is about (TTFT P50 or P99, TPOT P50), or alerts (pages against "
        "SLO-violation minutes)",
    )
    claimed: tuple[float, float] | None = Field(default=None, description="Claimed relative change (e.g. -0.5, -0.3)")
    modelled: bool = Field(default=True, description="Whether ttftsim can model the lever")
    note: str = Field(default="", description="What to know about the model of this lever")
    also: list[str] = Field(default_factory=list, description="Other rows of `ttftsim compare` the verdict quotes")
    runs: list[Run] = Field(default_factory=list, description="Before/after pairs")


class Claims(StrictModel):
    claims: list[Claim] = Field(description="The claims")


def load_claims(path: Path) -> list[Claim]:
    raw = load_structured(path)  # size, UTF-8, bounded YAML (ttftsim/inputs)
    return parse_mapping(Claims, {"claims": raw}, str(path)).claims


def deep_merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in overlay.items():
        current = merged.get(key)
        replaced_kind = (
            isinstance(value, dict)
            and isinstance(current, dict)
            and value.get("type", current.get("type")) != current.get("type")
        )
        if isinstance(value, dict) and isinstance(current, dict) and not replaced_kind:  # a new `type`: replace
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def shorten(scenario: dict[str, Any]) -> dict[str, Any]:
    """A short version for CI: fewer requests, shorter stages and horizon, faults moved to match."""
    data = copy.deepcopy(scenario)
    workload = data["workload"]
    scale = 1.0
    if workload.get("num_requests"):
        workload["num_requests"] = min(int(workload["num_requests"]), QUICK_REQUESTS)
    if workload.get("duration_s"):
        scale = min(1.0, QUICK_SECONDS / float(workload["duration_s"]))
        workload["duration_s"] = float(workload["duration_s"]) * scale
    arrivals = workload.get("arrivals") or {}
    if arrivals.get("type") == "stages":
        total = sum(float(s["duration_s"]) for s in arrivals["stages"])
        scale = min(1.0, 4 * QUICK_SECONDS / total)
        for stage in arrivals["stages"]:
            stage["duration_s"] = float(stage["duration_s"]) * scale
    if data.get("horizon_s"):
        data["horizon_s"] = float(data["horizon_s"]) * scale
    for fault in (data.get("cluster") or {}).get("faults") or []:
        fault["at_s"] = float(fault["at_s"]) * scale
    return data


def materialize(
    claims_path: Path, claims: list[Claim], pairs: Path, quick: bool
) -> list[tuple[Claim, Run, Path, Path]]:
    """Write each run's two scenarios as files (runnable with `ttftsim compare`)."""
    pairs.mkdir(parents=True, exist_ok=True)
    out = []
    for claim in claims:
        for index, run in enumerate(claim.runs, 1):
            base_path = claims_path.parent / run.base
            base = read_mapping(base_path)
            files = []
            for side, overlay in (("before", run.before), ("after", run.after)):
                data = deep_merge(base, overlay)
                data["name"] = f"{claim.id}.{index} {side}: {run.label}"
                if quick:
                    data = shorten(data)
                parse_mapping(Scenario, data, f"{base_path} (claim {claim.id}, {side})")
                path = pairs / f"{claim.id:02d}-{index}-{side}.yaml"
                header = f"# Claim {claim.id} ({claim.title}), run {index} {side}: {run.label}\n"
                path.write_text(header + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
                files.append(path)
            out.append((claim, run, files[0], files[1]))
    return out


def _rows(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["metric"]: row for row in result["rows"]}


def verdict(claim: Claim, rows: dict[str, dict[str, Any]]) -> str:
    """One line: holds / holds partly / does not hold here, with the main reason from the breakdown, and
    the claim's other rows (`also`) before -> after."""
    if claim.metric == "alerts":
        return alert_verdict(rows)
    shown = [label for label in claim.also if rows[label]["a"] is not None or rows[label]["b"] is not None]
    quoted = "".join(f"; {label} {_figure(rows[label]['a'])} -> {_figure(rows[label]['b'])}" for label in shown)
    line = _ttft_verdict(claim, rows)
    return line[:-1] + quoted + ")" if quoted and line.endswith(")") else line + quoted


ALERT_ROWS = ("alert pages", "false pages", "SLO minutes no page caught", "SLO-violation minutes")


def alert_verdict(rows: dict[str, dict[str, Any]]) -> str:
    """Two rule sets compared on noise (false pages) and what they miss (SLO-violation minutes no page
    caught): helps when neither is worse and one is better, hurts the other way, else a trade-off."""
    figures = ", ".join(f"{label} {_figure(rows[label]['a'])} -> {_figure(rows[label]['b'])}" for label in ALERT_ROWS)
    noise, missed = rows["false pages"]["delta"], rows["SLO minutes no page caught"]["delta"]
    if noise is None or missed is None:
        return f"no alert figures to compare ({figures})"
    if noise == 0 and missed == 0:
        word = "same noise and misses"
    elif noise <= 0 and missed <= 0:
        word = "helps"
    elif noise >= 0 and missed >= 0:
        word = "hurts"
    else:
        word = "trade-off"
    return f"{word} ({figures})"


METRIC_ROWS = {"ttft_p99": "TTFT P99 (ms)", "ttft_p50": "TTFT P50 (ms)", "tpot_p50": "TPOT P50 (ms)"}


def _figure(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:,.3g}"


def _ttft_verdict(claim: Claim, rows: dict[str, dict[str, Any]]) -> str:
    label = METRIC_ROWS[claim.metric]
    relative = rows[label]["relative"]
    if relative is None:
        return f"no {label.split(' (')[0]} to compare (requests went unserved)"
    if claim.metric.startswith("ttft"):
        reason = _reason(rows)  # what moved in the TTFT breakdown
    else:
        reason = f"{label} {_figure(rows[label]['a'])} -> {_figure(rows[label]['b'])}"
    rejected = rows["requests rejected"]["delta"]
    if rejected:
        reason += f"; {rejected:+,.0f} requests rejected"
    if claim.claimed is not None:
        smallest = min(abs(claim.claimed[0]), abs(claim.claimed[1]))
        if relative <= -0.8 * smallest:
            return f"holds: {_pct(relative)} ({reason})"
        if relative < -NO_EFFECT:
            return f"holds partly: {_pct(relative)}, less than the claimed {_pct(-smallest)} ({reason})"
        return f"does not hold here: {_pct(relative)} ({reason})"
    if relative < -NO_EFFECT:
        return f"helps: {_pct(relative)} ({reason})"
    if relative > NO_EFFECT:
        return f"hurts: {_pct(relative)} ({reason})"
    return f"no effect on {claim.metric.replace('_', ' ').upper()} (within 2 %)"


def _reason(rows: dict[str, dict[str, Any]]) -> str:
    deltas = [(abs(rows[k]["delta"] or 0.0), k) for k in BREAKDOWN if rows[k]["delta"] is not None]
    size, key = max(deltas) if deltas else (0.0, "")
    if size < 1.0:
        return "the TTFT breakdown barely moves"
    delta = rows[key]["delta"]
    return f"mostly {BREAKDOWN[key]}, {'+' if delta > 0 else ''}{delta:,.0f} ms mean"


def _pct(value: float) -> str:
    return f"{value:+.0%}"


def _ms(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:,.0f}"


def run_advice(claims_path: Path, pairs: Path, quick: bool, only: set[int] | None = None) -> list[dict[str, Any]]:
    claims = [c for c in load_claims(claims_path) if only is None or c.id in only]
    results: dict[int, list[dict[str, Any]]] = {c.id: [] for c in claims}
    for claim, run, before, after in materialize(claims_path, claims, pairs, quick):
        comparison = compare(before, after)
        rows = _rows(comparison)
        results[claim.id].append(
            {
                "label": run.label,
                "before": before.name,
                "after": after.name,
                "rows": rows,
                "verdict": verdict(claim, rows),
            }
        )
    return [{"claim": c, "runs": results[c.id]} for c in claims]


def render_markdown(results: list[dict[str, Any]], quick: bool, pairs: Path, claims: Path) -> str:
    out = [
        "# What the common advice buys",
        "",
        f"Generated by `ttftsim advice` from `{claims.as_posix()}` (the claims of "
        "`../shared/reference/seed-claims.md`); each run is a pair of scenarios in "
        f"`{pairs.as_posix()}/` that `ttftsim compare BEFORE AFTER` reproduces. Percentages are the predicted "
        "change from before to after; every arrival is simulated (same traffic and seed on both sides)."
        + (" **Quick mode: shortened traffic, numbers are indicative only.**" if quick else ""),
        "",
        "| # | lever | claimed | runs | verdict |",
        "|---|---|---|---|---|",
    ]
    for item in results:
        claim: Claim = item["claim"]
        out.append(
            f"| {claim.id} | {claim.title} | {_claimed(claim)} | {len(item['runs'])} | {_summary(item['runs'])} |"
        )
    out.append("")
    for item in results:
        claim = item["claim"]
        out += [f"## {claim.id}. {claim.title}", "", f"> {claim.claim}", ""]
        if claim.note:
            out += [f"Model note: {claim.note}", ""]
        if not claim.modelled or not item["runs"]:
            out += ["**Not modelled**: no before/after prediction for this lever.", ""]
            continue
        first = METRIC_ROWS[claim.metric] if claim.metric == "tpot_p50" else "TTFT P50 (ms)"  # the claim's own
        out += [
            f"| run | {first.replace(' (ms)', ' ms')} (before -> after) | TTFT P99 ms | cost $/h | verdict |",
            "|---|---|---|---|---|",
        ]
        for run in item["runs"]:
            rows = run["rows"]
            p50, p99, cost = rows[first], rows["TTFT P99 (ms)"], rows["cost ($/hour)"]
            out.append(
                f"| {run['label']} (`{run['before']}`, `{run['after']}`) | {_ms(p50['a'])} -> {_ms(p50['b'])} "
                f"| {_ms(p99['a'])} -> {_ms(p99['b'])} | {cost['a']:.2f} -> {cost['b']:.2f} | {run['verdict']} |"
            )
        out.append("")
    out += _arithmetic()
    return "\n".join(out).rstrip() + "\n"


def _claimed(claim: Claim) -> str:
    if claim.claimed is None:
        return "-"
    low, high = claim.claimed
    span = _pct(low) if low == high else f"{_pct(low)} to {_pct(high)}"
    return f"{span} {METRIC_ROWS[claim.metric].split(' (')[0] if claim.metric in METRIC_ROWS else claim.metric}"


def _summary(runs: list[dict[str, Any]]) -> str:
    """The runs' verdict words, in order (e.g. 'holds / does not hold here')."""
    return " / ".join(run["verdict"].split(":")[0].split(" (")[0] for run in runs) or "not modelled"


def _arithmetic() -> list[str]:
    kv = kv_bytes("Llama-3.1-70B", "bf16", 32768)
    flops = prefill_flops("Llama-3.1-70B", 5000)
    return [
        "## The arithmetic, done right (`ttftsim explain`)",
        "",
        f"- KV cache of Llama-3.1-70B in bf16: {kv['bytes_per_token']:,} bytes per token "
        f"({kv['bytes_per_token'] / 1024:.0f} KiB: 2 x 80 layers x 8 KV heads x 128 x 2 bytes); 32K tokens take "
        f"{kv['total_bytes'] / 1e9:.1f} GB (`ttftsim explain kv --model Llama-3.1-70B --tokens 32768`).",
        f"- Prefill of 5,000 tokens on a 70B model: {flops['total_flops']:.2e} FLOPs "
        f"({flops['total_flops'] / 1e12:,.0f} TFLOP; 2 x params x tokens = {flops['dense_flops']:.2e}, plus "
        "attention), not 7 trillion (`ttftsim explain flops --model Llama-3.1-70B --tokens 5000`).",
        "- Llama-3-70B's hidden size is 8,192 (`ttftsim models`).",
        f"- Decode arithmetic intensity: {decode_intensity('Llama-3.1-70B', 1):.1f} FLOP/byte at batch 1, "
        f"{decode_intensity('Llama-3.1-70B', 64):.0f} at batch 64; the '50 tokens/s ceiling' holds only at batch 1 "
        "(`ttftsim explain decode --model Llama-3.1-70B --batch 64`).",
        "",
    ]


def write_advice(claims_path: Path, out: Path, pairs: Path, quick: bool, only: set[int] | None = None) -> list[Any]:
    """Run the claims and write the report. With `only`, an existing report of the same mode keeps every other
    claim's row and section: only the claims run are replaced."""
    results = run_advice(claims_path, pairs, quick, only)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = render_markdown(results, quick, pairs, claims_path)
    if only is not None and out.is_file():
        text = merge_report(out.read_text(encoding="utf-8"), text, {item["claim"].id for item in results})
    out.write_text(text, encoding="utf-8")
    return results


QUICK_MARK = "**Quick mode:"


def merge_report(existing: str, fresh: str, ids: set[int]) -> str:
    """`existing` with the table rows and sections of claims `ids` taken from `fresh`; `fresh` itself when the two
    are of different modes (quick and full numbers must not mix) or `existing` lacks a claim's row or section."""
    if (QUICK_MARK in existing) != (QUICK_MARK in fresh):
        return fresh
    merged = existing
    for claim_id in sorted(ids):
        new_row, old_row = _row(fresh, claim_id), _row(existing, claim_id)
        new_section, old_section = _section(fresh, claim_id), _section(existing, claim_id)
        if not (new_row and old_row and new_section and old_section):
            return fresh
        merged = merged.replace(old_row, new_row, 1).replace(old_section, new_section, 1)
    return merged


def _row(text: str, claim_id: int) -> str:
    prefix = f"| {claim_id} | "
    return next((line for line in text.splitlines() if line.startswith(prefix)), "")


def _section(text: str, claim_id: int) -> str:
    """From the claim's heading to the next heading (the newline before it excluded)."""
    start = text.find(f"\n## {claim_id}. ")
    if start < 0:
        return ""
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]
