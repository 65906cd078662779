"""vLLM's --kv-transfer-config for LMCache (LMCacheConnectorV1), and LMCache's own settings under the names
LMCache gives them (lmcache/v1/config.py _CONFIG_DEFINITIONS; LMCache reads them from LMCACHE_CONFIG_FILE or
LMCACHE_* variables, not from vLLM's command line), plus the bandwidth of each tier, which LMCache has no
setting for (docs/engine-semantics.md 14).

Sizes are GB as LMCache means them: GiB (`int(max_local_cpu_size * 1024**3)`), per vLLM worker (each TP rank
runs its own LMCacheEngine with its own buffers and its own share of the disk).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ttftsim.config.base import StrictModel

# Default bandwidths, each an assumption to replace with the deployment's own figure:
# - local disk: a PCIe 4.0 NVMe drive's measured read, 2,762 MiB/s (ml-engineering storage/README.md, fio,
#   via ../shared/reference/hardware-and-workloads.md B.3); the drive's sequential spec is ~7 GB/s.
# - remote: one 100 Gb/s link (12.5 GB/s; the AWS EFA and RoCE link sizes of hardware-and-workloads.md B.3),
#   no protocol overhead counted. LMCache's lm:// and redis:// servers run over TCP, usually slower.
DISK_READ_BYTES_PER_S = 2762.0 * 2**20
REMOTE_BYTES_PER_S = 12.5e9


class KvTransferConfig(StrictModel):
    """vLLM --kv-transfer-config (vllm/config/kv_transfer.py KVTransferConfig): the connector that moves KV
    between vLLM's GPU blocks and an external store. Only LMCache's connector is modelled."""

    kv_connector: Literal["LMCacheConnectorV1"] = Field(
        description="The connector class (LMCacheConnectorV1: LMCache's CPU, local disk and remote tiers)"
    )
    kv_role: Literal["kv_both"] = Field(
        default="kv_both",
        description="kv_both: the engine stores its KV and loads what the store holds (producer/consumer roles "
        "of disaggregated prefill are not modelled here)",
    )


class LMCacheConfig(StrictModel):
    """LMCache's storage settings (LMCache names and defaults), and each tier's bandwidth."""

    chunk_size: int = Field(default=256, ge=16, le=65536, description="Tokens per stored chunk (LMCache default 256)")
    local_cpu: bool = Field(default=True, description="Keep chunks in host memory (LocalCPUBackend; default true)")
    max_local_cpu_size: float = Field(
        default=5.0, ge=0, le=65536, description="GB of host memory for chunks, per GPU worker (LMCache default 5)"
    )
    local_disk: str | None = Field(
        default=None, max_length=4096, description="Directory of the local disk tier (LocalDiskBackend; default off)"
    )
    max_local_disk_size: float = Field(
        default=0.0, ge=0, le=1048576, description="GB of local disk for chunks, per GPU worker (LMCache default 0)"
    )
    remote_url: str | None = Field(
        default=None,
        max_length=4096,
        description="A remote store (lm://host:port, redis://..., RemoteBackend; default off); one store for every "
        "replica of the cluster that names it (a chunk stored by one is found by the others)",
    )
    use_layerwise: bool = Field(
        default=False,
        description="Load and store layer by layer alongside the forward pass (LMCache default false: the whole "
        "load before it, the whole store after it); host memory only",
    )
    enable_async_loading: bool = Field(
        default=False,
        description="Prefetch a hit into host memory off the engine's steps, the request waiting aside (LMCache "
        "default false: the whole load in the step that admits it)",
    )
    lookup_timeout_ms: int = Field(
        default=3000,
        ge=1,
        le=3_600_000,
        description="With enable_async_loading: a prefetch still running after this long gives no hit and the "
        "prompt is recomputed (LMCache default 3000)",
    )
    max_remote_size: float | None = Field(
        default=None,
        gt=0,
        le=1048576,
        description="ttftsim's, not LMCache's: GB the remote store keeps per GPU worker rank, for all the replicas "
        "that share it (null: no limit; the server evicts on its own terms)",
    )
    local_cpu_bytes_per_s: float | None = Field(
        default=None,
        gt=0,
        description="Host memory <-> GPU copy per GPU, bytes/s (null: the hardware profile's host-to-device "
        "bandwidth, PCIe)",
    )
    local_disk_read_bytes_per_s: float = Field(
        default=DISK_READ_BYTES_PER_S,
        gt=0,
        description="Local disk read into host memory, bytes/s, one drive for all the replica's GPUs (default "
        "2,762 MiB/s: a PCIe 4.0 NVMe drive measured with fio; set yours)",
    )
    remote_bytes_per_s: float = Field(
        default=REMOTE_BYTES_PER_S,
        gt=0,
        description="Remote store read into host memory, bytes/s, one link for all the replica's GPUs (default "
        "12.5e9: one 100 Gb/s link; set yours)",
    )

    @model_validator(mode="after")
    def _tiers(self) -> LMCacheConfig:
        if self.local_cpu and self.max_local_cpu_size == 0:
            raise ValueError("max_local_cpu_size is 0 with local_cpu true: the CPU tier has no capacity")
        if self.local_disk is not None and self.max_local_disk_size == 0:
            raise ValueError(
                f"max_local_disk_size is 0 with local_disk {self.local_disk}: the disk tier has no capacity"
            )
        if self.local_disk is None and self.max_local_disk_size > 0:
            raise ValueError(f"max_local_disk_size {self.max_local_disk_size} without local_disk (no disk tier)")
        if self.max_remote_size is not None and self.remote_url is None:
            raise ValueError("max_remote_size without remote_url (no remote tier)")
        if self.use_layerwise and (self.local_disk is not None or self.remote_url is not None or not self.local_cpu):
            raise ValueError(
                "use_layerwise with a disk or remote tier is not modelled (LMCache's layerwise retrieval reads host "
                "memory: StorageManager.layerwise_batched_get)"
            )
        if self.use_layerwise and self.enable_async_loading:
            raise ValueError("use_layerwise with enable_async_loading: LMCache does not combine them yet")
        if not self.local_cpu and self.local_disk is None and self.remote_url is None:
            raise ValueError("no tier: local_cpu is false and neither local_disk nor remote_url is set")
        return self

    def capacity_problem(self, chunk_bytes_per_gpu: int) -> tuple[str, str] | None:
        """(field, message) when a tier cannot hold one chunk of this deployment's KV."""
        sizes = {"max_local_cpu_size": self.max_local_cpu_size if self.local_cpu else None}
        sizes["max_local_disk_size"] = self.max_local_disk_size if self.local_disk is not None else None
        sizes["max_remote_size"] = self.max_remote_size
        for name, size in sizes.items():
            if size is not None and size * 2**30 < chunk_bytes_per_gpu:
                return name, (
                    f"{size} GB holds no chunk: one chunk of {self.chunk_size} tokens is {chunk_bytes_per_gpu:,} "
                    "bytes per GPU"
                )
        return None
