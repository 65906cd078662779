"""What a replica's steps are timed with (replica.py builds each replica's cost model from these): the kernel
times, calibrated where a fit exists or is asked for, else the roofline; or a scenario's measured step costs (a
linear model); and, where the API server shares the engine core's CPU core, its work added to each step
(SharedCoreCost). It picks and wraps cost models; perf/ computes them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from ttftsim.calibration.costs import CalibratedCosts, fit_path
from ttftsim.calibration.factors import scaled_linear
from ttftsim.config.deployment_calibration import Factors
from ttftsim.config.hardware import HardwareProfile
from ttftsim.config.resolved_engine import ResolvedEngine
from ttftsim.config.scenario import KernelCosts as KernelCostsChoice
from ttftsim.config.scenario import Scenario
from ttftsim.config.versions import ApiServerCosts
from ttftsim.errors import InputError
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.iteration import IterationModel
from ttftsim.perf.kernels import KernelCosts
from ttftsim.perf.linear import LinearStepModel, StepCostModel


def kernel_costs_for(
    choice: KernelCostsChoice, hardware: HardwareProfile, source: str
) -> tuple[KernelCosts | None, str]:
    """The calibrated costs where asked for and available (None means the roofline), and a note that says
    which were used."""
    if choice == "roofline":
        return None, "roofline (kernel_costs: roofline)"
    costs = CalibratedCosts.load(hardware)
    if costs is not None:
        return costs, f"calibrated ({fit_path(hardware.name).name})"
    if choice == "calibrated":
        raise InputError(
            source,
            "kernel_costs",
            f"no calibration for {hardware.name} ({fit_path(hardware.name)}); "
            "run `ttftsim calibrate --from ...` or use kernel_costs: roofline",
        )
    return None, f"roofline (no calibration for {hardware.name})"


def step_cost(
    scenario: Scenario, engine: ResolvedEngine, perf: IterationModel, factors: Factors, source: str
) -> StepCostModel:
    """What the engine is timed with: the iteration model (perf), or the scenario's measured step costs scaled by
    the deployment factors; with the API server's work added where it shares the engine core's CPU core."""
    measured = scenario.measured_step_cost
    if measured is not None and engine.pp > 1:
        raise InputError(
            source, "engine.pipeline_parallel_size", "pipeline parallelism needs per-stage times: use kernel costs, "
            "not measured_step_cost",
        )  # fmt: skip
    cost: StepCostModel = (
        perf
        if measured is None
        else scaled_linear(
            LinearStepModel(
                measured.fixed_s,
                measured.per_token_s,
                measured.per_kv_token_s,
                measured.per_attn_pair_s,
                measured.per_decode_token_s,
            ),
            factors,
        )
    )
    return shared_core(cost, engine, source) if scenario.engine.api_server_shares_core else cost


def shared_core(cost: StepCostModel, engine: ResolvedEngine, source: str) -> StepCostModel:
    """The step costs of an engine whose API server shares the engine core's CPU core (SharedCoreCost)."""
    if engine.pp > 1 or engine.dp > 1:
        what = "pipeline parallelism (per-stage times)" if engine.pp > 1 else "data parallelism (an engine core a rank)"
        raise InputError(source, "engine.api_server_shares_core", f"not modelled with {what}")
    return SharedCoreCost(cost, engine.api_server)


class SharedCoreCost:
    """Step costs when the API server and the engine core share one CPU core (engine.api_server_shares_core).
    When a step ends, the engine core hands its outputs to the API server and prepares the next step; on one
    core the two take turns, and the API server, woken by the outputs, holds the core while it detokenizes
    and writes them (AsyncLLM.output_handler; engine/api_server.py): the next step starts that much later.
    Charged as the step's own batch's work (per_step_s + per_output_token_s per token sampled: in a run of
    decodes the batch before it), on every step but one started from idle, whose predecessor's outputs were
    sent while the engine waited. The tokens' delivery is modelled as before (engine/api_server.py): a token
    reaches the client the server's work after its step, and the step after it starts then too. Measured on
    the real CPU server (benchmarks/vllm_cpu/closed_loop_trace.py, the API server, engine core and client on
    one core): decode steps of 8 ran 0.66 ms over the in-process microbenchmark, of 4 0.23 ms, where this
    charges 0.85 and 0.59 ms (the API server measured on the same host); an upper bound, the core's sharing
    being the OS's time slicing. Speculative decoding's accepted drafts are not counted as tokens here."""

    def __init__(self, inner: StepCostModel, api: ApiServerCosts) -> None:
        self.inner = inner
        self.per_step_s = api.per_step_s
        self.per_token_s = api.per_output_token_s

    def _outputs_s(self, num_sampled: int) -> float:
        return self.per_step_s + self.per_token_s * num_sampled if num_sampled else 0.0

    def time_s(self, shape: BatchShape) -> float:
        return self.inner.time_s(shape) + self._outputs_s(shape.num_sampled)

    def idle_start_s(self, shape: BatchShape) -> float:
        return self.inner.idle_start_s(shape)  # the outputs before it went out while the engine was idle

    def decode_step_s(self, num_seqs: int) -> Callable[[int], float]:
        step, extra = self.inner.decode_step_s(num_seqs), self._outputs_s(num_seqs)
        return lambda kv_tokens: step(kv_tokens) + extra

    def decode_run_s(self, num_seqs: int, kv_tokens: int, steps: int) -> NDArray[np.float64]:
        result: NDArray[np.float64] = self.inner.decode_run_s(num_seqs, kv_tokens, steps) + self._outputs_s(num_seqs)
        return result
