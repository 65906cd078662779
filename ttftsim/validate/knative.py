"""Knative Serving's Service (serving.knative.dev/v1) read as the Deployment of the revision it runs
(knative/serving pkg/reconciler/revision/resources/deploy.go: a Revision NAME-00001 runs the Deployment
NAME-00001-deployment with the pod of `spec.template.spec`).

- Replicas: what the autoscaler keeps at least, `autoscaling.knative.dev/min-scale` on the template (the older
  `minScale` too). Without it Knative scales to zero (min-scale 0 is its default): a warning, predicted with one
  replica, as KServe's serverless mode is read (kserve.py).
- The port: Knative sends requests to the user container's declared port, 8080 when it declares none (Knative's
  defaulting of `containerPort` and the PORT variable), so a vLLM on its own 8000 is never reached.
- Readiness: Knative defaults a TCP readiness probe on that port when the container has none (its queue-proxy
  runs it); vLLM accepts connections once the engine is up.

Not read: the autoscaler's concurrency target and window (KPA), traffic splits between revisions, the queue-proxy's
own queueing."""

from __future__ import annotations

from typing import Any

from ttftsim.validate.container_command import container_words
from ttftsim.validate.k8s_schema import SchemaFinding
from ttftsim.validate.rendered import Documents, RenderedWorkload, note, with_tcp_readiness, workload
from ttftsim.validate.serving_container import runs_vllm_server
from ttftsim.validate.yaml_fields import Fields

GROUP = "serving.knative.dev"
KNATIVE_PORT = 8080  # the user port when the container declares none
MIN_SCALE = ("autoscaling.knative.dev/min-scale", "autoscaling.knative.dev/minScale")


def knative_workloads(documents: Documents) -> list[RenderedWorkload]:
    """The Deployment of every Knative Service in `documents`."""
    return [
        _service(source, document)
        for source, document in documents
        if str(document.get("apiVersion", "")).split("/")[0] == GROUP and document.get("kind") == "Service"
    ]


def _service(source: str, document: dict[str, Any]) -> RenderedWorkload:
    metadata = document.get("metadata")
    name = str(metadata.get("name", "")) if isinstance(metadata, dict) else ""
    template = Fields.of(source, "spec", document.get("spec")).mapping("template")
    template_meta = template.mapping("metadata")
    annotations = template_meta.mapping("annotations").data
    revision = template_meta.text("name") or f"{name}-00001"
    notes = [note(source, f"Knative Service/{name} read as the Deployment {revision}-deployment of its revision")]
    scale = next((str(annotations[key]) for key in MIN_SCALE if key in annotations), "0")
    replicas = int(scale) if scale.isdigit() else 0
    if replicas == 0:
        message = (
            f"Knative Service/{name}: min-scale 0 (Knative's default) scales to zero; predicted with 1 replica, "
            "cold starts aside"
        )
        notes.append(note(source, message, "warning"))
        replicas = 1
    pod = dict(template.mapping("spec").data)
    containers = template.mapping("spec").items("containers")
    for container in containers:
        if _unreached(container):
            message = (
                f"Knative Service/{name}: the vLLM container declares no port, so Knative sends requests and its "
                f"readiness probe to {KNATIVE_PORT}, while vLLM listens on 8000: the revision never becomes ready"
            )
            notes.append(SchemaFinding("error", "probes", f"{source}: {message}", PORT_FIX))
    pod["containers"] = [_user_container(c) for c in containers]
    return RenderedWorkload(source, workload("Deployment", f"{revision}-deployment", replicas, pod), tuple(notes))


PORT_FIX = "declare ports: [{containerPort: 8000}] (or serve on --port 8080)"


def _unreached(container: Any) -> bool:
    """A vLLM container (its command, or vLLM's image entrypoint) with no declared port and no --port of its own:
    vLLM listens on 8000, Knative's user port is then 8080."""
    if not isinstance(container, dict) or container.get("ports") or not runs_vllm_server(container):
        return False
    try:
        words = container_words(container)
    except ValueError:  # an unbalanced quote: the reader of the command says so
        return False
    return not any(w == "--port" or w.startswith("--port=") for w in words)


def _user_container(container: Any) -> Any:
    """The container with Knative's defaults: its port (8080 when none is declared) and a TCP readiness probe on it."""
    if not isinstance(container, dict):
        return container
    declared = any(isinstance(p, dict) and "containerPort" in p for p in container.get("ports") or [])
    made = container if declared else container | {"ports": [{"containerPort": KNATIVE_PORT}]}
    return with_tcp_readiness(made, KNATIVE_PORT)
