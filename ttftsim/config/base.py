"""The strict base model every input schema derives from: unknown fields are errors, values are frozen."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Frozen, forbids unknown fields, validates defaults, refuses NaN and infinities (every number of an
    input is a finite quantity); every field carries a description."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)
