"""What the Kubernetes manifests `ttftsim plan` writes need from the user's cluster: the Secret with the
Hugging Face token, where model weights are kept, the Gateway a routed deployment attaches to, autoscaling."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ttftsim.config.base import StrictModel

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
SECRET_KEY = r"^[-._a-zA-Z0-9]+$"


class ManifestOptions(StrictModel):
    """The cluster-specific parts of the winner's manifests (plan file field `manifests`)."""

    hf_token_secret: str = Field(
        default="hf-token",
        max_length=63,
        pattern=DNS_LABEL,
        description="Secret holding the Hugging Face token (HF_TOKEN); create it before applying",
    )
    hf_token_key: str = Field(
        default="token", max_length=253, pattern=SECRET_KEY, description="Key of the token inside that Secret"
    )
    weights: Literal["pvc", "node_cache"] = Field(
        default="pvc",
        description="pvc: one ReadWriteMany claim filled once by a download Job, every pod reads it; node_cache: "
        "each node's first pod downloads into a hostPath cache (an ephemeral-storage request sized from the weights)",
    )
    storage_class: str | None = Field(
        default=None,
        max_length=253,
        description="storageClassName of the weights claim (it must offer ReadWriteMany); null: the cluster default",
    )
    gateway: str = Field(
        default="inference-gateway",
        max_length=63,
        pattern=DNS_LABEL,
        description="Gateway the HTTPRoute attaches to when the planned router is an InferencePool's endpoint picker",
    )
    autoscale: bool = Field(
        default=True,
        description="Write an HPA on vLLM's waiting queue (from the planned replicas up) and its prometheus-adapter "
        "rule; false: a fixed fleet",
    )
