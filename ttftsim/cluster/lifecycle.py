"""Pods from creation to their end: binding (or Pending, with a provisioner asked for nodes), the cold
start (coldstart.py's phases, timed on the node's caches), readiness, the warm pool, scale-down with
draining, and termination (serving-semantics.md parts 1 and 4).

Lifecycle of a serving pod: Pending (no node passes the filters: a provisioner adds one) -> bound to a
node -> cold start phases -> Ready (routable) -> Draining when scaled down (no new requests; terminated
when idle or after terminationGracePeriodSeconds) -> Terminated; or Failed (its node or itself fails) or
CrashLoop (the model does not fit the node's accelerator). The Deployment controller keeps the replica
count: a failed pod is replaced by a new one (faults.py). Scale-down removes pending pods first, then
crash-looping and starting ones, then ready ones doubled up on a node, then the most recently ready
(the ReplicaSet ranking, or a pod-deletion-cost controller: scale_down.py). A warm pool keeps
idle loaded pods that a scale-up promotes at once, then refills. Not modelled: liveness probes and
restarts with back-off, PodDisruptionBudgets, preemption by priority.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import simpy

from ttftsim.cluster.coldstart import NodeCaches, cold_start_phases
from ttftsim.cluster.gangs import member_gang, missing_members, place_members
from ttftsim.cluster.gateway import Gateway
from ttftsim.cluster.interference import shared_costs
from ttftsim.cluster.placement import Binder, Node
from ttftsim.cluster.pod import Pod, ReplicaBuild
from ttftsim.cluster.provisioner import Provisioner
from ttftsim.cluster.scale_down import make_ranking
from ttftsim.config.cluster import Cluster
from ttftsim.config.cluster_autoscaling import ReplicaSetScaleDown
from ttftsim.engine.recorder import Recorder
from ttftsim.engine.state import RequestState
from ttftsim.hardware.catalog import load_hardware

SCHEDULER_RETRY_S = 10.0  # podMaxBackoffSeconds: pending pods are retried at least this often
CPU_HARDWARE = "CPU-host"  # the profile a GPU-less pod on a GPU node runs at


@dataclass(frozen=True)
class Recorders:
    serving: Recorder  # client requests and the serving pods' iterations
    prefill: Recorder  # prefill pods' iterations, never client requests


class PodLifecycle:
    """Owns the pods (indices in creation order) and the desired serving replica count. Invariant: a
    pod holds node resources exactly while it is starting, ready, draining or crash-looping, or (without
    a gang scheduler) while it is pending with part of its group's member pods bound."""

    def __init__(
        self,
        env: simpy.Environment,
        spec: Cluster,
        builds: Callable[[str], ReplicaBuild],
        provisioner: Provisioner,
        binder: Binder,
        gateway: Gateway,
        recorders: Recorders,
        on_first_token: Callable[[RequestState], None],
    ) -> None:
        self.env, self.spec, self.builds = env, spec, builds
        scaling = spec.autoscaling
        self.ranking = make_ranking(scaling.scale_down_ranking if scaling else ReplicaSetScaleDown())
        self.provisioner, self.binder, self.gateway = provisioner, binder, gateway
        self.recorders, self.on_first_token = recorders, on_first_token
        self.pods: list[Pod] = []
        self.members = None if spec.pod.gang_scheduling else member_gang(binder)  # member pods bound one by one
        bounds = spec.autoscaling
        self.desired = min(max(spec.replicas, bounds.min_replicas), bounds.max_replicas) if bounds else spec.replicas

    def start(self) -> None:
        """The deployment at time 0: its serving pods, the warm pool, the prefill pods (Ready at once on
        the initial nodes when it starts warm, else cold-starting or Pending)."""
        warm = self.spec.start_warm
        each_now = self.members is None or warm  # a running deployment is placed; a new one's leaders go first
        for _ in range(self.desired):
            self.new_pod("serving", warm_start=warm, schedule=each_now)
        for _ in range(self.spec.warm_pool):
            self.new_pod("warm", warm_start=warm, schedule=each_now)
        if self.spec.disaggregation is not None:
            for _ in range(self.spec.disaggregation.prefill_replicas):
                self.new_pod("prefill", warm_start=warm, schedule=each_now)
        if not each_now:
            self.schedule_pending()

    def serving(self) -> list[Pod]:
        return [p for p in self.pods if p.role == "serving" and p.live]

    def new_pod(self, role: str, warm_start: bool = False, schedule: bool = True) -> Pod:
        """A new pod: Ready at once when warm_start finds a node, else bound and cold-starting, or Pending
        (left to the caller's next schedule_pending when `schedule` is false)."""
        pod = Pod(len(self.pods), role, self.env.now)
        self.pods.append(pod)
        if warm_start and self._bind(pod, cold=False):
            return pod
        if schedule:
            self.schedule_pending()
        return pod

    # ---- binding ----

    def schedule_pending(self) -> None:
        """Bind the pending pods that a node takes now; ask the provisioner for nodes for the rest."""
        pending = [p for p in self.pods if p.state == "pending"]
        if self.members is not None:
            self._schedule_members(pending)
            return
        unplaced = [p for p in pending if not self._bind(p)]
        if unplaced:
            for pod in unplaced:
                pod.waited_for_node = True
            self.provisioner.provision(len(unplaced))

    def _schedule_members(self, pending: list[Pod]) -> None:
        """Without a gang scheduler: bind member pods one by one (gangs.py); a group holding all its nodes
        starts; the provisioner gets a node per member pod still without one."""
        assert self.members is not None
        place_members(self.binder, pending, self.provisioner.nodes, self.members)
        unplaced = []
        for pod in pending:
            if len(pod.nodes) == self.members.num_nodes:
                self._bound(pod, pod.nodes, cold=True)
            else:
                pod.waited_for_node = True
                unplaced.append(pod)
        if unplaced:
            self.provisioner.provision_members(missing_members(unplaced, self.members), self.members)

    def retry_loop(self) -> Generator[simpy.Event, Any, None]:
        """kube-scheduler retries pending pods at least every SCHEDULER_RETRY_S."""
        while True:
            yield self.env.timeout(SCHEDULER_RETRY_S)
            if any(p.state == "pending" for p in self.pods):
                self.schedule_pending()

    def _bind(self, pod: Pod, cold: bool = True) -> bool:
        nodes = self.binder.pick(self._allowed(pod))
        if nodes is None:
            return False
        self.binder.bind(pod.index, nodes)
        self._bound(pod, nodes, cold)
        return True

    def _allowed(self, pod: Pod) -> list[Node]:
        """The nodes the pod may land on: all, but the one a controller moves it away from."""
        return [n for n in self.provisioner.nodes if n.index != pod.avoid_node]

    def _bound(self, pod: Pod, nodes: list[Node], cold: bool) -> None:
        """The pod holds all its nodes now: it cold-starts, or (a running deployment at time 0) is Ready."""
        pod.node, pod.workers, pod.bound_s, pod.state = nodes[0], nodes[1:], self.env.now, "starting"
        if pod.waited_for_node:
            pod.phases.append(("pending", pod.created_s, self.env.now))
        if cold:
            pod.process = self.env.process(self._cold_start(pod))
        else:
            node = nodes[0]
            node.image_cached = node.compile_cached = True
            node.weights_cached = self._page_cacheable()
            self._become_ready(pod)

    # ---- cold start and readiness ----

    def _cold_start(self, pod: Pod) -> Generator[simpy.Event, Any, None]:
        """The phases in order on the leader's node, each leaving its cache there (image, weights in the
        page cache when they fit in half its memory, compile cache); a build that cannot start crash-loops
        after the weight load."""
        node = pod.node
        assert node is not None
        build = self.builds(self._hardware_for(node))
        caches = NodeCaches(node.image_cached, node.weights_cached, node.compile_cached)
        phases = cold_start_phases(self.spec.pod, build.weight_bytes, build.tp, caches, build.compiled, build.graphs)
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
        """Start the pod's engine (its costs shared with co-located pods if they interfere); a serving or
        prefill pod takes requests at once, held ones first."""
        node = pod.node
        assert node is not None
        build = self.builds(self._hardware_for(node))
        if build.make is None:
            pod.state, pod.end_reason = "crashloop", build.error
            return
        wrap = shared_costs(pod, self.pods, self.spec.interference)
        prefill = pod.role == "prefill"
        recorder = self.recorders.prefill if prefill else self.recorders.serving
        pod.engine = build.make(self.env, recorder, pod.index, wrap)
        pod.engine.on_end = self.gateway.on_prefill_end if prefill else self.gateway.on_end
        if not prefill:
            pod.engine.on_first_token = self.on_first_token
        pod.kv_bytes_per_token, pod.weight_bytes = build.kv_bytes_per_token, build.weight_bytes
        pod.state, pod.ready_s = "ready", self.env.now
        if pod.role != "warm":
            self.gateway.refresh(self.pods)
            self.gateway.drain()

    def _hardware_for(self, node: Node) -> str:
        """What the engine runs on: the node's accelerators, or its CPUs for a pod that requests no GPU (a
        container without an nvidia.com/gpu request sees no GPU, even on a GPU node)."""
        if self.binder.shape.gpus > 0:
            return node.pool.hardware
        return node.pool.hardware if load_hardware(node.pool.hardware).kind == "cpu" else CPU_HARDWARE

    def _page_cacheable(self) -> bool:
        """Weights read from files stay in the node's page cache; streamed from an object store they do not."""
        return self.spec.pod.weights_source != "object_store"

    # ---- scaling and the end of a pod ----

    def scale_to(self, desired: int) -> list[Pod]:
        """The ReplicaSet: promote ready warm pods (refilling the pool) or add pods up to `desired`; remove
        the lowest-ranked pods down to it. Returns the pods added to the serving ones (promoted or new)."""
        self.desired = desired
        current = self.serving()
        each_now = self.members is None  # without a gang scheduler, the new groups' leaders queue first
        added = []
        for _ in range(desired - len(current)):
            warm = next((p for p in self.pods if p.role == "warm" and p.state == "ready"), None)
            if warm is not None:
                warm.role = "serving"
                self.gateway.refresh(self.pods)
                self.gateway.drain()
                self.new_pod("warm", schedule=each_now)
                added.append(warm)
            else:
                self.new_pod("serving", schedule=each_now)
                added.append(self.pods[-1])
        if not each_now and desired > len(current):
            self.schedule_pending()
        if desired < len(current):
            for pod in self.ranking.order(current, self.env.now)[: len(current) - desired]:
                self._scale_down(pod)
        return added

    def move_away(self, pod: Pod) -> Pod:
        """Start a new serving pod on any node but `pod`'s (the old one keeps serving until `retire`)."""
        new = Pod(len(self.pods), "serving", self.env.now, avoid_node=pod.node.index if pod.node else None)
        self.pods.append(new)
        self.schedule_pending()
        return new

    def retire(self, pod: Pod) -> None:
        """Remove one chosen serving pod (drained as a scale-down drains it), the replica count unchanged."""
        self._scale_down(pod)

    def _scale_down(self, pod: Pod) -> None:
        if pod.state != "ready":
            self.terminate(pod, "scaled down")
            return
        pod.state = "draining"
        self.gateway.refresh(self.pods)
        if pod.outstanding == 0:
            self.terminate(pod, "scaled down")
        else:
            self.env.process(self._grace(pod))

    def _grace(self, pod: Pod) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(self.spec.pod.termination_grace_s)
        if pod.state == "draining":
            self.terminate(pod, "scaled down (grace period over)")

    def drained(self, pod: Pod) -> None:
        """A draining pod's last request left: it terminates once the engine's step is over."""
        self.env.process(self._terminate_soon(pod))

    def _terminate_soon(self, pod: Pod) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(0)
        if pod.state == "draining":
            self.terminate(pod, "scaled down")

    def terminate(self, pod: Pod, reason: str, state: str = "terminated") -> None:
        """End the pod: stop its cold start, fail its engine's requests to the gateway (retried or failed
        there), free its nodes, and give pending pods the room."""
        if pod.process is not None and pod.process.is_alive:
            pod.process.interrupt()
        lost = pod.engine.fail_all() if pod.engine is not None else []
        pod.state, pod.ended_s, pod.end_reason = state, self.env.now, reason
        self.binder.release(pod.index, pod.nodes, self.env.now)
        self.gateway.pod_gone(pod, self.pods, lost, reason)
        self.schedule_pending()

    def stuck(self) -> bool:
        """Nothing can ever serve what is left: no serving pod (or, disaggregated, no prefill pod) running
        or starting, and no node on its way."""
        if self.provisioner.is_provisioning:
            return False
        roles = ("serving", "prefill") if self.spec.disaggregation is not None else ("serving",)
        return any(
            not any(p.role == role and p.state in ("starting", "ready", "draining") for p in self.pods)
            for role in roles
        )
