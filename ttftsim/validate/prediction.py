"""The TTFT prediction: the declared traffic simulated on the replicas the workload runs (its HPA's or KEDA's
minimum where one scales it), judged against the SLO. Findings for requests the engine refuses whatever the load,
for a KV cache that holds fewer sequences of the traffic's mean context than max_num_seqs, and, where the SLO is
missed, the replicas that would meet it (up to MAX_EXTRA_REPLICAS more) or why no count can. The replica count stays
fixed through the run: scaling during it is not modelled."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ttftsim.config.deploy import Deploy
from ttftsim.config.workload import ConversationWorkload, SyntheticWorkload
from ttftsim.inputs.files import counted
from ttftsim.metrics.slo import SloCheck, judge, slo_figures
from ttftsim.metrics.summary import reason_kinds
from ttftsim.simulate import simulate
from ttftsim.validate.report import Prediction, Report
from ttftsim.validate.target import Target, scenario_for
from ttftsim.workload.sources import WorkloadContext, open_loop_requests

MAX_EXTRA_REPLICAS = 8


def predict(report: Report, deploy: Deploy, target: Target, base: Path) -> None:
    replicas = _predicted_replicas(report, target)
    if replicas == 0:
        return
    scenario = scenario_for(deploy, target, replicas, cluster=True)
    result = simulate(scenario, base)
    figures = slo_figures(result.requests, deploy.slo, (result.itl_values, result.itl_weights))
    report.prediction = Prediction(replicas, result.replica.kernel_costs, figures)
    _kv_pressure(report, result, scenario, base)
    for stall in result.stall_warnings():  # why requests went unserved, when an engine stopped for good
        report.add("warning", "stall", stall)
    refused = _refused(report, result.requests)
    verdict = judge(deploy.slo, figures)
    checks = [] if verdict is None else list(verdict.checks)
    if verdict is None or verdict.met:
        report.add("info", "slo", f"predicted {_checks_text(checks)} with {counted(replicas, 'replica')} meets the SLO")
        return
    missed = [check for check in checks if not check.is_met]
    if refused and _served(result.requests, deploy.slo, result).meets(deploy.slo):
        # the refused requests alone miss it: they are refused on any number of replicas
        report.add(
            "error",
            "slo",
            f"predicted {_checks_text(missed)} with {counted(replicas, 'replica')} misses the SLO",
            "serve the refused requests first (the rejected finding): more replicas refuse them too",
        )
        return
    floor = _lone_decode_s(result) if target.engine.speculative_config is None else 0.0
    beyond = [check for check in missed if check.target.startswith(("tpot", "itl")) and floor > check.target_s]
    if beyond:  # a lower bound no replica count moves: every token of a request alone takes a decode step
        _decode_floor_miss(report, replicas, missed, beyond, floor)
        return
    _miss_with_replicas_needed(report, deploy, target, base, replicas, missed, refused)


def _decode_floor_miss(
    report: Report, replicas: int, missed: list[SloCheck], beyond: list[SloCheck], floor: float
) -> None:
    """The SLO missed on a TPOT or ITL target below one lone decode step: an error no replica count fixes."""
    report.add(
        "error",
        "slo",
        f"predicted {_checks_text(missed)} with {counted(replicas, 'replica')} misses the SLO",
        f"a request alone on a replica waits {floor:.4f} s a token (one sequence's decode step at the median "
        f"prompt), over the {_checks_text(beyond, figures=False)}: more replicas cannot meet it; a faster GPU, "
        "more tensor parallelism or quantization might (ttftsim plan)",
    )


def _miss_with_replicas_needed(
    report: Report, deploy: Deploy, target: Target, base: Path, replicas: int, missed: list[SloCheck], refused: int
) -> None:
    """The SLO missed: an error whose fix is the fewest replicas that meet it (each count simulated, up to
    MAX_EXTRA_REPLICAS more), else a faster configuration."""
    needed = None
    for extra in range(1, MAX_EXTRA_REPLICAS + 1):
        run = simulate(scenario_for(deploy, target, replicas + extra, cluster=True), base)
        more = _served(run.requests, deploy.slo, run) if refused else _figures(run.requests, deploy.slo, run)
        if more.meets(deploy.slo):
            needed = replicas + extra
            break
    report.add(
        "error",
        "slo",
        f"predicted {_checks_text(missed)} with {counted(replicas, 'replica')} misses the SLO",
        (f"run {needed} replicas (minReplicas)" if _scaled(target) else f"run {needed} replicas (replicas: {needed})")
        + (" and serve the refused requests (the rejected finding)" if refused else "")
        if needed
        else f"more than {replicas + MAX_EXTRA_REPLICAS} replicas, or a faster configuration (ttftsim plan)",
    )


def _kv_pressure(report: Report, result: Any, scenario: Any, base: Path) -> None:
    """Fewer sequences of the traffic's mean context fit the KV cache than max_num_seqs: a warning when the
    prediction preempted requests for it, an info line when the traffic never filled the batch that far."""
    engine = result.replica.engine
    mean_context = _mean_context(scenario, base)
    fits_seqs = result.replica.num_blocks * engine.block_size // max(int(mean_context), 1)
    if fits_seqs >= engine.max_num_seqs:
        return
    preemptions = int(result.requests["num_preemptions"].sum())
    holds = (
        f"at the traffic's mean context (~{mean_context:,.0f} tokens) the KV cache holds {fits_seqs} sequences, "
        f"fewer than max_num_seqs {engine.max_num_seqs}"
    )
    if preemptions:
        report.add(
            "warning",
            "kv-capacity",
            f"{holds}: {counted(preemptions, 'preemption')} predicted (a preempted request computes its KV again)",
            f"lower --max-num-seqs to {max(fits_seqs, 1)}, or add KV memory (TP, fp8 KV cache)",
        )
    else:
        report.add("info", "kv-capacity", f"{holds}; this traffic never fills the batch that far (no preemption)")


def _mean_context(scenario: Any, base: Path) -> float:
    """Mean prompt + output tokens of the traffic (its open-loop requests; a conversation's first turns)."""
    workload = scenario.workload
    if isinstance(workload, ConversationWorkload) or (
        isinstance(workload, SyntheticWorkload) and workload.arrivals.type == "closed_loop"
    ):
        sample = simulate(scenario.model_copy(update={"horizon_s": 60.0}), base).requests
        return float((sample["prompt_tokens"] + sample["output_tokens"]).mean()) if len(sample) else 0.0
    requests = open_loop_requests(workload, WorkloadContext(np.random.default_rng(0), base))
    return float(np.mean([r.prompt_tokens + r.output_tokens for r in requests])) if requests else 0.0


def _figures(requests: Any, slo: Any, result: Any) -> Any:
    return slo_figures(requests, slo, (result.itl_values, result.itl_weights))


def _served(requests: Any, slo: Any, result: Any) -> Any:
    """The SLO figures of the requests the engine did not refuse (what more replicas can change)."""
    return _figures(requests[requests["status"] != "rejected"], slo, result)


def _scaled(target: Target) -> bool:
    """An HPA scales the workload (its minReplicas is what to raise)."""
    return target.serving is not None and target.serving.scaling_hpa() is not None


def _refused(report: Report, requests: Any) -> int:
    """Requests the engine refuses whatever the load (longer than max_model_len, more KV than the cache): an error
    finding with the commonest reason and what would admit them; how many."""
    rejected = requests["status"] == "rejected"
    count = int(rejected.sum())
    if not count:
        return 0
    reasons = requests.loc[rejected, "reason"].astype(str)
    shapes = reason_kinds(reasons)  # one reason, whatever its numbers
    kinds = shapes.value_counts()
    example = reasons[shapes == kinds.index[0]].iloc[0]
    too_long = reasons.str.contains("tokens exceed max_model_len", regex=False)
    lengths = (requests["prompt_tokens"] + requests["output_tokens"])[rejected]
    others = f" (and {counted(len(kinds) - 1, 'other reason')})" if len(kinds) > 1 else ""
    fix = (
        f"raise --max-model-len to at least {int(lengths[too_long].max()):,} (the longest prompt + output refused "
        "for it), or bound the traffic's lengths"
        if "tokens exceed max_model_len" in example
        else "more KV memory (tensor parallelism, an fp8 KV cache, a higher --gpu-memory-utilization), or shorter "
        "requests"
    )
    report.add(
        "error",
        "rejected",
        f"{counted(count, 'request')} of {len(requests):,} ({count / len(requests):.1%}) are refused by the engine, "
        f"e.g. {example}{others}",
        fix,
    )
    return count


def _predicted_replicas(report: Report, target: Target) -> int:
    """The replicas the prediction runs with: the minReplicas of the HPA that scales the workload (or KEDA's
    minReplicaCount), else the workload's own count. Zero: scaled to nothing without an autoscaler is an error
    (nothing serves the traffic, no prediction); an autoscaler's minimum of 0 (scale to zero: HPAScaleToZero,
    KEDA's default) runs 1 with a warning."""
    serving = target.serving
    hpa = serving.scaling_hpa() if serving is not None else None
    keda = serving.keda if serving is not None and hpa is None else None
    if hpa is not None:
        scaler, field, low = (
            f"HPA {hpa.get('metadata', {}).get('name')}",
            "minReplicas",
            _minimum(hpa, "minReplicas", 1),
        )
        how = "(feature gate HPAScaleToZero)"
    elif keda is not None:  # KEDA's minReplicaCount (default 0: scale to zero, activated by its triggers)
        scaler, field = f"ScaledObject {(keda.get('metadata') or {}).get('name')}", "minReplicaCount"
        low, how = _minimum(keda, "minReplicaCount", 0), "(KEDA's triggers are not modelled)"
    else:
        if target.replicas == 0:
            where = f"{serving.kind}/{serving.name}" if serving is not None else report.name
            report.add(
                "error",
                "replicas",
                f"{where}: 0 replicas and no HPA scales it: nothing serves the traffic",
                "set replicas >= 1, or an HPA with minReplicas >= 1",
            )
        return target.replicas
    if low == 0:
        report.add(
            "warning",
            "hpa",
            f"{scaler}: {field} 0 scales to zero {how}: predicted with 1 replica; a request after an idle spell waits "
            "for a whole cold start",
            f"keep {field} >= 1 where the TTFT SLO must hold after idle spells",
        )
    return max(low, 1)


def _minimum(scaler: dict[str, Any], field: str, default: int) -> int:
    return int((scaler.get("spec") or {}).get(field, default))


def _lone_decode_s(result: Any) -> float:
    """The time of one decode step with a single sequence at the median prompt's context: the least a token can
    take on this configuration (the API server's and the client's time come on top)."""
    prompts = result.requests["prompt_tokens"]
    if prompts.empty:
        return 0.0
    return float(result.replica.perf.decode_step_s(1)(int(prompts.median()) + 1))


def _checks_text(checks: list[SloCheck], figures: bool = True) -> str:
    """`P99 TTFT 0.122 s (target 0.5 s), P99 TPOT 0.014 s (target 0.001 s)`; a priority class's with its class;
    without `figures`: `P99 TTFT target 0.5 s, ...`."""
    parts = []
    for check in checks:
        who = "" if check.priority is None else f"priority {check.priority} "
        figure = math.inf if check.figure_s is None else check.figure_s
        if check.target == "goodput_share":
            share = f"{figure:.1%}" if math.isfinite(figure) else "none"
            parts.append(f"{who}goodput {share} of arrivals (target {check.target_s:.1%})")
            continue
        metric, _, level = check.target.removesuffix("_s").partition("_")
        level = "mean" if level == "mean" else level.upper()
        if not figures:
            parts.append(f"{who}{level} {metric.upper()} target {check.target_s:g} s")
            continue
        shown = "none" if check.figure_s is None else _seconds(figure)  # a priority class with no arrivals
        parts.append(f"{who}{level} {metric.upper()} {shown} (target {check.target_s:g} s)")
    return ", ".join(parts) or "figures"


def _seconds(value: float) -> str:
    return "never (requests go unserved)" if not math.isfinite(value) else f"{value:.3f} s"
