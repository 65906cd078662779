"""What `ttftsim validate` reports: findings (severity, check, what is wrong and why, the fix), the warnings for
what was read but not modelled, and the prediction under the declared traffic."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ttftsim.metrics.slo import SloFigures


@dataclass(frozen=True)
class Finding:
    severity: str  # error, warning, info
    check: str
    message: str
    fix: str = ""


@dataclass(frozen=True)
class Prediction:
    """The deployment simulated under the declared traffic: its replicas and SLO figures."""

    replicas: int
    kernel_costs: str
    figures: SloFigures

    def as_json(self) -> dict[str, Any]:
        """Plain JSON (_finite): a figure never reached is "inf", one with nothing to count null."""
        return {"replicas": self.replicas, "kernel_costs": self.kernel_costs, **_finite(self.figures.as_dict())}


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: infinity (never served) becomes "inf", as in summary.json, and NaN (nothing
    to count, e.g. goodput without a goodput target) null, inside dicts too."""
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None if value != value else ("inf" if value > 0 else "-inf")
    return value


@dataclass
class Report:
    name: str
    findings: list[Finding] = field(default_factory=list)
    prediction: Prediction | None = None
    deployment: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # read but not modelled: said, never silently ignored

    @property
    def passed(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def add(self, severity: str, check: str, message: str, fix: str = "") -> None:
        self.findings.append(Finding(severity, check, message, fix))

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "deployment": self.deployment,
            "findings": [asdict(f) for f in self.findings],
            "warnings": self.warnings,
            "prediction": None if self.prediction is None else self.prediction.as_json(),
        }
