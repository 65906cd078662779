"""Twelve minutes of the fleet's day from 13:00 (benchmarks/cluster_day.py: diurnal traffic at some 68 req/s, the
HPA between 4 and 32 replicas on L40S, Karpenter nodes, a warm pool, least-outstanding routing), started from a
fresh fleet at its minimum (4 replicas, 2 warm), not from the day's own state at 13:00, so that the fleet moves:
the HPA asks for 6 replicas at 240 s (the warm pool's two promoted, two more warm pods started) and 9 at 255 s
(three pods waiting for a node Karpenter provisions in 181 s, ready at 599 s, then serving), and for 6 at 600 s
(three ready pods scaled down while traffic flows, two of them past their grace period with requests in flight:
3 failed). It gives the requests the engine gave before the speed work of issue #22 (recorded in a worktree of
commit 18e4149): each request's replica, status, attempts and tokens, and its times to a nanosecond, not to the
bit (numpy's vectorised log2 and interp may round the last bit differently on another CPU; a changed schedule
moves times by microseconds at least). The recorded file: tests/data/cluster-day-13h-0.2h.csv.gz;
`python -m tests.cluster.test_day_reference` writes it again with the code checked out."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ttftsim.config.scenario import Scenario
from ttftsim.simulate import simulate

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "data" / "cluster-day-13h-0.2h.csv.gz"
HOURS, START_HOUR = 0.2, 13.0
EXACT = ["request_id", "replica", "status", "attempts", "generated_tokens", "cached_tokens", "num_preemptions"]
TIMES = ["arrival_s", "first_scheduled_s", "first_token_s", "finish_s"]  # %.12g: to 1 ns from 100 s on


def day_requests(hours: float = HOURS, start_hour: float = START_HOUR) -> pd.DataFrame:
    spec = importlib.util.spec_from_file_location("cluster_day", ROOT / "benchmarks" / "cluster_day.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = simulate(Scenario.model_validate(module.scenario(hours, start_hour)))
    return result.requests[EXACT + TIMES].reset_index(drop=True)


def test_twelve_minutes_of_the_day_give_the_recorded_requests() -> None:
    got, want = day_requests(), pd.read_csv(RECORDED, keep_default_na=False, na_values=[""])
    assert len(got) == len(want) > 49_000
    assert want["replica"].nunique() == 9 and (want["status"] == "failed").sum() == 3  # the fleet moved
    for column in EXACT:
        assert got[column].astype(str).tolist() == want[column].astype(str).tolist(), column
    for column in TIMES:
        assert np.allclose(got[column], want[column], rtol=0.0, atol=1e-9, equal_nan=True), column


if __name__ == "__main__":
    day_requests().to_csv(RECORDED, index=False, float_format="%.12g")
    sys.stdout.write(f"wrote {RECORDED}\n")
