"""The metric names an HPA scales on, against the metrics vLLM exports (../shared/reference/serving-semantics.md
§5, from vLLM's `v1/metrics/loggers.py`, 0.11-0.33, with the names of the releases before and of speculative
decoding, LoRA and external prefix caches): a `vllm:` or `vllm_` name (the colon form as vLLM exposes it, the
underscore form as a prometheus-adapter rule usually renames it) one letter or so from one vLLM exports is most
likely misspelt, and the HPA would never get a value for it, so it would never scale. Only such near misses
and the retired gpu_cache_usage_perc are warned of: a name far from all of them may be a metric this list lacks,
or one an adapter rule serves under its own name.

Each metric's target is checked as the API server checks it (k8s.io/kubernetes pkg/apis/autoscaling/validation:
validateMetricTarget and the source's own validate*Source): a Pods metric takes an averageValue only, an Object or
External one a value or averageValue, a Resource or ContainerResource one an averageUtilization or averageValue;
an HPA that breaks that is refused. The other rules of that validation (names, the scale target, behavior) are
not reproduced; the schema check (k8s_schema.py) has the fields' types and the required ones."""

from __future__ import annotations

import difflib
from typing import Any

from ttftsim.validate.api_server_rules import quantity_value
from ttftsim.validate.report import Report

# the names after `vllm:`, exposition suffixes (_total, _bucket, _sum, _count, _created) stripped
VLLM_METRICS = frozenset(
    {
        "time_to_first_token_seconds",
        "inter_token_latency_seconds",
        "request_time_per_output_token_seconds",
        "e2e_request_latency_seconds",
        "request_queue_time_seconds",
        "request_inference_time_seconds",
        "request_prefill_time_seconds",
        "request_decode_time_seconds",
        "num_requests_running",
        "num_requests_waiting",
        "num_requests_waiting_by_reason",
        "kv_cache_usage_perc",
        "prefix_cache_queries",
        "prefix_cache_hits",
        "num_preemptions",
        "prompt_tokens",
        "generation_tokens",
        "request_success",
        "iteration_tokens_total",
        "request_prompt_tokens",
        "request_generation_tokens",
        "cache_config_info",
        # earlier releases, and the optional families (speculative decoding, LoRA, external prefix caches)
        "time_per_output_token_seconds",
        "time_per_prefill_token_request_seconds",
        "request_max_num_generation_tokens",
        "request_params_n",
        "request_params_max_tokens",
        "gpu_prefix_cache_queries",
        "gpu_prefix_cache_hits",
        "num_requests_swapped",
        "cpu_cache_usage_perc",
        "lora_requests_info",
        "spec_decode_num_drafts",
        "spec_decode_num_draft_tokens",
        "spec_decode_num_accepted_tokens",
        "spec_decode_num_accepted_tokens_per_pos",
        "spec_decode_draft_acceptance_rate",
        "spec_decode_efficiency",
        "external_prefix_cache_queries",
        "external_prefix_cache_hits",
    }
)
RETIRED = {"gpu_cache_usage_perc": "kv_cache_usage_perc"}  # deprecated in 0.9.2, hidden in 0.11, gone in 0.33
SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created")


def metric_names(spec: dict[str, Any]) -> list[str]:
    """The names of an HPA's Pods, Object and External metrics (autoscaling/v2)."""
    names = []
    for metric in spec.get("metrics") or []:
        if not isinstance(metric, dict):
            continue
        field = {"Pods": "pods", "Object": "object", "External": "external"}.get(str(metric.get("type")), "")
        source = metric.get(field)
        named = source.get("metric") if isinstance(source, dict) else None
        name = named.get("name") if isinstance(named, dict) else None
        if isinstance(name, str):
            names.append(name)
    return names


def unknown_vllm_metric(name: str) -> str | None:
    """Why a vLLM-looking metric name is not one vLLM exports, or None (also for names that are not vLLM's)."""
    prefix = next((p for p in ("vllm:", "vllm_") if name.startswith(p)), None)
    if prefix is None:
        return None
    base = name[len(prefix) :]
    if base in VLLM_METRICS or any(base.removesuffix(s) in VLLM_METRICS for s in SUFFIXES if base.endswith(s)):
        return None
    if base in RETIRED:
        return f"{name} was deprecated in vLLM 0.9.2, hidden in 0.11 and removed in 0.33: use {prefix}{RETIRED[base]}"
    near = difflib.get_close_matches(base, sorted(VLLM_METRICS), n=1, cutoff=0.85)
    if not near:
        return None  # not a near miss: perhaps a metric this list lacks, or an adapter's own name
    return (
        f"{name} is not a metric vLLM exports (did you mean {prefix}{near[0]}?): the HPA would get no value for it "
        "and never scale"
    )


def check_metric_names(report: Report, hpa: dict[str, Any]) -> None:
    for problem in filter(None, map(unknown_vllm_metric, metric_names(hpa.get("spec") or {}))):
        report.add(
            "warning",
            "hpa",
            f"HPA {hpa.get('metadata', {}).get('name')}: {problem}",
            "name a metric on vLLM's /metrics (e.g. vllm:num_requests_waiting), or the one your prometheus-adapter "
            "rule serves",
        )


# the target fields each metric source takes, the one the API server names when none is set first; a source other
# than object may not set both (validatePodsSource, validateObjectSource, validateExternalSource,
# validateResourceSource, validateContainerResourceSource)
TARGET_FIELDS = {
    "pods": ("averageValue",),
    "object": ("averageValue", "value"),
    "external": ("averageValue", "value"),
    "resource": ("averageUtilization", "averageValue"),
    "containerResource": ("averageUtilization", "averageValue"),
}
TARGET_TYPES = ("Utilization", "Value", "AverageValue")


def target_problems(spec: dict[str, Any]) -> list[str]:
    """Why the API server refuses the targets of an HPA's metrics (autoscaling/v2), each naming its field."""
    problems = []
    metrics = spec.get("metrics")
    for index, metric in enumerate(metrics if isinstance(metrics, list) else []):
        for source in TARGET_FIELDS:
            body = metric.get(source) if isinstance(metric, dict) else None
            target = body.get("target") if isinstance(body, dict) else None
            if isinstance(target, dict):
                problems += _target_problems(target, source, f"spec.metrics.{index}.{source}.target")
    return problems


def _target_problems(target: dict[str, Any], source: str, path: str) -> list[str]:
    """validateMetricTarget's rules (one of the three types, positive values), then those of the metric's source."""
    problems = []
    if target.get("type") is not None and target["type"] not in TARGET_TYPES:
        problems.append(f"{path}.type: {target['type']!r} must be either Utilization, Value, or AverageValue")
    for key in ("value", "averageValue"):
        amount = quantity_value(target.get(key))
        if amount is not None and amount <= 0:
            problems.append(f"{path}.{key}: {target[key]} must be positive")
    utilization = target.get("averageUtilization")
    if isinstance(utilization, int) and not isinstance(utilization, bool) and utilization < 1:
        problems.append(f"{path}.averageUtilization: {utilization} must be greater than 0")
    fields, kind = TARGET_FIELDS[source], source[0].upper() + source[1:]  # the metric's type: Pods, Object, ...
    given = [key for key in fields if target.get(key) is not None]
    if not given:
        sets = ", ".join(f"{key} {value}" for key, value in target.items()) or "nothing"
        problems.append(f"{path}.{fields[0]}: {kind} metrics take a target {' or '.join(fields)} (this one: {sets})")
    elif len(given) > 1 and source != "object":
        problems.append(f"{path}.{fields[-1]}: {kind} metrics take a target {' or '.join(fields)}, not both")
    return problems


def check_metric_targets(report: Report, hpa: dict[str, Any]) -> None:
    for problem in target_problems(hpa.get("spec") or {}):
        report.add(
            "error",
            "hpa",
            f"HPA {hpa.get('metadata', {}).get('name')}: {problem}; the API server refuses it",
            "give each metric the target its source takes: pods an averageValue (type AverageValue); object and "
            "external a value or averageValue; resource and containerResource an averageUtilization or averageValue",
        )
