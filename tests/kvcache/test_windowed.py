"""The sliding-window KV manager against vLLM 0.15.1's SlidingWindowManager and HybridKVCacheCoordinator, worked
by hand: which blocks leave the window and in what order they join the free queue, the hit a windowed group
accepts (a run of cdiv(window - 1, block_size) cached blocks found from the end, earlier entries null), the
blocks a new request with such a hit takes, and a full-attention group beside the windowed one.

Block size 4 and window 8 throughout: after n computed tokens, (n - 7) // 4 whole blocks are out of the window;
a windowed hit needs cdiv(7, 4) = 2 cached blocks in a row."""

from __future__ import annotations

import pytest

from ttftsim.config.resolved_engine import WindowedGroups
from ttftsim.kvcache.manager import NO_HIT, CacheHit
from ttftsim.kvcache.windowed import COHORT_OFF, NULL, WindowedKVCacheManager, group_hash

SEGMENTS = [(7, 40)]  # one 40-token segment: ten full blocks of 4


def windowed(num_blocks: int, full: int = 0, caching: bool = True) -> WindowedKVCacheManager:
    return WindowedKVCacheManager(WindowedGroups(full, 1, 8, num_blocks), 4, caching)


def test_blocks_out_of_the_window_are_freed_last_first_before_the_next_allocation() -> None:
    kv = windowed(10)
    assert kv.allocate(1, 20)  # a 20-token prefill: five blocks, nothing computed yet, nothing skipped
    assert kv.tables[1] == [[0, 1, 2, 3, 4]]
    # the decode after it: 20 computed, (20 - 7) // 4 = 3 blocks out of the window, freed 2, 1, 0 (vLLM walks
    # back from the last skipped block), then one new block for token 21 from the queue's front
    assert kv.allocate(1, 21, computed_tokens=20)
    assert kv.tables[1] == [[NULL, NULL, NULL, 3, 4, 5]]
    assert kv.pool.free_order() == [-1] * 4 + [2, 1, 0]
    assert kv.num_held(1) == 3 and kv.pool.num_free == 7
    # 24 computed: (24 - 7) // 4 = 4, so block 3 goes; the walk stops at the first null
    assert kv.allocate(1, 25, computed_tokens=24)
    assert kv.tables[1] == [[NULL, NULL, NULL, NULL, 4, 5, 6]]
    assert kv.pool.free_order() == [-1] * 3 + [2, 1, 0, 3]
    kv.check()
    kv.free(1)  # the rest, last first
    assert kv.pool.free_order() == [-1] * 3 + [2, 1, 0, 3, 6, 5, 4]
    kv.check()


def test_the_window_is_freed_even_when_the_allocation_then_fails() -> None:
    kv = windowed(5)
    assert kv.allocate(1, 20)  # all five blocks
    assert kv.pool.num_free == 0
    # 13 computed: (13 - 7) // 4 = 1 block freed; 28 tokens need seven blocks in all, two more: only one is free
    assert not kv.allocate(1, 28, computed_tokens=13)
    assert kv.tables[1] == [[NULL, 1, 2, 3, 4]] and kv.pool.num_free == 1
    assert kv.allocate(1, 21, computed_tokens=13)  # one more block fits
    assert kv.tables[1] == [[NULL, 1, 2, 3, 4, 0]]
    kv.check()


def test_a_windowed_hit_is_the_last_run_of_two_cached_blocks_and_the_earlier_ones_stay_null() -> None:
    kv = windowed(20)
    assert kv.allocate(1, 40)
    kv.cache_full_blocks(1, SEGMENTS, 40)  # ten blocks hashed (group 0)
    kv.free(1)
    hit = kv.find_cached(2, SEGMENTS, 33)  # at most (33 - 1) // 4 = 8 blocks; found from the end: 7 and 6
    assert hit == CacheHit((NULL,) * 6 + (6, 7), 32)
    # 32 hit tokens: (32 - 7) // 4 = 6 skipped, so blocks 0-5 are not touched and stay free (and cached)
    free_before = kv.pool.num_free
    assert kv.allocate(2, 33, hit)
    assert kv.tables[2] == [[NULL] * 6 + [6, 7, 10]]
    assert kv.pool.num_free == free_before - 3  # two touched out of the queue, one new
    assert kv.pool.cached[group_hash(kv._hashes[1][0], 0)] == 0  # block 0 still cached
    kv.check()


def test_a_hit_shorter_than_the_run_it_needs_counts_only_from_block_zero() -> None:
    kv = windowed(20)
    assert kv.allocate(1, 40)
    kv.cache_full_blocks(1, SEGMENTS, 40)
    kv.free(1)
    # evict block 6's hash: the run at the end (7) is one block long, too short; from 5 back to 0 is a run of 6
    # found from the end once 5 and 4 are seen: the hit stops after block 5
    key = kv.pool.block_hash[6]
    del kv.pool.cached[key]  # type: ignore[arg-type]
    kv.pool.block_hash[6] = None
    assert kv.find_cached(2, SEGMENTS, 33) == CacheHit((NULL,) * 4 + (4, 5), 24)
    # only block 0 cached at the start and nothing two in a row after it: the run from block 0 (one block)
    for block in (1, 3, 5):
        key = kv.pool.block_hash[block]
        del kv.pool.cached[key]  # type: ignore[arg-type]
        kv.pool.block_hash[block] = None
    assert kv.find_cached(3, SEGMENTS, 33) == CacheHit((0,), 4)


def test_a_full_attention_group_keeps_everything_and_bounds_the_windowed_hit() -> None:
    """Tables are listed full groups first; vLLM allocates and frees in its group order, the windowed group first
    (its first layer is windowed, as in Gemma 2/3 and gpt-oss)."""
    kv = windowed(40, full=1)
    assert kv.allocate(1, 20)  # group 1 (windowed) takes its five blocks first, then group 0 (full)
    assert kv.tables[1] == [[5, 6, 7, 8, 9], [0, 1, 2, 3, 4]]
    assert kv.allocate(1, 21, computed_tokens=20)  # the windowed group frees 2, 1, 0; both groups grow by one
    assert kv.tables[1] == [[5, 6, 7, 8, 9, 11], [NULL, NULL, NULL, 3, 4, 10]]
    kv.cache_full_blocks(1, SEGMENTS, 21)  # five full blocks; the windowed group's nulls are not registered
    assert sorted(kv.pool.cached.values()) == [3, 4, 5, 6, 7, 8, 9]
    kv.free(1)  # the windowed group's held blocks last first, then the full group's
    assert kv.pool.free_order()[-12:] == [2, 1, 0, 10, 4, 3, 11, 9, 8, 7, 6, 5]
    # a second request with the same 21 tokens: full hit 5 blocks (20 tokens, capped at 20 // 4 = 5); the windowed
    # group finds 4 and 3 from the end (2 is gone from it), so the hit is 5 blocks with three leading nulls
    hit = kv.find_cached(2, SEGMENTS, 21)
    assert hit == CacheHit((5, 6, 7, 8, 9, NULL, NULL, NULL, 3, 4), 20)
    assert kv.allocate(2, 21, hit)
    assert kv.tables[2] == [[5, 6, 7, 8, 9, 13], [NULL, NULL, NULL, 3, 4, 12]]
    kv.check()


def test_the_windowed_group_cuts_the_full_hit() -> None:
    kv = windowed(40, full=1)
    assert kv.allocate(1, 20)
    kv.cache_full_blocks(1, SEGMENTS, 20)
    # the windowed group loses blocks 3 and 4 of the five: from the end, 2 and 1 are the first two cached in a row,
    # so the hit is 12 tokens (block 0 null in the windowed group) although the full group has all 20
    for block in (3, 4):  # the windowed group's blocks 0-4 are 0-4 (it allocates first), the full group's 5-9
        key = kv.pool.block_hash[block]
        del kv.pool.cached[key]  # type: ignore[arg-type]
        kv.pool.block_hash[block] = None
    kv.free(1)
    assert kv.find_cached(2, SEGMENTS, 21) == CacheHit((5, 6, 7, NULL, 1, 2), 12)


def test_admission_counts_blocks_in_every_group_and_fails_without_changing_anything() -> None:
    kv = windowed(9, full=1)
    assert kv.allocate(1, 16)  # four blocks in each group: one free block left
    assert not kv.allocate(2, 1)  # a one-token request needs a block in each of the two groups
    assert 2 not in kv.tables and kv.pool.num_free == 1
    assert kv.find_cached(3, SEGMENTS, 5) == NO_HIT  # nothing hashed yet
    kv.check()


def test_without_prefix_caching_nothing_is_hashed_or_found() -> None:
    kv = windowed(10, caching=False)
    assert kv.allocate(1, 20)
    kv.cache_full_blocks(1, SEGMENTS, 20)
    assert kv.pool.cached == {} and kv.find_cached(2, SEGMENTS, 21) == NO_HIT
    assert kv.allocate(1, 21, computed_tokens=20)
    assert kv.num_held(1) == 3
    kv.check()


def test_the_cohort_paths_are_refused() -> None:
    kv = windowed(10)
    assert kv.allocate(1, 4)
    for call in (lambda: kv.append_block(1), lambda: kv.append_blocks([1]), lambda: kv.blocks_needed(1, 8)):
        with pytest.raises(RuntimeError) as info:
            call()
        assert str(info.value) == COHORT_OFF


def test_a_window_one_past_a_block_boundary_needs_one_more_block_in_a_row() -> None:
    """Window 10, blocks of 4: a hit needs cdiv(9, 4) = 3 cached blocks in a row; after n computed tokens
    (n - 9) // 4 blocks are out of the window: 17 computed -> 2, 16 -> 1."""
    kv = WindowedKVCacheManager(WindowedGroups(0, 1, 10, 20), 4)
    assert kv.contiguous == 3
    assert (kv.skipped_blocks(16), kv.skipped_blocks(17), kv.skipped_blocks(9), kv.skipped_blocks(8)) == (1, 2, 0, 0)
    assert kv.allocate(1, 40)
    kv.cache_full_blocks(1, SEGMENTS, 40)
    kv.free(1)
    for block in (5,):  # a gap at block 5: from the end, 7 and 6 are two in a row, not three; 4, 3, 2 are
        key = kv.pool.block_hash[block]
        del kv.pool.cached[key]  # type: ignore[arg-type]
        kv.pool.block_hash[block] = None
    assert kv.find_cached(2, SEGMENTS, 33) == CacheHit((NULL, NULL, 2, 3, 4), 20)


def test_held_blocks_count_the_non_null_entries_only() -> None:
    kv = windowed(20)
    assert kv.num_held(1) == 0  # no table yet
    assert kv.allocate(1, 28)  # seven blocks
    assert kv.allocate(1, 29, computed_tokens=28)  # (28 - 7) // 4 = 5 freed, one more: 3 held, 5 null
    assert kv.num_held(1) == 3 and kv.tables[1][0].count(NULL) == 5


def test_the_windowed_group_cannot_stretch_the_hit_past_the_full_groups() -> None:
    """The full group keeps blocks 0 and 1 cached only; the windowed group all five: the hit is the full group's
    two blocks, the windowed scan looking at those two only (both cached, a run of two)."""
    kv = windowed(40, full=1)
    assert kv.allocate(1, 20)
    kv.cache_full_blocks(1, SEGMENTS, 20)
    for block in (7, 8, 9):  # the full group's third to fifth blocks
        key = kv.pool.block_hash[block]
        del kv.pool.cached[key]  # type: ignore[arg-type]
        kv.pool.block_hash[block] = None
    kv.free(1)
    assert kv.find_cached(2, SEGMENTS, 21) == CacheHit((5, 6, 0, 1), 8)


def test_an_admission_that_needs_exactly_the_free_blocks_fits_and_one_more_does_not() -> None:
    """One full and one windowed group, 14 blocks. Request 1 (20 tokens, 5 blocks a group) is hashed and freed:
    all 14 free, 10 of them cached. Request 2, the same 21 tokens: hit 20 tokens (full 0-4; windowed 8, 9 after
    three nulls): it touches 5 + 2 cached free blocks and takes one new block a group: 9 <= 14 fits. Then request
    3 with its own 21 tokens of other content wants 6 + 6 = 12 with 14 - 9 = 5 free: refused."""
    kv = windowed(14, full=1)
    assert kv.allocate(1, 20)
    kv.cache_full_blocks(1, SEGMENTS, 20)
    kv.free(1)
    hit = kv.find_cached(2, SEGMENTS, 21)
    assert hit == CacheHit((5, 6, 7, 8, 9, NULL, NULL, NULL, 3, 4), 20)
    assert kv.allocate(2, 21, hit)
    assert kv.pool.num_free == 14 - 9
    assert not kv.allocate(3, 21)  # 12 wanted
    assert kv.allocate(3, 8)  # 2 + 2 = 4 of 5
    kv.check()


def test_a_private_request_is_hashed_as_it_runs_so_blocks_out_of_the_window_stay_findable() -> None:
    """vLLM hashes every block it allocates. An 8-token prefill fills blocks 0 and 1; decoding to 11 computed
    tokens frees block 0 ((11 - 7) // 4 = 1) with its hash. Preempted there, the request asks again for 11
    tokens: at most (11 - 1) // 4 = 2 blocks, found from the end: 1 then 0, a run of two. Hashed only at the
    preemption (block 0 already gone), the run would be one block, too short, and nothing would be found."""
    kv = windowed(20)
    kv.mark_private(1)
    assert kv.hashes_private
    assert kv.find_cached(1, SEGMENTS, 11) == NO_HIT  # never run: nothing hashed
    assert kv.allocate(1, 8)
    kv.cache_full_blocks(1, SEGMENTS, 8)  # blocks 0 and 1 hashed as they fill
    for computed in (8, 9, 10, 11):
        assert kv.allocate(1, computed + 1, computed_tokens=computed)
    assert kv.tables[1] == [[NULL, 1, 2]]
    kv.cache_full_blocks(1, SEGMENTS, 11, preempting=True)
    kv.free(1)
    assert kv.find_cached(1, SEGMENTS, 11) == CacheHit((0, 1), 8)


def test_hashing_resumes_where_it_stopped_and_freeing_an_unknown_request_is_harmless() -> None:
    kv = windowed(20)
    assert kv.allocate(1, 8)
    kv.cache_full_blocks(1, SEGMENTS, 8)  # blocks 0 and 1
    kv.pool.block_hash[0] = None  # as if block 0's hash were gone: it is not hashed again below
    assert kv.allocate(1, 16, computed_tokens=8)
    kv.cache_full_blocks(1, SEGMENTS, 16)  # blocks 2 and 3 only
    assert kv.pool.block_hash[0] is None and kv.pool.block_hash[3] is not None
    kv.free(99)
    assert kv.tables.keys() == {1}


def test_check_names_the_block_whose_count_is_wrong() -> None:
    kv = windowed(10)
    assert kv.allocate(1, 8)
    kv.tables[1][0][1] = NULL  # block 1 held by the pool, by no table
    with pytest.raises(AssertionError, match=r"^block 1: ref count 1, held by 0 table entries$"):
        kv.check()
