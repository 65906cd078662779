"""Why a plan loses a tensor-parallel size to the all-reduce, in words. Where GPUs talk over a slow interconnect
(L40S: PCIe, no NVLink), the all-reduce each layer runs twice takes most of a large TP's prefill, so a TP4 or TP8
replica can prefill slower than a TP2 one: every candidate of that size misses the SLO even at low load, or is
pruned by its cost bound, and the plan would say only that.

For each TP above 1 of a GPU type that has no candidate left in the running, the best candidate of that size
(plan/ranking.py best_per_gpu's order) is timed on one prefill step of the traffic's mean prompt (at most one chunk
of max_num_batched_tokens) with the iteration model (perf/iteration.py, whose `allreduce` part is every layer's
all-reduces); when the all-reduce is most of that step (ALLREDUCE_BINDS), the row's reason says so, and the plan
warns once per GPU type with the smaller TPs' steps beside it and where the all-reduce's time comes from: the
calibration's, measured on its source system's interconnect, so a server linked otherwise differs.

Left out: decode steps (a decode step's messages are a few KB per sequence, latency more than bandwidth) and the
candidates other than each size's best.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ttftsim.config.hardware import Link
from ttftsim.config.plan import Plan
from ttftsim.config.workload import (
    ConversationWorkload,
    SharedPrefixWorkload,
    SyntheticWorkload,
    TraceWorkload,
    Workload,
)
from ttftsim.errors import InputError
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.kernels import RooflineCosts
from ttftsim.perf.memory import DoesNotFitError
from ttftsim.plan import evaluate
from ttftsim.plan.ranking import Row, best_per_gpu
from ttftsim.replica import build_replica
from ttftsim.workload.expected import expected_length
from ttftsim.workload.traces import window_requests

ALLREDUCE_BINDS = 0.5  # the all-reduce is most of the step: it, not the GEMMs a larger TP splits, sets the time
IN_THE_RUNNING = ("confirmed", "estimate")
ACTIVATION_BYTES = 2  # the hidden states all-reduced, bf16 (perf/iteration.py)
LINK_WORDS = {"pcie": "PCIe", "nvlink": "NVLink", "infinity_fabric": "Infinity Fabric", "network": "the network"}


@dataclass(frozen=True)
class PrefillStep:
    """One prefill step of `prompt_tokens` on a candidate's replica: its time, the all-reduce's part, and the bus
    bandwidth one of its all-reduces reaches (nccl-tests' busbw: 2 (n - 1) / n x message / time), with the one the
    profile's link would give under the roofline."""

    row: Row
    prompt_tokens: int
    step_s: float
    allreduce_s: float
    bus_bytes_per_s: float
    roofline_bus_bytes_per_s: float
    link: Link
    kernel_costs: str  # the replica's note: 'calibrated (l40s-48gb.json)' or 'roofline (...)'

    @property
    def tp(self) -> int:
        return self.row.candidate.tensor_parallel_size

    @property
    def allreduce_share(self) -> float:
        return self.allreduce_s / self.step_s if self.step_s > 0 else 0.0

    @property
    def is_calibrated(self) -> bool:
        """The all-reduce's time is the calibration's (it differs from the roofline over the profile's link)."""
        return self.bus_bytes_per_s != self.roofline_bus_bytes_per_s


def explain_lost_sizes(plan: Plan, base: str, rows: list[Row]) -> list[str]:
    """Each GPU type's TPs lost to the all-reduce: their best rows' reasons (and sentences) say it, and one warning
    per GPU type (returned) says it with the smaller TPs' steps beside them. A replica is built only for the best
    row of a TP with no row in the running (and then for the smaller TPs' best)."""
    warnings = []
    for hardware in plan.search.hardware:
        best = _best_bounded([r for r in rows if r.candidate.hardware == hardware])
        out = [row for tp, row in best.items() if tp > 1 and row.status not in IN_THE_RUNNING]
        prompt = mean_prompt_tokens(plan.workload, Path(base)) if out else 0.0
        steps = [step for row in out if (step := prefill_step(plan, base, row, prompt)) is not None]
        lost = [step for step in steps if step.allreduce_share >= ALLREDUCE_BINDS]
        if not lost:
            continue
        for step in lost:
            said = f"; the all-reduce is {step.allreduce_share:.0%} of a {_tokens(step)} prefill step ({_time(step)})"
            step.row.reason += said
            step.row.explanation += said
        smaller = [prefill_step(plan, base, row, prompt) for tp, row in best.items() if tp < lost[0].tp]
        warnings.append(_warning(hardware, lost, [step for step in smaller if step is not None]))
    return warnings


def _best_bounded(rows: list[Row]) -> dict[int, Row]:
    """By TP, smallest first: the best row (best_per_gpu's order) of those that were bounded (fit and start), for
    each TP; a TP with a row in the running is given by that row, so it is never out."""
    best: dict[int, Row] = {}
    for tp in sorted({r.candidate.tensor_parallel_size for r in rows}):
        group = [r for r in rows if r.candidate.tensor_parallel_size == tp]
        running = [r for r in group if r.status in IN_THE_RUNNING]
        bounded = running or [r for r in group if r.saturated_rate == r.saturated_rate]
        if bounded:
            best[tp] = next(iter(best_per_gpu(bounded).values()))
    return best


def prefill_step(plan: Plan, base: str, row: Row, prompt: float) -> PrefillStep | None:
    """The row's candidate timed on one prefill of the mean prompt (at most one chunk); None if it does not start."""
    try:
        replica = build_replica(evaluate.scenario(plan, row.candidate, 1.0, 1, base), Path(base))
    except (DoesNotFitError, InputError):
        return None
    tokens = max(1, min(round(prompt), replica.engine.max_num_batched_tokens))
    timing = replica.perf.timing(BatchShape.from_sequences([tokens], [0]))
    deployment = replica.perf.deployment
    message = float(timing.num_padded_tokens * deployment.model.hidden_size * ACTIVATION_BYTES)
    tp, link = deployment.tp, deployment.tp_link
    one_s = replica.perf.costs.allreduce_s(message, tp, link) if tp > 1 else math.inf  # none on one GPU
    roofline_s = RooflineCosts(deployment.hardware).allreduce_s(message, tp, link) if tp > 1 else math.inf
    bus = 2 * (tp - 1) / tp * message
    allreduce_s = timing.breakdown.get("allreduce", 0.0)
    return PrefillStep(
        row, tokens, timing.total_s, allreduce_s, _rate(bus, one_s), _rate(bus, roofline_s), link, replica.kernel_costs
    )


def _rate(size: float, seconds: float) -> float:
    """Bytes a second (infinite where the time is none: no all-reduce, or one the cost model prices at 0)."""
    return size / seconds if seconds > 0 else math.inf


def mean_prompt_tokens(workload: Workload, base: Path) -> float:
    """The prompt tokens a request of the traffic sends on average (a conversation: its first turn's)."""
    if isinstance(workload, SyntheticWorkload):
        return workload.shared_prefix_tokens + expected_length(workload.prompt_tokens, base)
    if isinstance(workload, SharedPrefixWorkload):
        return float(workload.system_prompt_len + workload.question_len)
    if isinstance(workload, ConversationWorkload):
        return workload.system_prompt_tokens + expected_length(workload.user_tokens, base)
    assert isinstance(workload, TraceWorkload)
    requests = window_requests(workload, base)
    return sum(r.prompt_tokens for r in requests) / len(requests) if requests else 1.0


def _warning(hardware: str, lost: list[PrefillStep], smaller: list[PrefillStep]) -> str:
    """'L40S-48GB TP4 and TP8 are out, slowed by the all-reduce: a 1,145-token prefill step takes 1.33 s at TP4
    (91% all-reduce) and 2.89 s at TP8 (98%), against 382 ms at TP2 (42%); ...' and where the all-reduce's time
    comes from."""
    sizes = " and ".join(f"TP{s.tp}" for s in lost)
    times = " and ".join(
        f"{_time(s)} at TP{s.tp} ({s.allreduce_share:.0%}{' all-reduce' if i == 0 else ''})" for i, s in enumerate(lost)
    )
    against = ", ".join(f"{_time(s)} at TP{s.tp} ({s.allreduce_share:.0%})" for s in smaller)
    text = (
        f"{hardware} {sizes} {'is' if len(lost) == 1 else 'are'} out, slowed by the all-reduce: a "
        f"{_tokens(lost[0])} prefill step takes {times}" + (f", against {against}" if against else "")
    )
    link, kind = lost[0].link, LINK_WORDS.get(lost[0].link.kind, lost[0].link.kind)
    reached = " and ".join(f"{s.bus_bytes_per_s / 1e9:,.1f} GB/s at TP{s.tp}" for s in lost)
    if not lost[0].is_calibrated:
        return (
            text + f"; the all-reduce's time is the roofline's over the profile's {kind} link: bus bandwidth {reached}"
        )
    source = lost[0].kernel_costs.removeprefix("calibrated ").strip("()")
    return text + (
        f"; the all-reduce's time is the calibration's ({source}), measured on its source system, whose GPUs talk "
        f"over {kind}: bus bandwidth {reached}, where the profile's {link.bw_bytes_per_s / 1e9:,.1f} GB/s {kind} link "
        f"would give {lost[0].roofline_bus_bytes_per_s / 1e9:,.0f} GB/s under the roofline; servers whose GPUs are "
        f"linked otherwise (NVLink bridges, another PCIe topology) differ, and {sizes} may serve there"
    )


def _tokens(step: PrefillStep) -> str:
    return f"{step.prompt_tokens:,}-token"


def _time(step: PrefillStep) -> str:
    return f"{step.step_s * 1e3:,.0f} ms" if step.step_s < 1 else f"{step.step_s:,.2f} s"
