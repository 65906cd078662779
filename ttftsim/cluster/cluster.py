"""The cluster as SimPy processes: nodes and their provisioning, pods and their cold starts, the
gateway's router, the HPA on scraped vLLM metrics, faults with retries, and what it all costs.

Lifecycle of a serving pod: Pending (no node passes the filters: a provisioner adds one) -> bound to a
node -> cold start phases (coldstart.py) -> Ready (routable) -> Draining when scaled down (no new
requests; terminated when idle or after terminationGracePeriodSeconds) -> Terminated; or Failed (its
node or itself fails) or CrashLoop (the model does not fit the node's accelerator). The Deployment
controller keeps the replica count: a failed pod is replaced by a new one. Scale-down removes pending
pods first, then starting ones, then the most recently ready (ReplicaSet ranking). A warm pool keeps idle
loaded pods that a scale-up promotes at once, then refills.

Every request is accounted for: routed to a ready replica (or held at the gateway while none is ready),
then finished, rejected, aborted by its client, failed (its replica was lost and the retry policy gave up,
reason given) or in flight at the horizon; requests of a lost replica are retried elsewhere with their
original arrival time, so the lost time counts in their TTFT.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import simpy
from numpy.typing import NDArray

from ttftsim.cluster.coldstart import NodeCaches, cold_start_phases
from ttftsim.cluster.hpa import ExternalMetricInput, Hpa, MetricInput, PodsMetricInput
from ttftsim.cluster.metrics import TTFT_BUCKETS, histogram_quantile
from ttftsim.cluster.placement import Node, could_ever_fit, pick_node, unschedulable_reason
from ttftsim.cluster.routing import make_router
from ttftsim.config.cluster import Cluster, NodePool
from ttftsim.engine.engine import Engine
from ttftsim.engine.recorder import Recorder
from ttftsim.engine.state import RequestState
from ttftsim.hardware.catalog import load_hardware
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.linear import StepCostModel
from ttftsim.workload.request import Request

SCHEDULER_RETRY_S = 10.0  # podMaxBackoffSeconds: pending pods are retried at least this often
CA_SCAN_S = 10.0  # Cluster Autoscaler --scan-interval
KARPENTER_BATCH_S = 1.0  # BATCH_IDLE_DURATION
NODE_CHECK_S = 10.0
CPU_HARDWARE = "CPU-host"  # the profile a GPU-less pod on a GPU node runs at


@dataclass
class Pod:
    index: int
    role: str  # serving (decode pods when disaggregated) | warm | prefill
    created_s: float
    state: str = "pending"  # pending, starting, ready, draining, terminated, failed, crashloop
    node: Node | None = None  # the leader's node
    workers: list[Node] = field(default_factory=list)  # the other nodes of a multi-node (LeaderWorkerSet) pod
    engine: Engine | None = None
    outstanding: int = 0
    bound_s: float = math.nan
    ready_s: float = math.nan
    ended_s: float = math.nan
    end_reason: str = ""
    phases: list[tuple[str, float, float]] = field(default_factory=list)
    process: simpy.Process | None = None
    waited_for_node: bool = False

    @property
    def live(self) -> bool:
        return self.state in ("pending", "starting", "ready", "crashloop")


class SharedCost:
    """A pod's step costs scaled by how many co-located pods are busy when an iteration (or a closed-form
    decode run) starts; see config.cluster.Interference."""

    def __init__(self, inner: StepCostModel, factor: Callable[[], float]) -> None:
        self.inner, self.factor = inner, factor

    def time_s(self, shape: BatchShape) -> float:
        return self.inner.time_s(shape) * self.factor()

    def idle_start_s(self, shape: BatchShape) -> float:
        return self.inner.idle_start_s(shape) * self.factor()

    def decode_step_s(self, num_seqs: int) -> Callable[[int], float]:
        inner, factor = self.inner.decode_step_s(num_seqs), self.factor()  # fixed when the run starts
        return lambda kv_tokens: inner(kv_tokens) * factor

    def decode_run_s(self, num_seqs: int, kv_tokens: int, steps: int) -> NDArray[np.float64]:
        scaled: NDArray[np.float64] = self.inner.decode_run_s(num_seqs, kv_tokens, steps) * self.factor()
        return scaled


Wrap = Callable[[StepCostModel], StepCostModel]


@dataclass(frozen=True)
class ReplicaBuild:
    """What a pod on a node of some hardware runs: the engine's pieces, or why it cannot start."""

    make: Callable[[simpy.Environment, Recorder, int, Wrap | None], Engine] | None
    weight_bytes: float
    tp: int
    enforce_eager: bool
    error: str = ""
    kv_bytes_per_token: float = 0.0  # the whole model's (all TP shards), for KV transfers


@dataclass
class ClusterLog:
    pods: list[dict[str, Any]] = field(default_factory=list)
    series: list[dict[str, float]] = field(default_factory=list)
    hpa: list[dict[str, float]] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    pending_reasons: list[str] = field(default_factory=list)  # at the end, for pods still pending


class ClusterSim:
    def __init__(
        self,
        env: simpy.Environment,
        spec: Cluster,
        builds: Callable[[str], ReplicaBuild],
        recorder: Recorder,
        rng: np.random.Generator,
        window_s: float,
        tp: int,
        client_timeout_s: float | None = None,
    ) -> None:
        self.gpus_per_pod = spec.pod.gpus if spec.pod.gpus is not None else tp
        self.env, self.spec, self.builds, self.recorder, self.rng = env, spec, builds, recorder, rng
        self.client_timeout_s = client_timeout_s
        self.nodes: list[Node] = []
        self.pods: list[Pod] = []
        self.router = make_router(spec.router, rng)
        self.hpa = Hpa(spec.autoscaling) if spec.autoscaling else None
        bounds = spec.autoscaling
        self.desired = min(max(spec.replicas, bounds.min_replicas), bounds.max_replicas) if bounds else spec.replicas
        self.log = ClusterLog()
        self.attempts: dict[int, int] = {}
        self._owner: dict[int, Pod] = {}
        self._gateway: deque[tuple[Request, simpy.Event | None]] = deque()
        self._routable: list[Pod] = []
        self._prefill_routable: list[Pod] = []
        self.prefill_router = make_router(spec.router, rng)
        self.prefill_recorder = Recorder(0.0)  # prefill pods' records: iterations, never client requests
        self._original: dict[int, tuple[Request, simpy.Event | None]] = {}  # disaggregated: the client's request
        self._prefilled: set[int] = set()
        self.prefill_done_s: dict[int, float] = {}
        self.kv_transfer_s: dict[int, float] = {}
        self._ttft_counts = np.zeros(len(TTFT_BUCKETS) + 1, dtype=np.int64)
        self._scrapes: deque[tuple[float, np.ndarray, dict[int, tuple[float, float, float]]]] = deque()
        self.window_s = window_s
        self._start()

    # ---- set-up ----

    def _start(self) -> None:
        for pool in self.spec.node_pools:
            for _ in range(pool.initial_nodes):
                node = self._new_node(pool)
                node.state, node.ready_s = "ready", 0.0
                node.image_cached = node.image_cached or self.spec.start_warm
        for _ in range(self.desired):
            self._new_pod("serving", warm_start=self.spec.start_warm)
        for _ in range(self.spec.warm_pool):
            self._new_pod("warm", warm_start=self.spec.start_warm)
        if self.spec.disaggregation is not None:
            for _ in range(self.spec.disaggregation.prefill_replicas):
                self._new_pod("prefill", warm_start=self.spec.start_warm)
        env = self.env
        env.process(self._scheduler_loop())
        env.process(self._node_loop())
        env.process(self._sampler())
        if self.hpa is not None:
            env.process(self._scraper())
            env.process(self._hpa_loop())
        for fault in self.spec.faults:
            env.process(self._fault(fault.at_s, fault.kind, fault.index))

    def _new_node(self, pool: NodePool) -> Node:
        node = Node(
            len(self.nodes), pool, _gpus_per_node(pool), requested_s=self.env.now, image_cached=pool.images_cached
        )
        node.slots_per_gpu = self.spec.interference.pods_per_gpu
        self.nodes.append(node)
        return node

    def _hardware_for(self, node: Node) -> str:
        """What the engine runs on: the node's accelerators, or its CPUs for a pod that requests no GPU (a
        container without an nvidia.com/gpu request sees no GPU, even on a GPU node)."""
        if self.gpus_per_pod > 0:
            return node.pool.hardware
        return node.pool.hardware if load_hardware(node.pool.hardware).kind == "cpu" else CPU_HARDWARE

    def _new_pod(self, role: str, warm_start: bool = False) -> Pod:
        pod = Pod(len(self.pods), role, self.env.now)
        self.pods.append(pod)
        if warm_start and self._bind_now(pod, cold=False):
            return pod
        self._schedule_pending()
        return pod

    # ---- placement and node provisioning ----

    def _group(self, per_node: int) -> tuple[int, int]:
        """(nodes, GPUs on each) of one pod on nodes of per_node GPUs: a TP group larger than a node
        spans ceil(gpus / per_node) nodes, gang-scheduled (LeaderWorkerSet)."""
        gpus = self.gpus_per_pod
        if gpus <= per_node * self.spec.interference.pods_per_gpu or per_node == 0:
            return 1, gpus
        size = math.ceil(gpus / per_node)
        return size, math.ceil(gpus / size)

    def _pick_nodes(self) -> list[Node] | None:
        """The node, or all the nodes of a multi-node pod (all or nothing), kube-scheduler would bind."""
        single = pick_node(self.nodes, self.spec.pod, self.gpus_per_pod, self.rng)
        if single is not None:
            return [single]
        for pool in self.spec.node_pools:
            members = [n for n in self.nodes if n.pool is pool and n.state == "ready"]
            if not members:
                continue
            size, share = self._group(members[0].gpus)
            if size == 1:
                continue
            chosen: list[Node] = []
            for _ in range(size):
                node = pick_node([n for n in members if n not in chosen], self.spec.pod, share, self.rng)
                if node is None:
                    break
                chosen.append(node)
            if len(chosen) == size:
                return chosen
        return None

    def _bind_now(self, pod: Pod, cold: bool = True) -> bool:
        nodes = self._pick_nodes()
        if nodes is None:
            return False
        share = self._group(nodes[0].gpus)[1] if len(nodes) > 1 else self.gpus_per_pod
        pod.node, pod.workers, pod.bound_s, pod.state = nodes[0], nodes[1:], self.env.now, "starting"
        for node in nodes:
            node.pods.append(pod.index)
            node.take_gpu(pod.index, share)
            node.used_cpus += self.spec.pod.cpus
            node.used_memory_gib += self.spec.pod.memory_gib
        node = nodes[0]
        if pod.waited_for_node:
            pod.phases.append(("pending", pod.created_s, self.env.now))
        if cold:
            pod.process = self.env.process(self._cold_start(pod))
        else:
            node.image_cached = node.compile_cached = True
            node.weights_cached = self._page_cacheable()
            self._become_ready(pod)
        return True

    def _schedule_pending(self) -> None:
        pending = [p for p in self.pods if p.state == "pending"]
        unplaced = [p for p in pending if not self._bind_now(p)]
        if unplaced:
            self._provision(unplaced)

    def _provision(self, unplaced: list[Pod]) -> None:
        """Nodes for pods no ready node takes: count capacity already on its way, then add nodes."""
        incoming = [n for n in self.nodes if n.state == "provisioning"]
        room = sum(self._pods_fitting(n) for n in incoming)  # pods (fractions for multi-node pods)
        for pod in unplaced:
            pod.waited_for_node = True
            if room >= 1 - 1e-9:
                room -= 1
                continue
            for pool in self.spec.node_pools:
                per_node = _gpus_per_node(pool)
                size, share = self._group(per_node)
                count = sum(1 for n in self.nodes if n.pool is pool and n.state in ("provisioning", "ready"))
                if count + size <= pool.max_nodes and could_ever_fit(pool, self.spec.pod, share, per_node):
                    for _ in range(size):
                        node = self._new_node(pool)
                        self.env.process(self._provision_node(node))
                        room += self._pods_fitting(node)
                    room -= 1
                    break

    def _pods_fitting(self, node: Node) -> float:
        pod = self.spec.pod
        size, gpus = self._group(node.gpus)
        if size > 1:
            return 1.0 / size
        by_gpu = node.gpus * node.slots_per_gpu // gpus if gpus else 1 << 20
        by_cpu = int(node.pool.cpus // pod.cpus)
        by_mem = int(node.pool.memory_gib // pod.memory_gib)
        limit = min(by_gpu, by_cpu, by_mem)
        return min(limit, pod.max_per_node) if pod.max_per_node is not None else limit

    def _provision_node(self, node: Node) -> Generator[simpy.Event, Any, None]:
        now = self.env.now
        batch = KARPENTER_BATCH_S if node.pool.provisioner == "karpenter" else CA_SCAN_S - now % CA_SCAN_S
        yield self.env.timeout(batch + node.pool.provision_s)
        if node.state != "provisioning":
            return
        node.state, node.ready_s, node.empty_since_s = "ready", self.env.now, self.env.now
        self._schedule_pending()

    def _scheduler_loop(self) -> Generator[simpy.Event, Any, None]:
        while True:
            yield self.env.timeout(SCHEDULER_RETRY_S)
            if any(p.state == "pending" for p in self.pods):
                self._schedule_pending()

    def _node_loop(self) -> Generator[simpy.Event, Any, None]:
        """Remove nodes empty for scale_down_unneeded_s, down to each pool's min_nodes."""
        while True:
            yield self.env.timeout(NODE_CHECK_S)
            now = self.env.now
            for node in self.nodes:
                if node.state != "ready" or node.pods:
                    continue
                alive = sum(1 for n in self.nodes if n.pool is node.pool and n.state in ("ready", "provisioning"))
                if alive > node.pool.min_nodes and now - node.empty_since_s >= node.pool.scale_down_unneeded_s:
                    node.state, node.ended_s = "removed", now

    # ---- cold start ----

    def _cold_start(self, pod: Pod) -> Generator[simpy.Event, Any, None]:
        node = pod.node
        assert node is not None
        build = self.builds(self._hardware_for(node))
        caches = NodeCaches(node.image_cached, node.weights_cached, node.compile_cached)
        phases = cold_start_phases(self.spec.pod, build.weight_bytes, build.tp, caches, build.enforce_eager)
        try:
            for name, seconds in phases:
                start = self.env.now
                if seconds:
                    yield self.env.timeout(seconds)
                pod.phases.append((name, start, self.env.now))
                if name == "image_pull":
                    node.image_cached = True
                elif name == "weight_load":
                    if build.make is None:
                        pod.state, pod.end_reason = "crashloop", build.error
                        return
                    fits = build.weight_bytes <= node.pool.memory_gib * 2**30 / 2
                    node.weights_cached = node.weights_cached or (fits and self._page_cacheable())
                elif name == "compile":
                    node.compile_cached = True
        except simpy.Interrupt:
            return
        self._become_ready(pod)

    def _become_ready(self, pod: Pod) -> None:
        node = pod.node
        assert node is not None
        build = self.builds(self._hardware_for(node))
        if build.make is None:
            pod.state, pod.end_reason = "crashloop", build.error
            return
        shared = self.spec.interference.pods_per_gpu > 1 or self.spec.interference.node_penalty > 0
        wrap: Wrap | None = (lambda cost: SharedCost(cost, lambda: self._slowdown(pod))) if shared else None
        prefill = pod.role == "prefill"
        pod.engine = build.make(self.env, self.prefill_recorder if prefill else self.recorder, pod.index, wrap)
        pod.engine.on_end = self._on_prefill_end if prefill else self._on_end
        if not prefill:
            pod.engine.on_first_token = self._on_first_token
        pod.state, pod.ready_s = "ready", self.env.now
        if pod.role != "warm":
            self._set_routable()
            self._drain_gateway()

    def _slowdown(self, pod: Pod) -> float:
        """1 + the co-location terms for this pod now (config.cluster.Interference)."""
        node, spec = pod.node, self.spec.interference
        if node is None:
            return 1.0
        mine = node.gpu_of.get(pod.index)
        same_gpu = other = 0
        for index in node.pods:
            engine = self.pods[index].engine
            if index == pod.index or engine is None or not engine.num_running:
                continue
            if node.gpu_of.get(index) == mine:
                same_gpu += 1
            else:
                other += 1
        sharing = same_gpu if spec.sharing == "time_slicing" else spec.mps_overlap * same_gpu
        return 1.0 + sharing + spec.node_penalty * other

    def _page_cacheable(self) -> bool:
        """Weights read from files stay in the node's page cache; streamed from an object store they do not."""
        return self.spec.pod.weights_source != "object_store"

    def _set_routable(self) -> None:
        self._routable = [p for p in self.pods if p.role == "serving" and p.state == "ready"]
        self._prefill_routable = [p for p in self.pods if p.role == "prefill" and p.state == "ready"]

    # ---- requests ----

    def _to_prefill(self, req: Request) -> bool:
        return self.spec.disaggregation is not None and req.request_id not in self._prefilled

    def route(self, req: Request, waiter: simpy.Event | None = None) -> None:
        """The gateway: pick a ready pod (a prefill pod first, when disaggregated) or hold the request."""
        prefill = self._to_prefill(req)
        pods = self._prefill_routable if prefill else self._routable
        if not pods:
            self._gateway.append((req, waiter))
            if not prefill and not self.serving() and self.hpa is not None:  # scaled to zero: activate
                self.log.hpa.append({"time_s": self.env.now, "current": 0, "ready": 0, "desired": 1})
                self.scale_to(1)
            return
        pod = (self.prefill_router if prefill else self.router).pick(pods, req, self.env.now)
        assert pod.engine is not None
        pod.outstanding += 1
        self._owner[req.request_id] = pod
        if prefill:
            self._original[req.request_id] = (req, waiter)
            pod.engine.submit(replace(req, output_tokens=1))
        else:
            pod.engine.submit(req, waiter)

    def _drain_gateway(self) -> None:
        """Route held requests whose pool now has a ready pod, in arrival order; the rest keep waiting."""
        timeout, now = self.client_timeout_s, self.env.now
        held, self._gateway = self._gateway, deque()
        for req, waiter in held:
            if timeout is not None and now - req.arrival_s > timeout:
                state = RequestState(req)
                state.waiter = waiter
                state.status, state.rejected_reason = "aborted", f"client timeout after {timeout:g} s at the gateway"
                self._record(state, -1, "aborted")
                continue
            self.route(req, waiter)

    def _on_prefill_end(self, state: RequestState, status: str) -> None:
        """A prefill pod is done with a request: send its KV to a decode pod, or end it for the client."""
        pod = self._owner.pop(state.rid, None)
        if pod is None:
            return
        pod.outstanding -= 1
        req, waiter = self._original[state.rid]
        if status == "finished":
            self.prefill_done_s[state.rid] = self.env.now
            assert pod.node is not None
            per_token = self.builds(self._hardware_for(pod.node)).kv_bytes_per_token
            self.env.process(self._transfer(req, waiter, req.prompt_tokens * per_token))
            return
        del self._original[state.rid]
        ended = RequestState(req)
        ended.waiter, ended.status, ended.rejected_reason = waiter, state.status, state.rejected_reason
        self._record(ended, pod.index, status)

    def _transfer(
        self, req: Request, waiter: simpy.Event | None, num_bytes: float
    ) -> Generator[simpy.Event, Any, None]:
        spec = self.spec.disaggregation
        assert spec is not None
        seconds = spec.transfer_s(num_bytes)
        yield self.env.timeout(seconds)
        self.kv_transfer_s[req.request_id] = seconds
        self._prefilled.add(req.request_id)
        self.route(replace(req, preloaded_tokens=max(req.prompt_tokens - 1, 0)), waiter)

    def _on_end(self, state: RequestState, status: str) -> None:
        pod = self._owner.pop(state.rid, None)
        if pod is None:
            return
        pod.outstanding -= 1
        self._original.pop(state.rid, None)
        if pod.state == "draining" and pod.outstanding == 0:  # after this step: its engine is the caller
            self.env.process(self._terminate_soon(pod))

    def _terminate_soon(self, pod: Pod) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(0)
        if pod.state == "draining":
            self._terminate(pod, "scaled down")

    def _on_first_token(self, state: RequestState) -> None:
        ttft = state.first_token_s - state.submitted_s  # vLLM's histogram: from the engine's arrival
        self._ttft_counts[int(np.searchsorted(TTFT_BUCKETS, ttft, side="left"))] += 1

    def _record(self, state: RequestState, replica: int, status: str) -> None:
        self.recorder.request(state, replica, status)
        if isinstance(state.waiter, simpy.Event) and not state.waiter.triggered:
            state.waiter.succeed(state)

    def _retry_or_fail(self, lost: list[RequestState], pod: Pod, reason: str) -> None:
        policy = self.spec.retry
        for state in lost:
            self._owner.pop(state.rid, None)
            attempts = self.attempts.get(state.rid, 1)
            started = state.first_token_s >= 0 and pod.role != "prefill"  # the client saw tokens
            waiter = state.waiter if isinstance(state.waiter, simpy.Event) else None
            req, waiter = self._original.pop(state.rid, (state.req, waiter))  # disaggregated: from the top
            self._prefilled.discard(state.rid)
            if attempts < policy.max_attempts and (not started or policy.retry_started):
                self.attempts[state.rid] = attempts + 1
                self.route(replace(req, preloaded_tokens=0), waiter)
            else:
                if pod.role == "prefill":
                    state = RequestState(req)
                    state.waiter = waiter
                state.status, state.rejected_reason = "failed", f"{reason} (attempt {attempts})"
                self._record(state, pod.index, "failed")

    # ---- scaling ----

    def serving(self) -> list[Pod]:
        return [p for p in self.pods if p.role == "serving" and p.live]

    def scale_to(self, desired: int) -> None:
        self.desired = desired
        current = self.serving()
        for _ in range(desired - len(current)):
            warm = next((p for p in self.pods if p.role == "warm" and p.state == "ready"), None)
            if warm is not None:
                warm.role = "serving"
                self._set_routable()
                self._drain_gateway()
                self._new_pod("warm")
            else:
                self._new_pod("serving")
        if desired < len(current):
            rank = {"pending": 0, "crashloop": 1, "starting": 2, "ready": 3}
            victims = sorted(current, key=lambda p: (rank[p.state], -(p.ready_s if p.ready_s == p.ready_s else 0)))
            for pod in victims[: len(current) - desired]:
                self._scale_down(pod)

    def _scale_down(self, pod: Pod) -> None:
        if pod.state != "ready":
            self._terminate(pod, "scaled down")
            return
        pod.state = "draining"
        self._set_routable()
        if pod.outstanding == 0:
            self._terminate(pod, "scaled down")
        else:
            self.env.process(self._grace(pod))

    def _grace(self, pod: Pod) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(self.spec.pod.termination_grace_s)
        if pod.state == "draining":
            self._terminate(pod, "scaled down (grace period over)")

    def _terminate(self, pod: Pod, reason: str, state: str = "terminated") -> None:
        if pod.process is not None and pod.process.is_alive:
            pod.process.interrupt()
        lost = pod.engine.fail_all() if pod.engine is not None else []
        pod.state, pod.ended_s, pod.end_reason = state, self.env.now, reason
        nodes = ([pod.node] if pod.node is not None else []) + pod.workers
        share = self._group(nodes[0].gpus)[1] if len(nodes) > 1 else self.gpus_per_pod
        for node in nodes:
            node.pods.remove(pod.index)
            node.gpu_of.pop(pod.index, None)
            node.used_gpus -= share
            node.used_cpus -= self.spec.pod.cpus
            node.used_memory_gib -= self.spec.pod.memory_gib
            if not node.pods:
                node.empty_since_s = self.env.now
        self.router.forget(pod.index)
        self._set_routable()
        if lost:
            self._retry_or_fail(lost, pod, f"replica {pod.index} {reason}")
        self._schedule_pending()

    # ---- faults ----

    def _fault(self, at_s: float, kind: str, index: int) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(at_s)
        if kind == "node":
            live_nodes = [n for n in self.nodes if n.state == "ready"]
            if index >= len(live_nodes):
                self.log.faults.append({"time_s": at_s, "kind": kind, "index": index, "effect": "no such node"})
                return
            node = live_nodes[index]
            node.state, node.ended_s = "failed", self.env.now
            victims = [self.pods[i] for i in list(node.pods)]
        else:
            live = [p for p in self.pods if p.role != "warm" and p.live]  # serving and prefill pods
            victims = live[index : index + 1]
        self.log.faults.append({"time_s": at_s, "kind": kind, "index": index, "pods": [p.index for p in victims]})
        for pod in victims:
            role = pod.role
            self._terminate(pod, f"lost in a {kind} failure", state="failed")
            self._new_pod(role)  # the ReplicaSet replaces it

    # ---- metrics: Prometheus scrapes, the HPA, time series ----

    def _scraper(self) -> Generator[simpy.Event, Any, None]:
        spec = self.spec.autoscaling
        assert spec is not None
        while True:
            gauges = {}
            for pod in self.serving():
                if pod.state == "ready" and pod.engine is not None:
                    sched = pod.engine.scheduler
                    gauges[pod.index] = (float(len(sched.waiting)), float(len(sched.running)), pod.engine.kv.usage())
            self._scrapes.append((self.env.now, self._ttft_counts.copy(), gauges))
            while self._scrapes and self._scrapes[0][0] < self.env.now - spec.rate_window_s - spec.scrape_interval_s:
                self._scrapes.popleft()
            yield self.env.timeout(spec.scrape_interval_s)

    def _metric_inputs(self) -> list[MetricInput]:
        spec = self.spec.autoscaling
        assert spec is not None
        now, latest = self.env.now, self._scrapes[-1] if self._scrapes else None
        inputs: list[MetricInput] = []
        serving = [p for p in self.serving() if p.state in ("starting", "ready", "crashloop")]
        for metric in spec.metrics:
            if metric.name == "ttft_p99_s":
                window = [s for s in self._scrapes if s[0] >= now - spec.rate_window_s]
                value = math.nan
                if len(window) >= 2:
                    value = histogram_quantile(0.99, TTFT_BUCKETS, window[-1][1] - window[0][1])
                inputs.append(ExternalMetricInput(value))
                continue
            column = {"num_requests_waiting": 0, "num_requests_running": 1, "kv_cache_usage_perc": 2}[metric.name]
            gauges = latest[2] if latest else {}
            samples = tuple(gauges[p.index][column] for p in serving if p.index in gauges)
            inputs.append(PodsMetricInput(samples, len(serving) - len(samples)))
        return inputs

    def _hpa_loop(self) -> Generator[simpy.Event, Any, None]:
        spec = self.spec.autoscaling
        assert spec is not None and self.hpa is not None
        while True:
            yield self.env.timeout(spec.sync_period_s)
            current = len(self.serving())
            ready = sum(1 for p in self.serving() if p.state == "ready")
            inputs = self._metric_inputs()
            desired = self.hpa.reconcile(self.env.now, current, ready, inputs)
            row: dict[str, float] = {"time_s": self.env.now, "current": current, "ready": ready, "desired": desired}
            for metric, value in zip(spec.metrics, inputs, strict=True):
                if isinstance(value, ExternalMetricInput):
                    row[metric.name] = value.value
                else:
                    row[metric.name] = float(np.mean(value.samples)) if value.samples else math.nan
            self.log.hpa.append(row)
            if desired != current:
                self.scale_to(desired)

    def _sampler(self) -> Generator[simpy.Event, Any, None]:
        while True:
            states = [p.state for p in self.pods if p.role == "serving"]
            self.log.series.append(
                {
                    "time_s": self.env.now,
                    "desired_replicas": float(self.desired),
                    "pods_pending": float(states.count("pending")),
                    "pods_starting": float(states.count("starting")),
                    "pods_ready": float(states.count("ready")),
                    "pods_draining": float(states.count("draining")),
                    "pods_crashloop": float(states.count("crashloop")),
                    "pods_warm": float(sum(1 for p in self.pods if p.role == "warm" and p.state == "ready")),
                    "nodes_ready": float(sum(1 for n in self.nodes if n.state == "ready")),
                    "nodes_provisioning": float(sum(1 for n in self.nodes if n.state == "provisioning")),
                    "gateway_queue": float(len(self._gateway)),
                    "outstanding": float(sum(p.outstanding for p in self.pods)),
                }
            )
            yield self.env.timeout(self.window_s)

    # ---- at the end ----

    def idle(self) -> bool:
        return not self._gateway and not self._owner

    def unschedulable(self) -> list[str]:
        """Why pods still pending can go nowhere: per pool, the filter an empty node fails, or its size cap."""
        if not any(p.state == "pending" for p in self.pods):
            return []
        reasons = []
        for pool in self.spec.node_pools:
            per_node = _gpus_per_node(pool)
            size, share = self._group(per_node)
            why = unschedulable_reason(pool, self.spec.pod, share, per_node * size)
            if not why and sum(1 for n in self.nodes if n.pool is pool and n.state == "ready") >= pool.max_nodes:
                why = f"full at max_nodes {pool.max_nodes}"
            reasons.append(f"pool {pool.name}: {why or 'room expected'}")
        return reasons

    def stuck(self) -> bool:
        """Nothing can ever serve what is left: no serving pod (or, disaggregated, no prefill pod) running
        or starting, and no node on its way."""
        if any(n.state == "provisioning" for n in self.nodes):
            return False
        roles = ("serving", "prefill") if self.spec.disaggregation is not None else ("serving",)
        return any(
            not any(p.role == role and p.state in ("starting", "ready", "draining") for p in self.pods)
            for role in roles
        )

    def close(self) -> None:
        """At the horizon: record what is still in flight (gateway queue included) and close the books."""
        end = self.env.now
        for pod in self.pods:
            if pod.engine is not None and pod.state in ("ready", "draining") and pod.role != "prefill":
                for state in pod.engine.in_flight():
                    self.recorder.request(state, pod.index, "in_flight")
        recorded = {row[0] for row in self.recorder.rows}
        for req, _ in [*self._gateway, *self._original.values()]:  # held, prefilling or in transfer
            if req.request_id not in recorded:
                recorded.add(req.request_id)
                self.recorder.request(RequestState(replace(req, preloaded_tokens=0)), -1, "in_flight")
        for pod in self.pods:
            self.log.pods.append(
                {
                    "pod": pod.index,
                    "role": pod.role,
                    "node": pod.node.index if pod.node else -1,
                    "nodes": (1 if pod.node else 0) + len(pod.workers),
                    "state": pod.state,
                    "created_s": pod.created_s,
                    "bound_s": pod.bound_s,
                    "ready_s": pod.ready_s,
                    "ended_s": pod.ended_s,
                    "end_reason": pod.end_reason,
                    **{f"{name}_s": stop - start for name, start, stop in pod.phases},
                }
            )
        for node in self.nodes:
            if node.ended_s < 0:
                node.ended_s = end
        self.log.pending_reasons = self.unschedulable()

    def cost(self) -> dict[str, float]:
        """Node-hours, GPU-hours and dollars, billed from the node's request to its removal."""
        node_hours = gpu_hours = dollars = 0.0
        for node in self.nodes:
            end = node.ended_s if node.ended_s >= 0 else self.env.now
            hours = max(0.0, end - node.requested_s) / 3600
            price = node.pool.price_per_node_hour_usd
            if price is None:
                price = node.gpus * load_hardware(node.pool.hardware).price_per_gpu_hour_usd
            node_hours += hours
            gpu_hours += hours * node.gpus
            dollars += hours * price
        return {"node_hours": node_hours, "gpu_hours": gpu_hours, "cost_usd": dollars}

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        return pd.DataFrame(self.log.pods), pd.DataFrame(self.log.series), pd.DataFrame(self.log.hpa)


def _gpus_per_node(pool: NodePool) -> int:
    """The pool's GPUs per node: its own setting, or its hardware profile's."""
    if pool.gpus_per_node is not None:
        return pool.gpus_per_node
    return load_hardware(pool.hardware).gpus_per_node
