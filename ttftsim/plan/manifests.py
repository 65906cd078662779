"""What a user applies for the winning plan: the `vllm serve` arguments, Kubernetes manifests that would run
as written, the alternatives (production-stack Helm values, a KServe InferenceService) and a README saying
what to apply in which order. The objects are built in ttftsim/plan/k8s/; this module writes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ttftsim.config.plan import Plan
from ttftsim.plan.evaluate import Candidate
from ttftsim.plan.k8s.alternatives import kserve_inference_service, production_stack_values
from ttftsim.plan.k8s.objects import adapter_values, manifest_objects, storage
from ttftsim.plan.k8s.readme import readme
from ttftsim.plan.k8s.spec import deployable, gpu_node_selector, startup_budget_s, vllm_args

__all__ = ["dump", "gpu_node_selector", "manifests", "startup_budget_s", "vllm_args", "write_deployment"]


def manifests(
    plan: Plan, cand: Candidate, replicas: int, weight_bytes: float, model_id: str, base: Path = Path(".")
) -> list[dict[str, Any]]:
    """The objects of manifests.yaml: workload, Service, InferencePool and HTTPRoute when routed, HPA."""
    return manifest_objects(deployable(plan, cand, replicas, weight_bytes, model_id, base))


def write_deployment(
    out: Path, plan: Plan, cand: Candidate, replicas: int, weight_bytes: float, model_id: str, base: Path
) -> list[str]:
    """Every file of the deployable output, written into out; returns their names, README.md last."""
    spec = deployable(plan, cand, replicas, weight_bytes, model_id, base)
    files: dict[str, str] = {
        "vllm-args.txt": " ".join(spec.vllm_command) + "\n",
        "manifests.yaml": dump(manifest_objects(spec)),
    }
    if spec.options.weights == "pvc":
        files["storage.yaml"] = dump(storage(spec))
    if spec.options.autoscale:
        files["prometheus-adapter-values.yaml"] = dump([adapter_values()])
    stack, kserve = production_stack_values(spec), kserve_inference_service(spec)
    if stack is not None:
        files["production-stack-values.yaml"] = dump([stack])
    if kserve is not None:
        files["kserve-inferenceservice.yaml"] = dump([kserve])
    files["README.md"] = readme(spec, list(files))
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    return list(files)


def dump(documents: list[dict[str, Any]]) -> str:
    return yaml.dump_all(documents, Dumper=_PlainDumper, sort_keys=False)


class _PlainDumper(yaml.SafeDumper):
    """Writes a value used twice (the probes' httpGet) in full each time: no YAML anchors in manifests."""

    def ignore_aliases(self, data: Any) -> bool:
        return True
