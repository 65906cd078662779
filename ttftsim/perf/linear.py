"""A step-cost model linear in the work of an iteration: fixed + per scheduled token + per KV token read.

Used where iteration times are measured rather than derived (a CPU host timed by a microbenchmark), and
in tests that need service times known in closed form. Satisfies the same `StepCostModel` protocol as the
roofline IterationModel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from ttftsim.perf.batch import BatchShape


class StepCostModel(Protocol):
    """What the engine asks: the time of one iteration, and of a run of decode-only iterations (as a
    function of the KV total for short runs, as an array for long ones)."""

    def time_s(self, shape: BatchShape) -> float: ...

    def idle_start_s(self, shape: BatchShape) -> float:
        """The time of an iteration the engine starts from idle: no step in flight hides its host time."""
        ...

    def decode_step_s(self, num_seqs: int) -> Callable[[int], float]: ...

    def decode_run_s(self, num_seqs: int, kv_tokens: int, steps: int) -> NDArray[np.float64]: ...


class PipelineCostModel(StepCostModel, Protocol):
    """A cost model that also splits a batch over pipeline stages (the roofline IterationModel does)."""

    def stage_times(self, shape: BatchShape, hidden_host: bool) -> list[float]: ...

    def transfer_times(self, shape: BatchShape) -> list[float]: ...


@dataclass(frozen=True)
class LinearStepModel:
    fixed_s: float
    per_token_s: float = 0.0  # per prefill token (and per decode token unless per_decode_token_s is set)
    per_kv_token_s: float = 0.0
    per_attn_pair_s: float = 0.0
    per_decode_token_s: float | None = None

    @property
    def _decode_s(self) -> float:
        return self.per_token_s if self.per_decode_token_s is None else self.per_decode_token_s

    def time_s(self, shape: BatchShape) -> float:
        if shape.num_tokens == 0:
            return 0.0
        kv = shape.prefill_kv_tokens + shape.decode_kv_tokens
        return (
            self.fixed_s
            + self.per_token_s * shape.prefill_tokens
            + self._decode_s * shape.num_decode_seqs
            + self.per_kv_token_s * kv
            + self.per_attn_pair_s * shape.prefill_attn_pairs
        )

    def idle_start_s(self, shape: BatchShape) -> float:
        return self.time_s(shape)  # measured serially: host time is already in fixed_s

    def decode_step_s(self, num_seqs: int) -> Callable[[int], float]:
        return lambda kv_tokens: self.time_s(
            BatchShape(num_decode_seqs=num_seqs, decode_kv_tokens=kv_tokens, num_sampled=num_seqs)
        )

    def decode_run_s(self, num_seqs: int, kv_tokens: int, steps: int) -> NDArray[np.float64]:
        kv = kv_tokens + num_seqs * np.arange(steps, dtype=np.float64)
        result: NDArray[np.float64] = self.fixed_s + self._decode_s * num_seqs + self.per_kv_token_s * kv
        return result
