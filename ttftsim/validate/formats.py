"""Deployment formats other than a plain Deployment, StatefulSet or LeaderWorkerSet, read as the workload their
controller or chart creates, so that `ttftsim validate` checks and predicts them like any other:

- KServe InferenceService with its ServingRuntime / ClusterServingRuntime, and LLMInferenceService
  (ttftsim/validate/kserve.py);
- Knative Serving's Service (ttftsim/validate/knative.py);
- vLLM production-stack and llm-d ModelService Helm values (ttftsim/validate/helm_values.py).

Each reader returns the Deployment (or LeaderWorkerSet) as the controller or chart would make it, with only
the fields validate reads: the vLLM container's command line, resources, probes and volumes, the pods'
placement, the replicas. Rendered charts (`helm template`) and Kustomize output are plain manifests already
and need nothing here. What a reader cannot turn into a workload stays named by k8s_schema.py's
unsupported-kind finding.
"""

from __future__ import annotations

from ttftsim.validate.helm_values import values_workloads
from ttftsim.validate.knative import knative_workloads
from ttftsim.validate.kserve import kserve_workloads
from ttftsim.validate.rendered import Documents, Rendered


def render_workloads(documents: Documents) -> Rendered:
    """The workloads of every KServe resource and chart values document in `documents`."""
    rendered = Rendered()
    for workload in kserve_workloads(documents) + knative_workloads(documents) + values_workloads(documents):
        rendered.add(workload)
    return rendered
