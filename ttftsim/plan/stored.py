"""The shapes of the task results a plan checkpoint holds, checked as they are reused (`--resume`): a result
edited, damaged, or written by another ttftsim in another shape is one line naming the checkpoint and the task,
not a traceback in the middle of the search."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ttftsim.metrics.slo import SloFigures


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class _Refused(_Shape):
    feasible: Literal[False]
    reason: str


class _Bound(_Shape):
    feasible: Literal[True]
    saturated_rate: float
    kv_blocks: int
    weight_bytes: float | int


class _Probe(_Shape):
    rate: float
    ratios: dict[str, float]


class _CapacityMiss(_Refused):
    probes: list[_Probe]
    binding: str


class _Capacity(_Shape):
    feasible: Literal[True]
    max_rate: float
    probes: list[_Probe]
    binding: str
    nearest: str


class _Confirm(_Shape):
    met: bool
    replicas: int
    pods_lost: int


class _Day(_Shape):
    option: dict[str, Any] | None
    fixed_replicas: int | None
    cost_per_day_usd: float | int
    violation_minutes_per_day: float | int | None
    max_ready_replicas: int
    requests: int


# by task kind, and for a bound or a capacity by whether it succeeded (its `feasible`)
SHAPES: dict[tuple[str, bool], type[_Shape]] = {
    ("bound", True): _Bound,
    ("bound", False): _Refused,
    ("capacity", True): _Capacity,
    ("capacity", False): _CapacityMiss,
    ("confirm", True): _Confirm,
    ("day", True): _Day,
}
RATES = {"bound": "saturated_rate", "capacity": "max_rate"}  # positive and finite where the task succeeded


def problem(kind: str, value: Any) -> str | None:
    """What is wrong with a stored result of this task kind (None: it has the shape the task returns)."""
    if not isinstance(value, dict):
        return "not a JSON object"
    succeeded = value.get("feasible", True) is not False
    try:
        if (kind, succeeded) in SHAPES:
            SHAPES[kind, succeeded].model_validate(value)
        if kind in ("predict", "confirm"):
            SloFigures.from_dict(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the result"
        return f"{where}: {first['msg']}"
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return f"not the figures a {kind} task returns ({type(exc).__name__}: {exc})"
    rate = RATES.get(kind)
    if rate is not None and succeeded and not (math.isfinite(value[rate]) and value[rate] > 0):
        return f"{rate} {value[rate]!r} is not a positive number"
    return None
