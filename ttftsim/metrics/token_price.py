"""The price of output tokens, one definition for `ttftsim plan` and `ttftsim compare`: a deployment's cost per hour
over the output tokens its traffic asks for in that hour (the demand: the traffic's rate times the output tokens it
asks for on average, workload/expected.py), not over the tokens one run happened to generate.

So a deployment that cannot keep up is priced at the demand it fails to serve, as the plan prices a row that
misses: the figure says what that traffic's tokens cost on it, and the SLO verdict beside it says whether they are
served in time. Priced over what a run generated, an overloaded run's figure moves with how long it ran past the
traffic and with what it refused, and two runs of one deployment under one traffic disagree.
"""

from __future__ import annotations

import math
from pathlib import Path

from ttftsim.config.workload import Workload
from ttftsim.workload.expected import output_tokens_per_unit

SECONDS_PER_HOUR = 3600.0


def demand_output_tokens_per_s(workload: Workload, rate: float, base: Path) -> float:
    """Output tokens per second the traffic asks for at `rate` (requests/s; conversations/s for a conversation
    workload): the rate times the output tokens it asks for per unit on average."""
    return rate * output_tokens_per_unit(workload, base)


def cost_per_million_output_tokens(cost_per_hour_usd: float, output_tokens_per_s: float) -> float:
    """$ per million output tokens at `output_tokens_per_s` (the demand); nan when the traffic asks for none."""
    tokens_per_hour = output_tokens_per_s * SECONDS_PER_HOUR
    return cost_per_hour_usd / tokens_per_hour * 1e6 if tokens_per_hour > 0 else math.nan
