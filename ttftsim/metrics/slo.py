"""The SLO figures of a run over every arrival (a request that never got a first token, or never finished,
counts as infinitely late), and whether they meet a deployment's SLO targets: what the plan's search
and `validate`'s prediction both judge a run by."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ttftsim.config.plan import PlanSlo


def slo_figures(requests: pd.DataFrame) -> dict[str, float]:
    """Percentiles over every arrival (inf for one that never got a first token or never finished)."""
    if not len(requests):
        return {"ttft_p50_s": math.inf, "ttft_p90_s": math.inf, "ttft_p99_s": math.inf}
    ttft = requests["ttft_s"].fillna(np.inf).to_numpy(dtype=np.float64)
    tpot = requests["tpot_s"].to_numpy(dtype=np.float64)
    finished = requests["status"].to_numpy() == "finished"
    tpot = np.where(finished, np.nan_to_num(tpot, nan=0.0), np.inf)
    e2e = requests["e2e_s"].fillna(np.inf).to_numpy(dtype=np.float64)

    def q(values: Any, p: float) -> float:
        return float(np.quantile(values, p, method="inverted_cdf"))

    return {
        "ttft_p50_s": q(ttft, 0.5),
        "ttft_p90_s": q(ttft, 0.9),
        "ttft_p99_s": q(ttft, 0.99),
        "tpot_p99_s": q(tpot, 0.99),
        "e2e_p99_s": q(e2e, 0.99),
        "output_tokens_per_unit": _tokens_per_unit(requests[requests["status"] == "finished"]),
    }


def _tokens_per_unit(requests: pd.DataFrame) -> float:
    """Output tokens of served requests per unit of the plan's rate: per request, or per session for
    conversations (whose rate is in sessions/s; every turn's tokens count toward its session)."""
    sessions = requests["session_id"]
    units = sessions[sessions >= 0].nunique() + int((sessions < 0).sum())
    return float(requests["generated_tokens"].sum()) / units if units else 0.0


def meets_slo(slo: PlanSlo, figures: dict[str, float]) -> bool:
    checks = [("ttft_p99_s", slo.ttft_p99_s), ("ttft_p90_s", slo.ttft_p90_s), ("tpot_p99_s", slo.tpot_p99_s)]
    checks.append(("e2e_p99_s", slo.e2e_p99_s))
    return all(target is None or figures[name] <= target for name, target in checks)
