"""A serving pod's record (what the lifecycle, the gateway and the books read) and what it runs.

Lifecycle states: pending (no node takes it yet) -> starting (bound, cold-starting) -> ready (routable)
-> draining (scaled down: no new requests) -> terminated; or failed (its node or itself failed) or
crashloop (the engine does not start on the node's hardware). Roles: serving (the decode pods when
disaggregated), warm (an idle loaded pod a scale-up promotes) and prefill.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import simpy

from ttftsim.cluster.placement import Node
from ttftsim.engine.data_parallel import ServingEngine
from ttftsim.engine.recorder import Recorder
from ttftsim.perf.linear import StepCostModel

LIVE_STATES = ("pending", "starting", "ready", "crashloop")

Wrap = Callable[[StepCostModel], StepCostModel]


@dataclass
class Pod:
    """One pod. Invariants: `node` and `workers` are set when it is bound and kept after it ends (for the
    books); it holds GPUs, CPU and memory there only while starting, ready, draining or crash-looping, or
    pending with part of its group bound (no gang scheduler: `node` and `workers` are the members so far);
    `engine` is set once it became ready."""

    index: int
    role: str  # serving (decode pods when disaggregated) | warm | prefill
    created_s: float
    state: str = "pending"  # pending, starting, ready, draining, terminated, failed, crashloop
    node: Node | None = None  # the leader's node
    workers: list[Node] = field(default_factory=list)  # the other nodes of a multi-node (LeaderWorkerSet) pod
    engine: ServingEngine | None = None
    outstanding: int = 0
    bound_s: float = math.nan
    ready_s: float = math.nan
    ended_s: float = math.nan
    end_reason: str = ""
    phases: list[tuple[str, float, float]] = field(default_factory=list)
    process: simpy.Process | None = None
    waited_for_node: bool = False
    kv_bytes_per_token: float = 0.0  # its model's KV bytes per token (all TP shards), for P/D transfers
    weight_bytes: float = 0.0  # its model's weights (all TP shards), read by every iteration
    avoid_node: int | None = None  # a node it must not land on (a controller moving a pod away from it)

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    @property
    def nodes(self) -> list[Node]:
        """Every node the pod holds GPUs on, the leader's first."""
        return ([self.node] if self.node is not None else []) + self.workers


@dataclass(frozen=True)
class ReplicaBuild:
    """What a pod on a node of some hardware runs: the engine's pieces, or why it cannot start."""

    make: Callable[[simpy.Environment, Recorder, int, Wrap | None], ServingEngine] | None
    weight_bytes: float
    tp: int
    compiled: bool  # torch.compile runs at start (config/graphs.py)
    graphs: bool  # CUDA graphs are captured at start
    error: str = ""
    kv_bytes_per_token: float = 0.0  # the whole model's (all TP shards), for KV transfers
    server_ttft_extra_s: float = 0.0  # the API server's hand-offs inside vLLM's TTFT window (api_server costs)
