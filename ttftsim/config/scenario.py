"""A scenario file: the model, the hardware, the engine arguments and the workload of one simulation."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ttftsim.config.base import Label, StrictModel
from ttftsim.config.cluster import Cluster
from ttftsim.config.engine import EngineArgs
from ttftsim.config.slo import Slo, check_classes
from ttftsim.config.workload import ClosedLoop, SyntheticWorkload, Workload

KernelCosts = Literal["auto", "roofline", "calibrated"]
ClientTool = Literal["ideal", "vllm-bench", "inference-perf", "aiperf", "genai-perf", "guidellm"]
DatasetSampling = Literal["sequential", "shuffle", "random"]


class Client(StrictModel):
    """The load generator, as it behaves (ttftsim/workload/clients.py): when closed-loop clients start,
    how long a client takes to send its next request, its warm-up phase, and its prompt dataset."""

    tool: ClientTool = Field(
        default="ideal",
        description="ideal (clients start spread over the workload's ramp_up_s, send at once), or a real "
        "benchmark client: vllm-bench, inference-perf, aiperf, genai-perf, guidellm",
    )
    turnaround_s: float | None = Field(
        default=None,
        ge=0,
        le=10,
        description="Closed loop: time from a response's last token until its client can send again, each client "
        "on its own (default: the tool's measured value)",
    )
    send_s: float | None = Field(
        default=None,
        ge=0,
        le=10,
        description="Closed loop: the tool's own work per request in its sending process, one send at a time "
        "(default: the tool's measured value: vllm-bench 0.32 ms, aiperf 0.25 ms, guidellm 0, a process per stream)",
    )
    warmup_requests: int = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description="Closed loop: requests of a warm-up phase (aiperf/genai-perf --warmup-request-count); "
        "the measured phase starts with every client at once when they have all returned",
    )
    dataset_entries: Annotated[int, Field(ge=1, le=10_000_000)] | Literal["unique"] | None = Field(
        default=None,
        description="Synthetic workloads: distinct prompts the tool generates and draws each request's prompt "
        "from (aiperf/genai-perf --num-dataset-entries, default 100: a repeated prompt is served by vLLM's prefix "
        "cache); unique = a new prompt per request; default: the tool's own rule",
    )
    dataset_sampling: DatasetSampling | None = Field(
        default=None,
        description="How the tool picks each request's entry (aiperf --dataset-sampling-strategy): sequential "
        "(in order, genai-perf), shuffle (each pass in a new order, aiperf 0.13's default), random (uniform "
        "with replacement, aiperf 0.1); default: the tool's own",
    )


class MeasuredStepCost(StrictModel):
    """Iteration cost measured on the target (e.g. a CPU host timed by a microbenchmark), used instead of
    the roofline: fixed + per scheduled token + per KV token read + per causal-attention query-key pair."""

    fixed_s: float = Field(ge=0, description="Per-iteration fixed time, seconds")
    per_token_s: float = Field(ge=0, description="Seconds per token scheduled in the iteration")
    per_kv_token_s: float = Field(default=0.0, ge=0, description="Seconds per cached token read by attention")
    per_attn_pair_s: float = Field(default=0.0, ge=0, description="Seconds per prefill query-key pair")
    per_decode_token_s: float | None = Field(
        default=None, ge=0, description="Seconds per decoding sequence's token (default: per_token_s)"
    )
    source: str = Field(description="Where the coefficients were measured")


class Scenario(StrictModel):
    """What `ttftsim simulate` runs."""

    name: Label = Field(
        default="scenario",
        description="Label used in reports (no control characters)",
    )
    model: str = Field(description="Model preset or path to a Hugging Face config.json")
    hardware: str = Field(
        description="Hardware profile name (case aside; a unique leading part such as h200 names it too) or path to "
        "a profile YAML"
    )
    engine: EngineArgs = Field(default_factory=EngineArgs, description="vLLM engine arguments")
    workload: Workload = Field(description="Traffic")
    horizon_s: float | None = Field(
        default=None,
        gt=0,
        description="Stop the simulation at this time (default: when every request is done; a cluster with "
        "closed-loop clients or conversations needs one)",
    )
    seed: int = Field(default=0, ge=0, description="Random seed; same seed, same numbers")
    first_visible_token: int = Field(
        default=1,
        ge=1,
        le=16,
        description="The client sees its first content with this generated token (2 when the first token "
        "detokenizes to nothing, as random-token benchmark prompts often do)",
    )
    client: Client = Field(default_factory=Client, description="The load generator's behaviour")
    client_timeout_s: float | None = Field(
        default=None, gt=0, description="Clients abort requests not finished this long after sending them"
    )
    slo: Slo = Field(
        default_factory=Slo, description="Targets: percentiles over every arrival (pass/fail), per request (goodput)"
    )
    kernel_costs: KernelCosts = Field(
        default="auto",
        description="Operator costs. auto: the curves fitted to measured kernel tables when the GPU has a "
        "calibration (calibration/fits/<gpu>.json), else the roofline, saying so in the summary; roofline: "
        "datasheet peaks with the profile's default efficiencies; calibrated: the fitted curves, an error "
        "when the GPU has none (a class without a fit, e.g. fp8 GEMMs on A100, uses the roofline)",
    )
    measured_step_cost: MeasuredStepCost | None = Field(
        default=None, description="Use measured iteration costs instead of the roofline model"
    )
    metrics_window_s: float = Field(default=10.0, gt=0, description="Time-series window, seconds")
    cluster: Cluster | None = Field(
        default=None, description="Node pools, pods, autoscaling, routing and faults; None = one replica"
    )

    @model_validator(mode="after")
    def _client_fits_workload(self) -> Scenario:
        arrivals = getattr(self.workload, "arrivals", None)
        if self.client.tool != "ideal" and isinstance(arrivals, ClosedLoop) and arrivals.ramp_up_s:
            raise ValueError(
                f"workload.arrivals.ramp_up_s ({arrivals.ramp_up_s:g}) spreads ideal clients only; client.tool "
                f"{self.client.tool} starts its clients as the tool does"
            )
        dataset = self.client.dataset_sampling is not None or isinstance(self.client.dataset_entries, int)
        if dataset and not isinstance(self.workload, SyntheticWorkload):
            field = "dataset_entries" if isinstance(self.client.dataset_entries, int) else "dataset_sampling"
            raise ValueError(
                f"client.{field} applies to synthetic workloads; a {self.workload.type} workload "
                "spells out its own prompts"
            )
        lora = getattr(self.workload, "lora", None)
        if lora is not None and not self.engine.enable_lora:
            raise ValueError("workload.lora asks for adapters the engine does not serve: set engine.enable_lora true")
        if lora is not None and lora.rank > self.engine.max_lora_rank:
            raise ValueError(
                f"workload.lora.rank {lora.rank} is above engine.max_lora_rank {self.engine.max_lora_rank}: vLLM "
                "refuses to load such an adapter"
            )
        check_classes(self.slo, getattr(self.workload, "priority_levels", 1), "the workload")
        return self
