"""The CPU tier of KV offloading, by hand: LRU over block hashes, write-through as blocks fill, and a prefix
evicted from the GPU copied back instead of recomputed (kvcache/offload.py, engine/loading.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.factories import feed, make_engine, request
from ttftsim.config.engine import EngineArgs
from ttftsim.kvcache.offload import CpuTier
from ttftsim.perf.linear import LinearStepModel

COST = LinearStepModel(0.01, 0.001)  # 10 ms a step + 1 ms per computed token


def test_the_tier_keeps_the_most_recently_used_blocks() -> None:
    tier = CpuTier(capacity_blocks=2)
    tier.store([1, 2, 3])
    assert tier.lookup([1, 2, 3], 0) == 0  # block 1 was evicted first: nothing from the start
    assert tier.lookup([9, 2, 3, 4], 1) == 2  # 2 and 3, touched: 3 is now the most recent
    tier.store([5])  # evicts 2, the least recently used
    assert tier.lookup([2], 0) == 0 and tier.lookup([3, 5], 0) == 2
    assert (tier.stored_blocks, len(tier)) == (4, 2)


def run(offload_blocks: int) -> dict[int, float]:
    env, engine, recorder = make_engine(
        num_blocks=8, cost=COST, kv_offload_blocks=offload_blocks, kv_load_s_per_block=0.005
    )
    feed(
        env,
        engine,
        [
            request(0, 0.0, 64, 1, content=7),  # 4 full blocks, cached on the GPU and stored to the tier
            request(1, 1.0, 127, 1),  # all 8 blocks: request 0's are evicted from the GPU
            request(2, 2.0, 64, 1, content=7),  # request 0's prompt again
        ],
    )
    env.run(until=10.0)
    return dict(recorder.requests_frame().set_index("request_id")["first_token_s"])


def test_an_evicted_prefix_comes_back_from_the_tier_instead_of_being_recomputed() -> None:
    # without the tier: 10 + 64 ms of prefill; with it: 3 blocks (the last prompt token is always computed,
    # so (64 - 1) // 16 blocks) copied back in 3 x 5 ms, then 16 tokens computed: 15 + 10 + 16 ms
    assert run(0)[2] == pytest.approx(2.0 + 0.074, abs=1e-12)
    assert run(100)[2] == pytest.approx(2.0 + 0.015 + 0.026, abs=1e-12)


def test_a_tier_too_small_for_the_prefix_holds_only_the_newest_blocks() -> None:
    # 8 blocks of tier: request 1's 7 full blocks push out request 0's first 3: the prompt is recomputed
    assert run(8)[2] == pytest.approx(2.0 + 0.074, abs=1e-12)


def test_offloading_needs_prefix_caching() -> None:
    with pytest.raises(ValidationError, match="kv_offloading_size needs paged KV blocks with prefix caching on"):
        EngineArgs(kv_offloading_size=8, enable_prefix_caching=False)


def test_a_partial_gpu_hit_then_the_rest_from_the_tier_keeps_its_gpu_blocks() -> None:
    """8 GPU blocks of 16. Request 0 (64 tokens of content 7) holds blocks 0-3 and frees them 3, 2, 1, 0 after
    the four never used. Request 1 (95 tokens, 6 blocks) takes the four unused ones (4-7), then 3 and 2, evicting
    their hashes; it frees 2, 3, 7, 6, 5, 4 behind 1, 0. Request 2 (content 7 again): blocks 0 and 1 are still a
    GPU hit (32 tokens); of its (64 - 1) // 16 = 3 usable blocks the third comes back from the tier (5 ms), then
    16 tokens are computed: first token at 2 + 0.005 + 0.010 + 0.016. It keeps the hit blocks 0 and 1, takes 2
    for the copied block and 3 for the rest, and frees 3, 2, 1, 0 last. Each prompt is one prefix-cache query."""
    env, engine, recorder = make_engine(num_blocks=8, cost=COST, kv_offload_blocks=100, kv_load_s_per_block=0.005)
    feed(env, engine, [request(0, 0.0, 64, 1, content=7), request(1, 1.0, 95, 1), request(2, 2.0, 64, 1, content=7)])
    env.run(until=10.0)
    row = recorder.requests_frame().set_index("request_id").loc[2]
    assert row["first_token_s"] == pytest.approx(2.031, abs=1e-12) and row["cached_tokens"] == 48
    assert engine.kv.pool.free_order() == [7, 6, 5, 4, 3, 2, 1, 0]
    assert (engine.kv.hit_tokens, engine.kv.query_tokens) == (32, 64 + 95 + 64)
