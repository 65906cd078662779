"""How co-located pods slow each other (config.cluster.Interference): a pod's step costs scaled by
1 + sharing + node, counted when an iteration (or a closed-form decode run) starts. A model, not a
measurement: what busy neighbours cost comes from the configuration."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import numpy as np
from numpy.typing import NDArray

from ttftsim.cluster.pod import Pod, Wrap
from ttftsim.config.cluster import Interference
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.linear import PipelineCostModel, StepCostModel


class SharedCost:
    """A pod's step costs scaled by the slowdown factor read when each iteration (or decode run) starts."""

    def __init__(self, inner: StepCostModel, factor: Callable[[], float]) -> None:
        self.inner, self.factor = inner, factor

    def time_s(self, shape: BatchShape) -> float:
        return self.inner.time_s(shape) * self.factor()

    def idle_start_s(self, shape: BatchShape) -> float:
        return self.inner.idle_start_s(shape) * self.factor()

    def stage_times(self, shape: BatchShape, hidden_host: bool) -> list[float]:
        """Each pipeline stage slowed alike (the inner model must split stages: pipeline parallelism)."""
        factor = self.factor()
        return [t * factor for t in cast(PipelineCostModel, self.inner).stage_times(shape, hidden_host)]

    def transfer_times(self, shape: BatchShape) -> list[float]:
        return cast(PipelineCostModel, self.inner).transfer_times(shape)

    def decode_step_s(self, num_seqs: int) -> Callable[[int], float]:
        inner, factor = self.inner.decode_step_s(num_seqs), self.factor()  # fixed when the run starts
        return lambda kv_tokens: inner(kv_tokens) * factor

    def decode_run_s(self, num_seqs: int, kv_tokens: int, steps: int) -> NDArray[np.float64]:
        scaled: NDArray[np.float64] = self.inner.decode_run_s(num_seqs, kv_tokens, steps) * self.factor()
        return scaled


def shared_costs(pod: Pod, pods: list[Pod], spec: Interference) -> Wrap | None:
    """How the pod's engine wraps its step costs: scaled by its slowdown among `pods` (the cluster's, by
    index), or unwrapped when co-location costs nothing."""
    if not (spec.pods_per_gpu > 1 or spec.node_penalty > 0):
        return None

    def wrap(cost: StepCostModel) -> StepCostModel:
        return SharedCost(cost, lambda: slowdown(pod, pods, spec))

    return wrap


def slowdown(pod: Pod, pods: list[Pod], spec: Interference) -> float:
    """1 + the co-location terms for this pod now: busy pods on its GPU (time-slicing: each one more
    share; MPS: mps_overlap each) and node_penalty per busy pod elsewhere on its node. A pod is busy while
    it has running requests."""
    node = pod.node
    if node is None:
        return 1.0
    mine = node.gpu_of.get(pod.index)
    same_gpu = other = 0
    for index in node.pods:
        engine = pods[index].engine
        if index == pod.index or engine is None or not engine.num_running:
            continue
        if node.gpu_of.get(index) == mine:
            same_gpu += 1
        else:
            other += 1
    sharing = same_gpu if spec.sharing == "time_slicing" else spec.mps_overlap * same_gpu
    return 1.0 + sharing + spec.node_penalty * other
