"""The engine with vLLM's sliding-window KV manager (kvcache/windowed.py): blocks that leave the window are freed
as requests run, so requests that would preempt each other with every token kept run side by side; with a window
longer than every context, nothing is freed and every request's timeline is the one the plain manager gives."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.factories import feed, make_engine, request
from ttftsim.config.engine import WindowedGroups
from ttftsim.kvcache.windowed import WindowedKVCacheManager
from ttftsim.workload.request import Request

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
    """One full and one windowed group (32-token window), 20 blocks, max_num_batched_tokens 64: alone, a request
    holds every block in the full group and at most cdiv(31 + 64, 16) + 1 = 7 in the windowed one. 96 tokens:
    6 + 6 = 12 blocks, it runs; 160 tokens: 10 + 7 = 17, it runs; 208 tokens: 13 + 7 = 20, it runs;
    224 tokens: 14 + 7 = 21 > 20, refused at once."""
    requests = [request(0, 0.0, 90, 6), request(1, 0.0, 150, 10), request(2, 0.0, 200, 8), request(3, 0.0, 220, 4)]
    env, engine, recorder = make_engine(
        20, closed_form=False, windowed_kv=WindowedGroups(1, 1, 32, 20), max_num_batched_tokens=64
    )
    feed(env, engine, requests)
    env.run()
    frame = recorder.requests_frame().sort_values("request_id")
    assert frame["status"].tolist() == ["finished", "finished", "finished", "rejected"]
    assert isinstance(engine.kv, WindowedKVCacheManager)
    engine.kv.check()
