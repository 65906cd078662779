"""Block pool and block hashes, case by case where the mutation run (docs/testing.md) found no test that
could tell: anonymous runs and recycled ids, eviction through an anonymous take, the invariant checker on
broken states, hashes of blocks that span segments. Every expected id and order is worked out by hand
from the rules in block_pool.py's docstring (vLLM V1's FreeKVCacheBlockQueue: pop from the front, freed
chains appended tail first)."""

from __future__ import annotations

import pytest

from ttftsim.kvcache.block_pool import BlockPool
from ttftsim.kvcache.hashing import NONE_HASH, block_hashes


def test_usage_is_the_held_share_and_zero_for_an_empty_pool() -> None:
    pool = BlockPool(4)
    assert pool.usage() == 0.0
    pool.allocate(1)
    assert pool.usage() == 0.25
    pool.take_anonymous(2)
    assert pool.usage() == 0.75
    assert BlockPool(0).usage() == 0.0
    assert BlockPool(0).free_order() == []


def test_taking_more_than_is_free_names_the_call_and_the_free_count() -> None:
    pool = BlockPool(2)
    with pytest.raises(RuntimeError, match=r"^allocate\(3\) with 2 free blocks$"):
        pool.allocate(3)
    with pytest.raises(RuntimeError, match=r"^take_anonymous\(3\) with 2 free blocks$"):
        pool.take_anonymous(3)
    pool.take_anonymous(2)  # exactly what is free is allowed
    assert (pool.num_free, pool.num_anonymous_held) == (0, 2)
    pool.check()


def test_anonymous_take_through_identified_blocks_evicts_them_and_recycles_their_ids() -> None:
    pool = BlockPool(5)
    blocks = pool.allocate(2)  # [0, 1]
    pool.cache_blocks(blocks, [10, 11], 0, 2)
    pool.free(blocks)  # queue: run of 3, then 1, 0 (the chain's tail first)
    assert pool.free_order() == [-1, -1, -1, 1, 0]
    pool.take_anonymous(4)  # the run of 3, then block 1 (its hash 11 dropped, its id kept spare)
    assert pool.free_order() == [0]
    assert (pool.num_free, pool.num_anonymous_held, pool.num_evictions) == (1, 4, 1)
    assert pool.cached == {10: 0} and pool.block_hash == [10, None]
    pool.check()
    pool.free_anonymous(4)  # one run at the tail, behind block 0
    assert pool.free_order() == [0, -1, -1, -1, -1]
    assert pool.num_anonymous_held == 0
    # block 0 (evicting hash 10), then the run: recycled id 1 first, then new ids 2 and 3
    assert pool.allocate(4) == [0, 1, 2, 3]
    assert pool.num_evictions == 2 and pool.cached == {}
    assert pool.ref_counts == [1, 1, 1, 1]
    pool.check()


def test_anonymous_take_from_a_run_leaves_the_rest_of_the_run_in_front() -> None:
    pool = BlockPool(6)
    pool.take_anonymous(2)
    assert pool.free_order() == [-1] * 4 and pool.ref_counts == []  # no block got an id
    pool.take_anonymous(1)
    pool.free_anonymous(1)  # joins the run at the tail: still one run
    assert len(pool._free) == 1 and pool.free_order() == [-1] * 4
    assert pool.allocate(4) == [0, 1, 2, 3]
    pool.check()


def test_recycled_ids_are_handed_out_last_recycled_first_and_only_as_many_as_asked() -> None:
    pool = BlockPool(4)
    pool.free(pool.allocate(3))  # queue: run of 1, then 2, 1, 0
    pool.take_anonymous(3)  # the run, then blocks 2 and 1 go spare (in that order)
    assert pool._spare_ids == [2, 1]
    pool.free_anonymous(3)
    assert pool.free_order() == [0, -1, -1, -1]
    assert pool.allocate(2) == [0, 1]  # block 0, then the last recycled id from the run
    assert pool._spare_ids == [2]
    assert pool.allocate(2) == [2, 3]
    pool.check()


def test_identify_mints_ids_for_held_anonymous_blocks() -> None:
    pool = BlockPool(4)
    pool.allocate(1)  # block 0
    pool.take_anonymous(3)
    assert pool.identify(2) == [1, 2]
    assert pool.ref_counts == [1, 1, 1] and pool.num_anonymous_held == 1
    pool.check()


def test_a_block_evicted_from_the_cache_can_take_a_new_hash() -> None:
    pool = BlockPool(1)
    block = pool.allocate(1)
    pool.cache_blocks(block, [5], 0, 1)
    pool.free(block)
    again = pool.allocate(1)  # evicts hash 5
    assert again == [0] and pool.block_hash == [None] and pool.num_evictions == 1
    pool.cache_blocks(again, [6], 0, 1)
    assert pool.cached == {6: 0}
    pool.free(again)
    pool.allocate(1)
    assert pool.num_evictions == 2


def test_touch_takes_free_blocks_out_of_the_free_count() -> None:
    pool = BlockPool(3)
    blocks = pool.allocate(2)
    pool.cache_blocks(blocks, [1, 2], 0, 2)
    pool.free(blocks)
    assert pool.num_free == 3
    pool.touch([0, 1])
    assert pool.num_free == 1 and pool.free_order() == [-1]
    pool.check()


def test_caching_only_the_given_range_and_nothing_when_caching_is_off() -> None:
    pool = BlockPool(3)
    blocks = pool.allocate(3)
    pool.cache_blocks(blocks, [7, 8, 9], 1, 2)
    assert pool.block_hash == [None, 8, None] and pool.cached == {8: 1}
    off = BlockPool(2, enable_caching=False)
    off.cache_blocks(off.allocate(2), [7, 8], 0, 2)
    assert off.block_hash == [None, None] and off.cached == {}


def test_lookup_stops_at_the_limit() -> None:
    pool = BlockPool(3)
    blocks = pool.allocate(3)
    pool.cache_blocks(blocks, [7, 8, 9], 0, 3)
    assert pool.lookup([7, 8, 9], 2) == [0, 1]
    assert pool.lookup([7, 8, 9], 3) == [0, 1, 2]
    assert pool.lookup([7, 8, 9], 5) == [0, 1, 2]
    assert pool.lookup([7, 8, 9], 0) == []
    assert pool.count_free_among([0, 1, 2]) == 0


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (lambda p: setattr(p, "num_free", p.num_free + 1), r"^num_free 3 != 1 identified \+ 1 in runs$"),
        (lambda p: p.ref_counts.__setitem__(0, 0), r"^block 0: ref count 0, in free queue False$"),
        (lambda p: p.ref_counts.__setitem__(2, -1), r"^block 2: ref count -1, in free queue True$"),
        (lambda p: p.ref_counts.__setitem__(2, 1), r"^block 2: ref count 1, in free queue True$"),
        (
            lambda p: setattr(p, "num_anonymous_held", 1),
            r"^2 free \+ 2 held \+ 1 anonymous != 4$",
        ),
        (lambda p: p.cached.__setitem__(99, 0), r"^hash map points at block 0, which no longer holds that hash$"),
    ],
)
def test_the_invariant_checker_names_what_is_broken(break_it: object, message: str) -> None:
    pool = BlockPool(4)
    held = pool.allocate(3)  # 0, 1, 2
    pool.cache_blocks(held, [70, 71, 72], 0, 3)
    pool.free([2])  # queue: run of 1, then block 2
    pool.check()  # the state is valid before it is broken
    break_it(pool)  # type: ignore[operator]
    with pytest.raises(AssertionError, match=message):
        pool.check()


def test_the_checker_skips_spare_ids_but_not_a_hash_on_one() -> None:
    pool = BlockPool(3)
    blocks = pool.allocate(1)
    pool.cache_blocks(blocks, [40], 0, 1)
    pool.free(blocks)
    pool.take_anonymous(3)  # the run of 2, then block 0 (spare; hash dropped)
    pool.check()
    pool.cached[40] = 0
    pool.block_hash[0] = 40
    with pytest.raises(AssertionError, match="hash map points at block 0"):
        pool.check()


# ---- block hashes: the keys written out by hand ----


def test_hashes_of_blocks_that_span_segments_chain_their_pieces() -> None:
    segments = [(1, 10), (2, 3), (3, 40)]  # 53 tokens: blocks of 16 are 0-15, 16-31, 32-47 (48-52 not full)
    first = hash((NONE_HASH, ((1, 0, 10), (2, 0, 3), (3, 0, 3))))
    second = hash((first, ((3, 3, 16),)))
    third = hash((second, ((3, 19, 16),)))
    assert block_hashes(segments, 16, 3) == [first, second, third]
    assert block_hashes(segments, 16, 2) == [first, second]
    assert block_hashes(segments, 16, 3, [first]) == [first, second, third]  # resumes after a span
    assert block_hashes(segments, 16, 3, [first, second]) == [first, second, third]


def test_a_block_ending_exactly_at_a_segment_end_starts_the_next_at_offset_zero() -> None:
    segments = [(4, 16), (5, 8), (6, 8), (7, 20)]
    first = hash((NONE_HASH, ((4, 0, 16),)))
    second = hash((first, ((5, 0, 8), (6, 0, 8))))
    third = hash((second, ((7, 0, 16),)))
    assert block_hashes(segments, 16, 3) == [first, second, third]
    assert block_hashes(segments, 16, 3, [first, second]) == [first, second, third]


def test_resuming_inside_a_long_segment_keeps_the_offset() -> None:
    segments = [(8, 5), (9, 60)]
    first = hash((NONE_HASH, ((8, 0, 5), (9, 0, 11))))
    second = hash((first, ((9, 11, 16),)))
    third = hash((second, ((9, 27, 16),)))
    assert block_hashes(segments, 16, 3) == [first, second, third]
    assert block_hashes(segments, 16, 3, [first, second]) == [first, second, third]
    assert block_hashes(segments, 16, 2, [first, second, third]) == [first, second]  # already enough


def test_a_piece_that_ends_a_segment_inside_a_spanning_block() -> None:
    segments = [(1, 20), (2, 4), (3, 30)]  # block 1 is tokens 16-31: 4 of segment 1, all of 2, 8 of 3
    first = hash((NONE_HASH, ((1, 0, 16),)))
    second = hash((first, ((1, 16, 4), (2, 0, 4), (3, 0, 8))))
    third = hash((second, ((3, 8, 16),)))
    assert block_hashes(segments, 16, 3) == [first, second, third]
    assert block_hashes(segments, 16, 3, [first, second]) == [first, second, third]
