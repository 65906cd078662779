"""The vLLM container's CPU limit against the processes vLLM runs in its pod. vLLM V1 runs an API server process,
an engine core process a data-parallel rank (its scheduler's busy loop), and, where a rank spans several GPUs
(tensor x pipeline parallel > 1: the multiprocessing executor), a worker process a GPU; at one GPU a rank the
worker runs inside the engine core (the `uni` executor). vLLM asks for a core a process (vllm-project/vllm
docs/design/arch_overview.md "V1 Process Architecture", docs/configuration/optimization.md "CPU Resources for GPU
Deployments"; vllm/config/parallel.py @ 00193b8: world_size = TP x PP workers, `uni` at world size 1). A limit
below that is a CFS quota they exhaust every period: the kernel throttles them and TTFT grows beyond the
prediction, which gives each a core.

A lower bound: more API servers (--api-server-count, by default one a data-parallel rank since vLLM 0.15), the
DP coordinator, and a worker a GPU at one GPU a rank with data parallelism (newer vLLMs) are not counted. Only a
limit is judged: a request alone throttles nothing. A warning, not an error: how much a starved pod slows is not
modelled. A pod-level `resources` (Kubernetes' PodLevelResources) is not read."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ttftsim.config.engine import EngineArgs
from ttftsim.inputs.files import counted
from ttftsim.validate.api_server_rules import quantity_value
from ttftsim.validate.manifests import ServingWorkload
from ttftsim.validate.report import Report


@dataclass(frozen=True)
class PodProcesses:
    """vLLM's processes in the pod that runs its API server (a LeaderWorkerSet's leader): each needs a core."""

    engine_cores: int  # one a data-parallel rank in the pod
    workers: int  # one a GPU where a rank spans several (tensor x pipeline parallel > 1), else none

    @property
    def total(self) -> int:
        return 1 + self.engine_cores + self.workers  # the API server

    def describe(self) -> str:
        parts = ["1 API server", counted(self.engine_cores, "engine core")]
        return ", ".join(parts + ([counted(self.workers, "GPU worker")] if self.workers else []))


def pod_processes(serving: ServingWorkload, engine: EngineArgs) -> PodProcesses:
    """The pod's share of the replica: its data-parallel ranks and GPUs spread evenly over the group's pods."""
    pods = max(1, serving.group_size)
    per_rank = engine.tensor_parallel_size * engine.pipeline_parallel_size
    ranks = max(1, engine.data_parallel_size // pods)
    return PodProcesses(ranks, per_rank * engine.data_parallel_size // pods if per_rank > 1 else 0)


def check_cpu_limit(report: Report, serving: ServingWorkload, engine: EngineArgs, where: str) -> None:
    """A warning where the vLLM container's resources.limits.cpu is below the processes vLLM runs in its pod."""
    resources = serving.container.get("resources")
    limits = resources.get("limits") if isinstance(resources, dict) else None
    limit = limits.get("cpu") if isinstance(limits, dict) else None
    cpus = quantity_value(limit) if limit is not None else None
    processes = pod_processes(serving, engine)
    if cpus is None or cpus == 0 or cpus >= processes.total:  # 0: the kubelet sets no quota (milliCPUToQuota)
        return
    report.add(
        "warning",
        "requests-limits",
        f"{where}: CPU limit {_limit(limit, cpus)} is below the {processes.total} vLLM processes of the pod "
        f"({processes.describe()}), each busy on a core: the kernel throttles them (CFS quota) and TTFT grows "
        "beyond the prediction, which gives each a core",
        f"set resources.limits.cpu to at least {processes.total} (a core a vLLM process; vLLM's docs advise more), "
        "or remove the CPU limit (a request alone throttles nothing)",
    )


def _limit(written: object, cpus: Fraction) -> str:
    """The limit as written, with its CPUs where it is not written as them (500m: 0.5 CPU)."""
    value = f"{float(cpus):g}"
    return value if str(written).strip() == value else f"{written} ({value} CPU)"
