"""Where a pod's cold start reads the weights from, as its manifest says (ttftsim/validate/weights_source.py), and
the startup probe judged against that cold start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ttftsim.validate.manifests import ServingWorkload
from ttftsim.validate.weights_source import weights_source

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "validate"


def _serving(
    model: str, mounts: list[tuple[str, dict[str, Any]]], env: dict[str, str] | None = None
) -> ServingWorkload:
    container: dict[str, Any] = {
        "name": "vllm",
        "volumeMounts": [{"name": f"v{i}", "mountPath": p} for i, (p, _) in enumerate(mounts)],
    }
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    pod_spec = {"volumes": [{"name": f"v{i}", **volume} for i, (_, volume) in enumerate(mounts)]}
    return ServingWorkload("k8s.yaml#0", "Deployment", "chat", 1, 1, container, pod_spec, model, {})


PVC = {"persistentVolumeClaim": {"claimName": "models"}}
HOST = {"hostPath": {"path": "/mnt/models"}}
EMPTY = {"emptyDir": {}}


@pytest.mark.parametrize(
    ("model", "mounts", "env", "source"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", [], None, "object_store"),  # nothing mounted: the Hub's download
        ("meta-llama/Llama-3.1-8B-Instruct", [("/root/.cache/huggingface", PVC)], None, "network_volume"),
        ("meta-llama/Llama-3.1-8B-Instruct", [("/root/.cache/huggingface", EMPTY)], None, "object_store"),
        ("meta-llama/Llama-3.1-8B-Instruct", [("/models", HOST)], {"HF_HOME": "/models"}, "local_nvme"),
        ("meta-llama/Llama-3.1-8B-Instruct", [("/models", HOST)], None, "object_store"),  # not where the cache is
        ("meta-llama/Llama-3.1-8B-Instruct", [("/hub", PVC), ("/", EMPTY)], {"HF_HUB_CACHE": "/hub"}, "network_volume"),
        ("/models/llama-8b", [("/models", PVC)], None, "network_volume"),
        ("/models/llama-8b", [("/models", EMPTY)], None, "local_nvme"),  # filled before the start (an init container)
        ("/models/llama-8b", [("/data", PVC), ("/models/llama-8b", HOST)], None, "local_nvme"),  # the deepest mount
        ("/models/llama-8b", [], None, "network_volume"),  # a path on no volume: the default, unknown
    ],
)
def test_the_volume_over_the_weights_decides(
    model: str, mounts: list[tuple[str, dict[str, Any]]], env: dict[str, str] | None, source: str
) -> None:
    assert weights_source(_serving(model, mounts, env)) == source


def test_a_startup_probe_long_enough_for_a_volume_is_too_short_for_the_hub(tmp_path: Path) -> None:
    """The example with an 80 s startup probe: enough when the weights come from a persistent volume (about 62 s),
    not when each pod downloads them from the Hub (about 99 s): the finding names where they come from."""
    from ttftsim.validate.run import validate

    k8s = (EXAMPLES / "k8s.yaml").read_text().replace("failureThreshold: 30", "failureThreshold: 8")
    (tmp_path / "deploy.yaml").write_text((EXAMPLES / "deploy.yaml").read_text())
    (tmp_path / "k8s.yaml").write_text(k8s)
    probes = [f for f in validate(tmp_path / "deploy.yaml", []).findings if f.check == "probes"]
    assert [f.severity for f in probes] == ["error"] and "weights from the Hub (no volume holds them)" in probes[
        0
    ].message
    mounted = k8s.replace(
        "          ports: [{containerPort: 8000}]\n",
        "          ports: [{containerPort: 8000}]\n"
        "          volumeMounts: [{name: cache, mountPath: /root/.cache/huggingface}]\n",
    ).replace(
        "      containers:\n",
        "      volumes: [{name: cache, persistentVolumeClaim: {claimName: hf}}]\n      containers:\n",
    )
    (tmp_path / "k8s.yaml").write_text(mounted)
    assert not [f for f in validate(tmp_path / "deploy.yaml", []).findings if f.check == "probes"]
