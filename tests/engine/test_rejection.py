"""A replica checks `rejection` only for requests longer than `surely_accepted`: below it nothing is refused, and
just above it something is (the bound is the exact one), in every KV-cache mode."""

from __future__ import annotations

import pytest

from tests.factories import engine_config, request
from ttftsim.engine.step_plan import rejection, surely_accepted


@pytest.mark.parametrize(
    ("mode", "max_model_len", "num_blocks"),
    [
        ("paged", 4096, 100),  # the cache binds: 1,600 tokens
        ("paged", 1000, 100),  # max_model_len binds
        ("static", 1000, 100),  # a reservation of 63 blocks fits
        ("none", 1000, 1),
    ],
)
def test_requests_up_to_the_bound_are_accepted_and_one_token_more_is_refused(
    mode: str, max_model_len: int, num_blocks: int
) -> None:
    caching = {"enable_prefix_caching": False} if mode != "paged" else {}
    cfg = engine_config(kv_cache_mode=mode, max_model_len=max_model_len, **caching)
    bound = surely_accepted(cfg, num_blocks)
    assert bound == (min(max_model_len, num_blocks * 16) if mode == "paged" else max_model_len)
    for total in range(max(2, bound - 40), bound + 40):
        for output in (1, total // 2, total - 1):
            refused = rejection(cfg, num_blocks, request(0, 0.0, total - output, output))
            assert (refused == "") == (total <= bound), (total, output, refused)


def test_a_static_reservation_larger_than_the_cache_refuses_everything_so_every_request_is_checked() -> None:
    cfg = engine_config(kv_cache_mode="static", max_model_len=4096, enable_prefix_caching=False)
    assert surely_accepted(cfg, 100) == -1
    assert rejection(cfg, 100, request(0, 0.0, 5, 1)).startswith("a static reservation")
