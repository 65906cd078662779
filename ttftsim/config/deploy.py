"""A deployment file for `ttftsim validate`: the expected traffic and SLO, and the deployment itself, as
Kubernetes manifests (the usual case) or as engine arguments and a replica count."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from ttftsim.config.base import Label, StrictModel
from ttftsim.config.engine import EngineArgs
from ttftsim.config.slo import Slo, check_classes, percentile_slo
from ttftsim.config.versions import version_defaults, version_text
from ttftsim.config.workload import Workload


class Deploy(StrictModel):
    """What `ttftsim validate` checks: the deployment, as Kubernetes manifests (the usual case: the vLLM workload,
    its HPA, KServe or Helm values) or as model, hardware, engine arguments and replicas; the traffic it must
    carry; and the SLO it must meet there."""

    name: Label = Field(
        default="deployment",
        description="Label used in reports (no control characters)",
    )
    manifests: list[str] = Field(
        default_factory=list, description="Kubernetes manifest files (relative to this file); --manifest adds more"
    )
    model: str | None = Field(default=None, description="Model preset or config.json (default: from vllm serve)")
    hardware: str | None = Field(default=None, description="GPU profile (default: from the pods' GPU node labels)")
    engine: EngineArgs | None = Field(
        default=None, description="Engine arguments when there are no manifests (beside manifests: an error)"
    )
    replicas: int | None = Field(
        default=None, ge=1, description="Replicas when there are no manifests (beside manifests: an error)"
    )
    gpus_per_node: int | None = Field(default=None, ge=1, le=64, description="GPUs per node (default: profile's)")
    traffic: Workload = Field(description="The expected traffic")
    slo: Slo = Field(description="What the deployment must meet (percentiles; ttft_p99_s required)")
    vllm_version: str = Field(default="0.15.1", description="vLLM version the image runs (defaults follow it)")
    calibration: str | None = Field(
        default=None,
        description="A calibration file written by `ttftsim fit` (path relative to this file) for a deployment "
        "read from manifests (without manifests: engine.calibration)",
    )

    @field_validator("vllm_version", mode="before")
    @classmethod
    def _as_written(cls, value: object) -> object:
        return version_text(value)

    @field_validator("vllm_version")
    @classmethod
    def _a_version(cls, version: str) -> str:
        version_defaults(version)  # a number, and not older than every modelled release
        return version

    @field_validator("slo")
    @classmethod
    def _percentile_slo(cls, slo: Slo) -> Slo:
        return percentile_slo(slo, "a deployment")

    @model_validator(mode="after")
    def _classes_in_the_traffic(self) -> Deploy:
        check_classes(self.slo, getattr(self.traffic, "priority_levels", 1), "the traffic")
        return self
