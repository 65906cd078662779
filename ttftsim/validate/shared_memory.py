"""/dev/shm for a replica of several GPUs in one pod: NCCL keeps its buffers between the pod's GPUs there. Without an
in-memory volume mounted at /dev/shm the container runtime gives 64 MB, and NCCL falls back or fails; an emptyDir
there whose `sizeLimit` is below those 64 MB is no better (NCCL's shared-memory transport runs out of it). How much
NCCL needs beyond that depends on its channels and buffer sizes, which are not modelled: only a limit below the
default is judged."""

from __future__ import annotations

from typing import Any

from ttftsim.validate.api_server_rules import quantity_value
from ttftsim.validate.manifests import ServingWorkload
from ttftsim.validate.report import Report

SHM_PATH = "/dev/shm"
RUNTIME_DEFAULT_BYTES = 64 * 2**20  # the container runtime's /dev/shm (Docker's and containerd's 64 MiB)


def check_shared_memory(report: Report, serving: ServingWorkload, gpus: int, where: str) -> None:
    """A warning where a replica of `gpus` > 1 GPUs has no in-memory /dev/shm, or one below the runtime's default."""
    if gpus <= 1:
        return
    mounted = _shm_volume(serving)
    if mounted is None:
        report.add(
            "warning",
            "shared-memory",
            f"{where}: {gpus} GPUs a replica (tensor x pipeline x data parallel) without an in-memory /dev/shm "
            "volume; NCCL falls back or fails with the 64 MB default",
            "mount an emptyDir with medium: Memory at /dev/shm",
        )
        return
    limit = (mounted.get("emptyDir") or {}).get("sizeLimit") if isinstance(mounted.get("emptyDir"), dict) else None
    limit_bytes = quantity_value(limit) if limit is not None else None
    if limit_bytes is not None and limit_bytes < RUNTIME_DEFAULT_BYTES:
        report.add(
            "warning",
            "shared-memory",
            f"{where}: {gpus} GPUs a replica (tensor x pipeline x data parallel) with a /dev/shm emptyDir of "
            f"sizeLimit {limit}, below the 64 MB default; NCCL falls back or fails",
            "raise the /dev/shm emptyDir's sizeLimit (ttftsim plan's manifests give 16Gi for several GPUs a pod)",
        )


def _shm_volume(serving: ServingWorkload) -> dict[str, Any] | None:
    """The pod volume the vLLM container mounts at /dev/shm (an empty mapping where the pod does not define it)."""
    mounts = serving.container.get("volumeMounts") or []
    names = [m.get("name") for m in mounts if str(m.get("mountPath", "")).rstrip("/") == SHM_PATH]
    if not names:
        return None
    volumes = [v for v in serving.pod_spec.get("volumes") or [] if isinstance(v, dict)]
    return next((v for v in volumes if v.get("name") == names[0]), {})
