"""Speculative decoding's accepted drafts (docs/engine-semantics.md 11): vLLM's rejection sampler accepts
draft tokens left to right up to the first rejection; each is accepted with the acceptance rate given the
ones before it were. A seeded draw per request and step."""

from __future__ import annotations

import numpy as np


class DraftAcceptance:
    def __init__(self, acceptance_rate: float, seed: int, replica: int) -> None:
        self.rate = acceptance_rate
        self._rng = np.random.default_rng([seed, replica])

    def accepted(self, drafts: int) -> int:
        """Draft tokens accepted of `drafts` (a geometric draw of the first rejection, capped)."""
        return min(drafts, int(self._rng.geometric(1.0 - self.rate)) - 1)
