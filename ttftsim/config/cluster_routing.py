"""The `cluster.router` section: how the gateway picks a ready replica, one schema per router, picked by
`type` (round robin when none is given).

Only the routers' settings live here; what they do is cluster/routing/. Disaggregated prefill and decode
pods are config/cluster.py's Disaggregation.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from ttftsim.config.base import StrictModel

RouterName = Literal["round_robin", "least_outstanding", "power_of_two", "session_affinity", "prefix_aware", "kv_aware"]


class RoundRobinRouter(StrictModel):
    """The next ready replica in turn (vLLM production-stack's default)."""

    type: Literal["round_robin"] = Field(default="round_robin", description="Round robin (the default type)")


class LeastOutstandingRouter(StrictModel):
    """Fewest requests in flight at the gateway; ties at random."""

    type: Literal["least_outstanding"] = Field(description="Least outstanding requests")


class PowerOfTwoRouter(StrictModel):
    """Two distinct replicas at random, the one with fewer requests in flight (the first drawn on a tie)."""

    type: Literal["power_of_two"] = Field(description="Power of two choices")


class SessionAffinityRouter(StrictModel):
    """A session sticks to the replica it first went to while that one is ready; requests without a
    session, and new sessions, go to the least loaded."""

    type: Literal["session_affinity"] = Field(description="Session affinity")


class KvAwareRouter(StrictModel):
    """Lowest KV-cache usage as last scraped; ties at random."""

    type: Literal["kv_aware"] = Field(description="KV-cache-usage aware")
    metrics_refresh_s: float = Field(default=0.05, gt=0, description="How often the picker reads pod metrics (GIE)")


class PrefixAwareRouter(StrictModel):
    """The Gateway API Inference Extension / llm-d default profile: weighted queue, KV-usage and
    prefix-cache scorers over scraped pod metrics and an approximate prefix index per pod."""

    type: Literal["prefix_aware"] = Field(description="Prefix-cache aware (GIE scorers)")
    queue_weight: float = Field(default=2.0, ge=0, description="prefix_aware: queue-scorer weight (GIE default 2)")
    kv_weight: float = Field(default=2.0, ge=0, description="prefix_aware: kv-cache-utilization weight (GIE 2)")
    prefix_weight: float = Field(default=3.0, ge=0, description="prefix_aware: prefix-cache-scorer weight (GIE 3)")
    lru_blocks_per_pod: int = Field(default=31_250, ge=1, description="Approximate prefix index size per pod")
    metrics_refresh_s: float = Field(default=0.05, gt=0, description="How often the picker reads pod metrics (GIE)")


class _RouterType(BaseModel):
    """Only the `type` of a router section, to name an unknown one as the field `type`."""

    model_config = ConfigDict(extra="ignore")
    type: RouterName = Field(default="round_robin", description="How the gateway picks a ready replica")


def _router_type(value: Any) -> Any:
    """A router section without `type` is round robin (as ever); an unknown type is an error on `type`
    (a discriminated union would report it on the section)."""
    if isinstance(value, dict):
        named = _RouterType.model_validate(value)
        if "type" not in value:
            return {**value, "type": named.type}
    return value


Router = Annotated[
    RoundRobinRouter
    | LeastOutstandingRouter
    | PowerOfTwoRouter
    | SessionAffinityRouter
    | KvAwareRouter
    | PrefixAwareRouter,
    Field(discriminator="type"),
    BeforeValidator(_router_type),
]
