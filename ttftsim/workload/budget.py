"""How much work a scenario asks for, estimated from its schema before anything is generated, and refused
beyond the limits (ttftsim/inputs/limits.py, docs/inputs.md): requests (rate x duration, stages, rate
curves, conversations x turns), distinct prompts built up front, tokens per request, pods and nodes of a
cluster, and the periodic steps of a run (time-series windows, HPA syncs, scrapes, metric refreshes). An
arrival process that cannot end (no duration_s, no num_requests) is an input error, not a hang.

Closed loops without num_requests cannot be estimated (how fast requests return is what the simulation
computes): their clients count what they send, and the run stops with the same error at the limit
(`RequestCounter`). Each error names the file and the field, the estimate, the limit and how to raise it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ttftsim.config.cluster import Cluster
from ttftsim.config.scenario import Client, Scenario
from ttftsim.config.workload import (
    ClosedLoop,
    ConversationWorkload,
    EmpiricalLength,
    FixedLength,
    LengthDist,
    OpenArrivals,
    RateCurveArrivals,
    SharedPrefixWorkload,
    StagedArrivals,
    SyntheticWorkload,
    TraceWorkload,
    UniformLength,
    Workload,
)
from ttftsim.errors import InputError
from ttftsim.inputs.limits import Limits, current_limits
from ttftsim.workload.clients import behaviour

if TYPE_CHECKING:  # a plan is checked by `ttftsim plan` only: simulate need not load its schema
    from ttftsim.config.plan import Plan


def _beyond(what: str, value: float, limits: Limits, name: str) -> str:
    limit = getattr(limits, name)
    amount = f"{value:,.0f}" if math.isfinite(value) and value < 1e15 else f"{value:.3g}"
    return f"{amount} {what}, beyond the limit of {limit:,} ({limits.how_to_raise(name)})"


def _expected_arrivals(arrivals: OpenArrivals, duration_s: float | None) -> float:
    """Expected arrivals before duration_s (inf when nothing ends them)."""
    limit = math.inf if duration_s is None else duration_s
    if isinstance(arrivals, StagedArrivals):
        total, start = 0.0, 0.0
        for stage in arrivals.stages:
            total += stage.rate * max(0.0, min(stage.duration_s, limit - start))
            start += stage.duration_s
        return total
    if isinstance(arrivals, RateCurveArrivals):
        times = [t for t, _ in arrivals.points]
        area = sum(
            (b - a) * (ra + rb) / 2 for (a, ra), (b, rb) in zip(arrivals.points, arrivals.points[1:], strict=False)
        )
        if not arrivals.repeat:
            return area if limit >= times[-1] else area * limit / times[-1]
        return area / times[-1] * limit
    return arrivals.rate * limit


def expected_requests(workload: Workload) -> float:
    """Requests (or, for conversations, conversation starts) the workload sends; inf when unbounded."""
    if isinstance(workload, TraceWorkload):
        return float(workload.num_requests) if workload.num_requests is not None else 0.0  # checked on reading
    if isinstance(workload, SyntheticWorkload) and isinstance(workload.arrivals, ClosedLoop):
        return float(workload.num_requests) if workload.num_requests is not None else 0.0  # counted as sent
    expected = _expected_arrivals(workload.arrivals, workload.duration_s)  # type: ignore[arg-type]
    if workload.num_requests is not None:
        expected = min(expected, float(workload.num_requests))
    return expected


def _largest(dist: LengthDist) -> float:
    """The largest length a distribution can draw (an empirical file is checked when it is read)."""
    if isinstance(dist, FixedLength):
        return float(dist.value)
    if isinstance(dist, EmpiricalLength):
        return 0.0
    return float(dist.high)


def _mean(dist: LengthDist) -> float:
    if isinstance(dist, FixedLength):
        return float(dist.value)
    if isinstance(dist, UniformLength):
        return (dist.low + dist.high) / 2
    if isinstance(dist, EmpiricalLength):
        return 1.0
    return min(float(dist.mean), float(dist.high))


def check_workload(workload: Workload, source: str, field: str, client: Client | None, limits: Limits) -> float:
    """Refuse a workload beyond the limits; return its expected requests."""
    if isinstance(workload, SharedPrefixWorkload | ConversationWorkload) and (
        workload.duration_s is None
        and workload.num_requests is None
        and not isinstance(workload.arrivals, StagedArrivals)
        and not (isinstance(workload.arrivals, RateCurveArrivals) and not workload.arrivals.repeat)
    ):
        raise InputError(source, field, "set duration_s or num_requests: the arrivals never end")
    _check_lengths(workload, source, field, limits)
    requests = expected_requests(workload)
    if isinstance(workload, ConversationWorkload):
        turns = workload.turns
        if _mean(turns) > limits.turns or (
            isinstance(turns, FixedLength | UniformLength) and _largest(turns) > limits.turns
        ):
            raise InputError(
                source, f"{field}.turns", _beyond("turns per conversation", _largest(turns), limits, "turns")
            )
        requests *= _mean(turns)
    if requests > limits.requests:
        what = "requests expected"
        name = (
            "num_requests"
            if getattr(workload, "num_requests", None) and requests >= (workload.num_requests or 0)
            else "arrivals"
        )
        raise InputError(source, f"{field}.{name}", _beyond(what, requests, limits, "requests"))
    _check_prompts(workload, source, field, client, limits)
    return requests


def _check_lengths(workload: Workload, source: str, field: str, limits: Limits) -> None:
    dists: dict[str, LengthDist] = {}
    if isinstance(workload, SyntheticWorkload):
        dists = {"prompt_tokens": workload.prompt_tokens, "output_tokens": workload.output_tokens}
        if workload.shared_prefix_tokens + _largest(workload.prompt_tokens) > limits.tokens:
            raise InputError(
                source,
                f"{field}.shared_prefix_tokens",
                _beyond(
                    "prompt tokens", workload.shared_prefix_tokens + _largest(workload.prompt_tokens), limits, "tokens"
                ),
            )
    elif isinstance(workload, ConversationWorkload):
        dists = {"user_tokens": workload.user_tokens, "output_tokens": workload.output_tokens}
    elif isinstance(workload, SharedPrefixWorkload):
        prompt = workload.system_prompt_len + workload.question_len
        for name, value in (("system_prompt_len", prompt), ("output_len", workload.output_len)):
            if value > limits.tokens:
                raise InputError(source, f"{field}.{name}", _beyond("tokens per request", value, limits, "tokens"))
    for name, dist in dists.items():
        if _largest(dist) > limits.tokens:
            raise InputError(source, f"{field}.{name}", _beyond("tokens per request", _largest(dist), limits, "tokens"))


def _check_prompts(workload: Workload, source: str, field: str, client: Client | None, limits: Limits) -> None:
    prompts, where = 0, ""
    if isinstance(workload, SharedPrefixWorkload):
        prompts, where = workload.num_groups * workload.num_prompts_per_group, f"{field}.num_groups"
    elif isinstance(workload, SyntheticWorkload):
        entries = behaviour(client or Client()).dataset_entries
        prompts, where = entries or 0, "client.dataset_entries"
        if client is not None and client.dataset_sampling is not None and entries is None:
            raise InputError(
                source,
                "client.dataset_sampling",
                f"client.tool {client.tool} sends a new prompt per request here, so there is no dataset to draw "
                "from: set client.dataset_entries",
            )
        warmup = (client or Client()).warmup_requests
        if (
            isinstance(workload.arrivals, ClosedLoop)
            and workload.num_requests is not None
            and warmup >= workload.num_requests > 0
        ):
            raise InputError(
                source,
                "client.warmup_requests",
                f"{warmup:,} warm-up requests leave none of num_requests ({workload.num_requests:,}) to measure",
            )
    if prompts > limits.prompts:
        raise InputError(source, where, _beyond("distinct prompts built up front", prompts, limits, "prompts"))


def _check_cluster(cluster: Cluster, source: str, limits: Limits) -> None:
    counts = {
        "cluster.replicas": cluster.replicas,
        "cluster.warm_pool": cluster.warm_pool,
        "cluster.autoscaling.max_replicas": cluster.autoscaling.max_replicas if cluster.autoscaling else 0,
        "cluster.disaggregation.prefill_replicas": cluster.disaggregation.prefill_replicas
        if cluster.disaggregation
        else 0,
    }
    for index, pool in enumerate(cluster.node_pools):
        counts[f"cluster.node_pools.{index}.max_nodes"] = pool.max_nodes
    counts["cluster.replicas"] = max(counts["cluster.replicas"], cluster.replicas + cluster.warm_pool)
    for field, value in counts.items():
        if value > limits.pods:
            raise InputError(source, field, _beyond("pods or nodes", value, limits, "pods"))


def _traffic_seconds(scenario: Scenario) -> float | None:
    """How long the run lasts, when the scenario says: horizon_s, or the traffic's own span."""
    if scenario.horizon_s is not None:
        return scenario.horizon_s
    workload = scenario.workload
    arrivals = getattr(workload, "arrivals", None)
    if isinstance(arrivals, StagedArrivals):
        return sum(stage.duration_s for stage in arrivals.stages)
    count, rate = getattr(workload, "num_requests", None), getattr(arrivals, "rate", None)
    if workload.duration_s is None and count is not None and rate is not None:
        return float(count / rate)  # the expected span of num_requests sent at the mean rate
    return workload.duration_s


def _check_periods(scenario: Scenario, source: str, limits: Limits) -> None:
    seconds = _traffic_seconds(scenario)
    if seconds is None:
        return
    periods = {"metrics_window_s": scenario.metrics_window_s}
    cluster = scenario.cluster
    if cluster is not None:
        periods["cluster.slo_window_s"] = cluster.slo_window_s
        refresh = getattr(cluster.router, "metrics_refresh_s", None)  # routers that read pod metrics
        if refresh is not None:
            periods["cluster.router.metrics_refresh_s"] = refresh
        if cluster.autoscaling is not None:
            periods["cluster.autoscaling.sync_period_s"] = cluster.autoscaling.sync_period_s
            periods["cluster.autoscaling.scrape_interval_s"] = cluster.autoscaling.scrape_interval_s
        if cluster.controller is not None:
            periods["cluster.controller.period_s"] = cluster.controller.period_s
        if cluster.alerting is not None:
            periods["cluster.alerting.evaluation_interval_s"] = cluster.alerting.evaluation_interval_s
    # num_requests / rate gave a span of more seconds than the limit has steps: the rate made it long, not a period
    derived = scenario.horizon_s is None and getattr(scenario.workload, "duration_s", 0) is None
    rate_made_it = derived and not isinstance(getattr(scenario.workload, "arrivals", None), StagedArrivals)
    for field, period in periods.items():
        steps = seconds / period
        if steps > limits.ticks:
            if rate_made_it and not seconds <= limits.ticks:
                what = f"periodic steps of {field} ({seconds:g} s / {period:g} s: num_requests at this mean rate)"
                raise InputError(source, "workload.arrivals.rate", _beyond(what, steps, limits, "ticks"))
            what = f"periodic steps ({seconds:g} s / {period:g} s)"
            raise InputError(source, field, _beyond(what, steps, limits, "ticks"))


def check_scenario(scenario: Scenario, source: str, limits: Limits | None = None) -> None:
    """Refuse, before anything is generated, a scenario whose work is beyond the limits."""
    limits = limits or current_limits()
    check_workload(scenario.workload, source, "workload", scenario.client, limits)
    if scenario.cluster is not None:
        _check_cluster(scenario.cluster, source, limits)
    blocks = scenario.engine.num_gpu_blocks_override
    if blocks is not None:
        check_blocks(blocks, source, "engine.num_gpu_blocks_override")
    _check_periods(scenario, source, limits)


def check_blocks(blocks: int, source: str, field: str = "engine") -> None:
    """A replica's KV blocks (the engine allocates each): beyond the limit, say so before allocating."""
    limits = current_limits()
    if blocks > limits.kv_blocks:
        raise InputError(source, field, _beyond("KV-cache blocks", blocks, limits, "kv_blocks"))


class RequestCounter:
    """Counts what closed-loop clients and conversations send, and stops the run at the request limit
    (their totals cannot be known up front)."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limit = (limits or current_limits()).requests
        self.sent = 0

    def add(self) -> None:
        self.sent += 1
        if self.sent > self.limit:
            limits = current_limits()
            raise WorkLimitError(
                "workload",
                "",
                f"sent more than {self.limit:,} requests, the limit ({limits.how_to_raise('requests')}); "
                "set num_requests or a shorter duration_s",
            )


class WorkLimitError(InputError):
    """The request limit reached while simulating; simulate() names the scenario's file in it."""


def check_plan(plan: Plan, source: str) -> None:
    """A plan's work: candidates (the search space's product), each probe's and each confirming run's
    requests, replica counts and warm pools, and its traffic as a workload."""
    limits = current_limits()
    space = plan.search
    lists = [getattr(space, name) for name in type(space).model_fields if isinstance(getattr(space, name), list)]
    count = math.prod(len(values) for values in lists)
    if count > limits.candidates:
        raise InputError(source, "search", _beyond("candidate deployments", count, limits, "candidates"))
    if plan.probe_requests > limits.requests:
        raise InputError(
            source, "probe_requests", _beyond("requests per probe", plan.probe_requests, limits, "requests")
        )
    if not isinstance(plan.workload, TraceWorkload):
        confirm = plan.target_rate * plan.confirm_s
        if confirm > limits.requests:
            raise InputError(source, "confirm_s", _beyond("requests to confirm", confirm, limits, "requests"))
    for field, value in (("search.max_replicas", space.max_replicas), ("search.warm_pool", max(space.warm_pool))):
        if value > limits.pods:
            raise InputError(source, field, _beyond("pods", value, limits, "pods"))
    check_workload(plan.workload, source, "workload", None, limits)
    if plan.engine.kv_cache_mode != "paged" and True in space.enable_prefix_caching:
        raise InputError(
            source,
            "search.enable_prefix_caching",
            f"includes true, but engine.kv_cache_mode is {plan.engine.kv_cache_mode}: prefix caching shares paged "
            "blocks only (search [false])",
        )
