"""Where a vLLM pod reads its weights from at a cold start, as its manifest says: the volume mounted over the
model's path (a model given as a path) or over the Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub, else
/root/.cache/huggingface/hub, the vLLM image's user being root), read as config/cluster_nodes.py's
weights_source: a persistent volume claim or a network file system is a network volume, a hostPath or local
volume the node's disk; no volume there, or an emptyDir (empty at each start), means the Hub's download. A model
path with no volume over it is left at the default (network volume). --download-dir is not read."""

from __future__ import annotations

import posixpath
from typing import Any

from ttftsim.validate.manifests import ServingWorkload

HF_HOME = "/root/.cache/huggingface"  # huggingface_hub's default under the image's root user
NETWORK = ("persistentVolumeClaim", "nfs", "csi", "cephfs", "glusterfs", "azureFile", "iscsi", "ephemeral")
NODE_DISK = ("hostPath", "local")
DEFAULT = "network_volume"  # PodSpec's default: what validate assumed before reading the manifest


def weights_source(serving: ServingWorkload) -> str:
    """The weights_source a cold start of this pod reads from (object_store: downloaded from the Hub)."""
    model = serving.model or ""
    is_path = model.startswith(("/", ".", "~"))
    path = posixpath.normpath(model) if is_path else _hub_cache(serving.container)
    volume = _volume_over(serving, path)
    if volume is None:
        return DEFAULT if is_path else "object_store"
    if any(kind in volume for kind in NETWORK):
        return "network_volume"
    if any(kind in volume for kind in NODE_DISK):
        return "local_nvme"
    if "emptyDir" in volume:  # empty at each start: a path in it was filled before (an init container), else download
        return "local_nvme" if is_path else "object_store"
    return DEFAULT


def _hub_cache(container: dict[str, Any]) -> str:
    env = {e.get("name"): e.get("value") for e in container.get("env") or [] if isinstance(e, dict)}
    cache, home = env.get("HF_HUB_CACHE"), env.get("HF_HOME")
    if isinstance(cache, str):
        return posixpath.normpath(cache)
    return posixpath.normpath(posixpath.join(home if isinstance(home, str) else HF_HOME, "hub"))


def _volume_over(serving: ServingWorkload, path: str) -> dict[str, Any] | None:
    """The pod volume mounted deepest over `path` in the vLLM container (None: none is)."""
    best, depth = None, -1
    for mount in serving.container.get("volumeMounts") or []:
        where = posixpath.normpath(str(mount.get("mountPath", "")))
        inside = path == where or path.startswith(where.rstrip("/") + "/")
        if inside and len(where) > depth:
            best, depth = mount.get("name"), len(where)
    volumes = {v.get("name"): v for v in serving.pod_spec.get("volumes") or [] if isinstance(v, dict)}
    volume = volumes.get(best)
    return volume if isinstance(volume, dict) else None
