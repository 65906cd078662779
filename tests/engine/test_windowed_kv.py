"""The engine with vLLM's sliding-window KV manager (kvcache/windowed.py): blocks that leave the window are freed
as requests run, so requests that would preempt each other with every token kept run side by side; with a window
longer than every context, nothing is freed and every request's timeline is the one the plain manager gives."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.factories import engine_config, feed, make_engine, request
from ttftsim.config.resolved_engine import WindowedGroups
from ttftsim.config.scenario import Scenario
from ttftsim.engine.step_plan import windowed_peak_blocks
from ttftsim.kvcache.windowed import WindowedKVCacheManager
from ttftsim.replica import build_replica
from ttftsim.workload.request import Request

POOLS = [{"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": 2, "initial_nodes": 1}]
COLUMNS = ["request_id", "ttft_s", "e2e_s", "num_preemptions", "cached_tokens", "status"]


def _run(requests: list[Request], num_blocks: int, windowed: WindowedGroups | None) -> pd.DataFrame:
    env, engine, recorder = make_engine(num_blocks, closed_form=False, windowed_kv=windowed)
    assert isinstance(engine.kv, WindowedKVCacheManager) is (windowed is not None)
    feed(env, engine, requests)
    env.run()
    if isinstance(engine.kv, WindowedKVCacheManager):
        engine.kv.check()
    return recorder.requests_frame().sort_values("request_id").reset_index(drop=True)


def test_two_long_prompts_that_preempt_with_every_token_kept_run_together_with_a_window() -> None:
    """Block size 16, 20 blocks. Two 160-token prompts (10 blocks each) fill the pool; their first decodes need an
    eleventh block each, so with every token kept one is preempted. With a 32-token window, after the prefill
    (160 - 31) // 16 = 8 blocks of each leave the window before the decode allocates: no preemption."""
    requests = [request(0, 0.0, 160, 40), request(1, 0.0, 160, 40)]
    kept = _run(requests, 20, None)
    assert kept["num_preemptions"].sum() >= 1
    freed = _run(requests, 20, WindowedGroups(0, 1, 32, 20))
    assert freed["num_preemptions"].tolist() == [0, 0]
    assert freed["status"].tolist() == ["finished", "finished"]
    assert (freed["e2e_s"] < kept["e2e_s"].max()).all()


def test_a_window_longer_than_every_context_gives_the_plain_managers_timelines() -> None:
    """Shared prefixes (hits), a pool tight enough to preempt, chunked prefills: with a 100,000-token window no block
    ever leaves it, and the windowed manager's hits, allocations and evictions are the plain manager's."""
    rng = np.random.default_rng(3)
    requests = [
        request(rid, float(rid) * 0.05, int(rng.integers(40, 400)), int(rng.integers(5, 120)), content=rid % 3)
        for rid in range(40)
    ]
    plain = _run(requests, 120, None)
    windowed = _run(requests, 120, WindowedGroups(0, 1, 100_000, 120))
    assert plain["num_preemptions"].sum() > 0 and plain["cached_tokens"].sum() > 0  # both paths exercised
    pd.testing.assert_frame_equal(plain[COLUMNS], windowed[COLUMNS])


def test_a_request_that_cannot_fit_even_alone_is_rejected_not_preempted_forever() -> None:
    """One full and one windowed group (32-token window), 20 blocks of 16, chunks of 64. Each step first frees the
    blocks before (c - 31) // 16 of the c tokens computed, then holds cdiv(c + n, 16) in the full group and that
    less the skipped ones in the windowed group. 220 + 4 tokens: chunks at c = 0, 64, 128, 192 hold 4 + 4, 8 + 6,
    12 + 6, 14 + 4 blocks, its decodes 14 + 3: at most 18, it runs. 300 + 4: the chunks at c = 192 and 256 hold
    16 + (16 - 10) = 22 and 19 + (19 - 14) = 24 > 20: refused at once."""
    requests = [request(0, 0.0, 90, 6), request(1, 0.0, 150, 10), request(2, 0.0, 220, 4), request(3, 0.0, 300, 4)]
    env, engine, recorder = make_engine(
        20, closed_form=False, windowed_kv=WindowedGroups(1, 1, 32, 20), max_num_batched_tokens=64
    )
    feed(env, engine, requests)
    env.run()
    frame = recorder.requests_frame().sort_values("request_id")
    assert frame["status"].tolist() == ["finished", "finished", "finished", "rejected"]
    assert isinstance(engine.kv, WindowedKVCacheManager)
    engine.kv.check()


def test_the_most_blocks_a_request_holds_alone_by_hand() -> None:
    """The walk of the test above: 220 + 4 -> 18, 300 + 4 -> 24; 90 + 6 -> 10 (chunks 4 + 4, then cdiv(90, 16) = 6
    and 6 - 2); a long decode past the window repeats every 16 tokens: 100 + 400 -> cdiv(499, 16) = 32 full
    blocks and 32 - (498 - 31) // 16 = 3 windowed: 35. With vLLM 0.32's full-prompt reserve, admission wants the
    whole prompt in both groups: 2 x cdiv(220, 16) = 28. Without chunked prefill the 220-token prompt is one
    step: 14 + 14 = 28."""
    cfg = engine_config(max_num_batched_tokens=64)
    groups = WindowedGroups(1, 1, 32, 20)
    assert [windowed_peak_blocks(cfg, groups, p, o) for p, o in [(220, 4), (300, 4), (90, 6), (100, 400)]] == [
        18,
        24,
        10,
        35,
    ]
    assert windowed_peak_blocks(replace(cfg, reserve_full_prompt=True), groups, 220, 4) == 28
    assert windowed_peak_blocks(replace(cfg, enable_chunked_prefill=False), groups, 220, 4) == 28


@pytest.mark.parametrize(
    ("extra", "freed"),
    [
        ({}, True),
        ({"hardware": "cpu-host"}, True),  # vLLM 0.15.1 CpuPlatform.support_hybrid_kv_cache: True
        ({"engine": {"vllm_version": "0.15.1", "kv_offloading_size": 4}}, False),  # a connector: hybrid manager off
        ({"engine": {"vllm_version": "0.15.1", "disable_hybrid_kv_cache_manager": True}}, False),  # asked off
        ({"cluster": {"node_pools": POOLS, "disaggregation": {"prefill_replicas": 1}}}, False),  # P/D: a connector
    ],
)
def test_the_windowed_manager_runs_where_vllms_hybrid_manager_is_on(extra: dict[str, Any], freed: bool) -> None:
    """Gemma-3-1b (22 of 26 layers windowed): with the hybrid manager on, six windowed groups and one full group
    of 4 layers freed as vLLM frees them; with a KV connector (KV offloading, a disaggregated pod's transfer) the
    windowed layers become full attention, one group, every token kept, as in vLLM."""
    spec = {"model": "gemma-3-1b-pt", "hardware": "H100-SXM5-80GB", "engine": {"vllm_version": "0.15.1"}}
    workload = {"type": "synthetic", "arrivals": {"type": "poisson", "rate": 1}, "duration_s": 1}
    workload |= {
        "prompt_tokens": {"type": "fixed", "value": 100},
        "output_tokens": {"type": "fixed", "value": 10},
    }
    spec |= {"workload": workload} | extra
    replica = build_replica(Scenario.model_validate(spec), Path("."))
    windowed = replica.engine.windowed_kv
    assert (windowed is not None) is freed
    if windowed is not None:
        assert (windowed.full, windowed.windowed, windowed.window) == (1, 6, 512)
