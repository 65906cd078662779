"""A deployment calibration file (`ttftsim fit -o my-cluster.json`): a few named factors fitted to one team's
measured runs, which every command applies to the deployments built on the hardware it was fitted on.

The factors act inside the cost models, never on a latency itself (ttftsim/calibration/factors.py):
- gemm_efficiency_scale: achieved / modelled efficiency of the GEMMs (and fused MoE experts): their kernel
  times, or a measured step cost's per-token terms, are divided by it;
- attention_efficiency_scale: the same for prefill and decode attention (a measured step cost's per-KV-token
  and per-pair terms);
- step_overhead_s: seconds added to every iteration's host time (scheduling, input preparation, launches);
- api_server_cost_scale: multiplies the API-server process's CPU work (per request, prompt token, output
  token and step; engine/api_server.py).
The neutral values (1, 1, 0, 1) leave a deployment as it was. Version 1 of the format.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ttftsim.config.base import StrictModel

FactorName = Literal["gemm_efficiency_scale", "attention_efficiency_scale", "step_overhead_s", "api_server_cost_scale"]
FACTOR_NAMES: tuple[FactorName, ...] = (
    "gemm_efficiency_scale",
    "attention_efficiency_scale",
    "step_overhead_s",
    "api_server_cost_scale",
)


class Factors(StrictModel):
    """The fitted values; a factor left out keeps its neutral value."""

    gemm_efficiency_scale: float = Field(
        default=1.0, ge=0.01, le=100, description="GEMM (and fused-MoE) kernel times are divided by this"
    )
    attention_efficiency_scale: float = Field(
        default=1.0, ge=0.01, le=100, description="Prefill and decode attention times are divided by this"
    )
    step_overhead_s: float = Field(
        default=0.0,
        ge=-1,
        le=1,
        description="Seconds added to every iteration's host time (the sum is kept >= 0, with a warning)",
    )
    api_server_cost_scale: float = Field(
        default=1.0, ge=0, le=100, description="Multiplies every API-server cost (request, prompt/output token, step)"
    )


class FactorFit(StrictModel):
    """How well one factor is known: the range of its fits over the cross-validation folds (and all runs)."""

    low: float = Field(description="Lowest value fitted over the cross-validation folds and all runs")
    high: float = Field(description="Highest value fitted over the cross-validation folds and all runs")

    @model_validator(mode="after")
    def _ordered(self) -> FactorFit:
        if self.low > self.high:
            raise ValueError(f"low ({self.low:g}) is above high ({self.high:g})")
        return self


class MetricErrors(StrictModel):
    """Median absolute percentage error of each metric over runs (0.1 = 10 %)."""

    in_sample: dict[str, float] = Field(description="Runs predicted by the fit on every run")
    cross_validated: dict[str, float] = Field(description="Each run predicted by the fold fit that left it out")
    unfitted: dict[str, float] = Field(description="Runs predicted with the neutral factors")


class Provenance(StrictModel):
    """What the factors were fitted to."""

    deployment: str = Field(description="The deployment (scenario) file the runs were simulated on")
    reports: list[str] = Field(description="The benchmark reports read")
    runs: list[str] = Field(description="The runs fitted, by name")
    folds: int = Field(ge=1, description="Cross-validation folds over runs (runs = leave-one-out)")
    ttftsim_version: str = Field(description="The ttftsim that fitted them")


class NotApplied(StrictModel):
    """A fit that `ttftsim fit` did not apply: on the runs its cross-validation folds held out it was not
    clearly better than no fit (accuracy/fit_select.py `judge`), so the file's factors are neutral."""

    factors: Factors = Field(description="The fit on every run, not applied")
    fitted: list[FactorName] = Field(description="The factors that fit named")
    held_out_error: float = Field(ge=0, description="Mean over runs of each run's mean abs error, held out")
    unfitted_error: float = Field(ge=0, description="The same without a fit")
    standard_error: float = Field(ge=0, description="Standard error of the mean paired per-run difference")
    errors: MetricErrors = Field(description="That fit's prediction errors per metric")


class DeploymentCalibration(StrictModel):
    """A calibration file. The factors apply to deployments on `hardware` only."""

    format: Literal["ttftsim-deployment-calibration"] = Field(description="What this file is")
    version: Literal[1] = Field(description="Format version")
    hardware: str = Field(min_length=1, description="The hardware profile of the runs (the factors apply to it only)")
    factors: Factors = Field(description="The fitted deployment factors")
    fitted: list[FactorName] = Field(default_factory=list, description="Which factors were fitted (others: neutral)")
    intervals: dict[FactorName, FactorFit] = Field(
        default_factory=dict, description="Per fitted factor, its range over the cross-validation folds"
    )
    errors: MetricErrors | None = Field(default=None, description="Prediction errors of the fit, per metric")
    provenance: Provenance | None = Field(default=None, description="What the factors were fitted to")
    not_applied: NotApplied | None = Field(
        default=None, description="A fit left out because it predicted held-out runs no better than none"
    )
