"""The KV manager's paths that only the engine suite reached before the mutation run (docs/testing.md):
private requests (anonymous blocks, hashed only when preempted, found again on re-admission), a batch of
appends mixing private and shared requests, the full-prompt reserve, modes none and static, the admission
counters and the CPU tier lookup. Block ids and queue orders worked out by hand from block_pool.py's rules."""

from __future__ import annotations

from ttftsim.kvcache.manager import NO_HIT, CacheHit, KVCacheManager
from ttftsim.kvcache.offload import CpuTier

SEGMENTS = [(5, 64)]  # one 64-token segment: four full blocks of 16


def test_a_private_request_runs_anonymous_and_is_hashed_only_when_preempted() -> None:
    kv = KVCacheManager(num_blocks=8, block_size=16)
    kv.mark_private(1)
    assert kv.find_cached(1, SEGMENTS, 49) == NO_HIT  # never hashed: nothing to look up
    assert kv.allocate(1, 40)
    assert (kv.blocks[1], kv.anonymous[1], kv.num_held(1)) == ([], 3, 3)
    assert (kv.pool.num_free, kv.pool.num_anonymous_held) == (5, 3)
    assert kv.append_block(1)
    assert kv.anonymous[1] == 4
    kv.cache_full_blocks(1, SEGMENTS, 48)  # running: stays anonymous, unhashed
    assert kv.blocks[1] == [] and kv.pool.cached == {}
    kv.cache_full_blocks(1, SEGMENTS, 48, preempting=True)  # its 3 full blocks get ids 0, 1, 2 and hashes
    assert (kv.blocks[1], kv.anonymous[1], kv.pool.num_anonymous_held) == ([0, 1, 2], 1, 1)
    assert sorted(kv.pool.cached.values()) == [0, 1, 2]
    kv.pool.check()
    kv.free(1)  # the anonymous block joins the run at the tail, then blocks 2, 1, 0
    assert kv.pool.free_order() == [-1] * 5 + [2, 1, 0]
    assert kv.num_held(1) == 0
    # re-admission (49 tokens: at most 3 blocks usable) finds the three blocks; 48 tokens: only two
    assert kv.find_cached(1, SEGMENTS, 49) == CacheHit((0, 1, 2), 48)
    assert kv.find_cached(1, SEGMENTS, 48) == CacheHit((0, 1), 32)
    hit = kv.find_cached(1, SEGMENTS, 49)
    assert kv.allocate(1, 49, hit)
    assert (kv.blocks[1], kv.anonymous[1]) == ([0, 1, 2], 1)  # the 4th block is anonymous again
    assert kv.pool.num_free == 4
    kv.pool.check()


def test_a_preempted_private_request_is_hashed_from_where_it_stopped() -> None:
    kv = KVCacheManager(num_blocks=8, block_size=16)
    kv.mark_private(1)
    assert kv.allocate(1, 64)
    kv.cache_full_blocks(1, SEGMENTS, 32, preempting=True)
    assert (kv.blocks[1], kv.anonymous[1]) == ([0, 1], 2)
    kv.cache_full_blocks(1, SEGMENTS, 40, preempting=True)  # still two full blocks: nothing more
    assert (kv.blocks[1], kv.anonymous[1]) == ([0, 1], 2)
    kv.cache_full_blocks(1, SEGMENTS, 64, preempting=True)
    assert (kv.blocks[1], kv.anonymous[1]) == ([0, 1, 2, 3], 0)
    assert len(kv.pool.cached) == 4
    kv.pool.check()


def test_a_batch_of_appends_takes_anonymous_blocks_before_each_shared_request() -> None:
    kv = KVCacheManager(num_blocks=6, block_size=16)
    assert kv.allocate(9, 96)  # a shared request holds blocks 0..5
    kv.free(9)  # queue: 5, 4, 3, 2, 1, 0
    for rid in (1, 3):
        kv.mark_private(rid)
    assert kv.allocate(1, 1)  # takes block 5 (its id goes spare)
    assert kv.allocate(2, 1)  # shared: block 4
    assert kv.allocate(3, 1)  # takes block 3
    assert kv.blocks[2] == [4]
    kv.append_blocks([1, 2, 3])  # 1 takes block 2 first, so 2 gets block 1; 3 takes block 0
    assert kv.blocks[2] == [4, 1]
    assert (kv.anonymous[1], kv.anonymous[2], kv.anonymous[3]) == (2, 0, 2)
    assert (kv.pool.num_free, kv.pool.num_anonymous_held) == (0, 4)
    kv.pool.check()


def test_anonymous_appends_by_count_take_what_appends_by_id_take() -> None:
    """append_anonymous((rid, n), ...) leaves the pool and the counts as append_blocks given each id n times: the
    blocks come off the queue's front in one go (an identified free block among them loses its hash, its id goes
    spare), whatever order the counts come in."""

    def filled() -> KVCacheManager:
        kv = KVCacheManager(num_blocks=8, block_size=16)
        assert kv.allocate(9, 48)  # a shared request: blocks 0, 1, 2, cached, then freed (queue: 3..7 run, 2, 1, 0)
        kv.cache_full_blocks(9, [(9, 48)], 48)
        kv.free(9)
        for rid in (1, 2):
            kv.mark_private(rid)
            assert kv.is_anonymous(rid)
            assert kv.allocate(rid, 16)
        return kv

    by_id, by_count = filled(), filled()
    assert not by_id.is_anonymous(9)
    by_id.append_blocks([1, 2, 1, 2, 2])
    by_count.append_anonymous([(2, 3), (1, 2)])
    for kv in (by_id, by_count):
        kv.pool.check()
    assert by_count.anonymous == by_id.anonymous == {1: 3, 2: 4}
    assert by_count.pool.free_order() == by_id.pool.free_order() == [0]  # blocks 2 and 1 taken, their hashes gone
    assert by_count.pool.cached == by_id.pool.cached and len(by_count.pool.cached) == 1
    by_count.append_anonymous([])
    assert by_count.pool.num_free == 1


def test_appends_without_caching_are_all_anonymous() -> None:
    kv = KVCacheManager(num_blocks=4, block_size=16, enable_caching=False)
    assert kv.allocate(1, 16) and kv.allocate(2, 16)
    kv.append_blocks([1, 2])
    assert (kv.blocks[1], kv.anonymous[1], kv.anonymous[2]) == ([], 2, 2)
    assert kv.pool.num_free == 0 and kv.pool.ref_counts == []
    kv.pool.check()


def test_append_block_fails_only_when_no_block_is_free() -> None:
    kv = KVCacheManager(num_blocks=2, block_size=16)
    assert kv.allocate(1, 16)
    assert kv.append_block(1)
    assert kv.blocks[1] == [0, 1]
    assert not kv.append_block(1)
    assert kv.blocks[1] == [0, 1]


def test_blocks_needed_counts_held_blocks_of_both_kinds() -> None:
    kv = KVCacheManager(num_blocks=8, block_size=16)
    kv.mark_private(1)
    assert kv.allocate(1, 20)  # 2 anonymous blocks
    assert kv.blocks_needed(1, 32) == 0
    assert kv.blocks_needed(1, 33) == 1
    assert kv.blocks_needed(1, 80) == 3
    assert kv.blocks_needed(7, 17) == 2  # a request holding nothing
    assert kv.num_held(7) == 0


def test_the_full_prompt_reserve_must_fit_but_only_the_chunk_is_taken() -> None:
    kv = KVCacheManager(num_blocks=3, block_size=16)
    assert not kv.allocate(1, 16, reserve_tokens=64)  # 4 blocks reserved > 3 free
    assert kv.pool.num_free == 3 and 1 not in kv.blocks
    assert kv.allocate(1, 16, reserve_tokens=48)  # 3 blocks fit; one is taken
    assert kv.blocks[1] == [0] and kv.pool.num_free == 2
    assert not kv.allocate(1, 32, reserve_tokens=80)  # live: holds 1, reserve needs 4 more > 2
    assert kv.allocate(1, 32, reserve_tokens=48)  # needs 1 more, reserve 2 more: fits
    assert kv.blocks[1] == [0, 1]


def test_a_reserve_counts_free_hit_blocks_as_taken() -> None:
    kv = KVCacheManager(num_blocks=4, block_size=16)
    assert kv.allocate(1, 32)
    kv.cache_full_blocks(1, SEGMENTS, 32)
    kv.free(1)  # blocks 0 and 1 free and cached
    hit = kv.find_cached(2, SEGMENTS, 48)
    assert hit == CacheHit((0, 1), 32)
    # 48 tokens need 1 block past the hit, but the 80-token reserve needs 3: only 2 are free besides the hits
    assert not kv.allocate(2, 48, hit, reserve_tokens=80)
    assert kv.allocate(2, 48, hit, reserve_tokens=64)
    assert kv.blocks[2] == [0, 1, 2]


def test_blocks_already_stored_are_not_stored_again() -> None:
    kv = KVCacheManager(num_blocks=16, block_size=16)
    kv.tier = CpuTier(capacity_blocks=4)
    assert kv.allocate(1, 64) and kv.allocate(2, 64)
    kv.cache_full_blocks(1, SEGMENTS, 32)  # stores request 1's blocks 0, 1
    kv.cache_full_blocks(2, [(6, 64)], 32)  # then request 2's: the tier is full
    kv.cache_full_blocks(1, SEGMENTS, 48)  # only block 2 is new: it evicts request 1's block 0 (least recent)
    assert kv.tier.stored_blocks == 5
    assert kv.find_offloaded(1, 65, 0) == 0  # block 0 is gone, so nothing from the start
    assert kv.find_offloaded(2, 33, 0) == 2  # request 2's both still held


def test_a_live_request_grows_by_exactly_what_it_lacks() -> None:
    kv = KVCacheManager(num_blocks=4, block_size=16)
    assert kv.allocate(1, 16)
    assert kv.allocate(1, 16) and kv.blocks[1] == [0]  # nothing lacking
    assert kv.allocate(1, 17) and kv.blocks[1] == [0, 1]  # one block more
    assert kv.allocate(1, 64) and kv.blocks[1] == [0, 1, 2, 3]  # exactly all free blocks
    assert not kv.allocate(1, 65)
    assert kv.pool.num_free == 0


def test_a_hit_covering_the_whole_chunk_takes_no_new_block() -> None:
    kv = KVCacheManager(num_blocks=4, block_size=16)
    assert kv.allocate(1, 32)
    kv.cache_full_blocks(1, SEGMENTS, 32)
    hit = kv.find_cached(2, SEGMENTS, 33)
    assert hit == CacheHit((0, 1), 32)
    assert kv.allocate(2, 32, hit)  # both blocks shared, nothing new
    assert kv.blocks[2] == [0, 1] and kv.pool.ref_counts == [2, 2] and kv.pool.num_free == 2
    # a new request whose hit blocks are held (not free) has all free blocks available
    assert not kv.allocate(3, 65, hit)  # 3 new blocks > 2 free
    assert kv.allocate(3, 64, hit)  # 2 new blocks: exactly the 2 free
    assert kv.blocks[3] == [0, 1, 2, 3] and kv.pool.num_free == 0


def test_mode_none_holds_nothing_and_static_reserves_once() -> None:
    none = KVCacheManager(num_blocks=1, block_size=16, mode="none")
    assert none.allocate(1, 10_000) and none.append_block(1)
    none.append_blocks([1])
    assert none.blocks == {} and none.pool.num_free == 1
    static = KVCacheManager(num_blocks=8, block_size=16, mode="static", max_model_len=33)
    assert static.allocate(1, 5) and static.num_held(1) == 3  # ceil(33 / 16) reserved up front
    assert static.allocate(1, 33) and static.num_held(1) == 3  # a live request takes no more
    assert static.append_block(1) and static.num_held(1) == 3
    static.append_blocks([1])
    assert static.num_held(1) == 3 and static.pool.num_free == 5


def test_admission_counters_add_up_tokens_only_with_caching() -> None:
    kv = KVCacheManager(num_blocks=4, block_size=16)
    kv.record_admission(100, 32)
    kv.record_admission(50, 16)
    assert (kv.query_tokens, kv.hit_tokens) == (150, 48)
    off = KVCacheManager(num_blocks=4, block_size=16, mode="static", max_model_len=16)
    off.record_admission(100, 32)
    assert (off.query_tokens, off.hit_tokens) == (0, 0)


def test_freeing_an_unknown_request_is_a_no_op_and_forget_clears_private() -> None:
    kv = KVCacheManager(num_blocks=4, block_size=16)
    kv.free(42)
    assert kv.pool.num_free == 4
    kv.mark_private(1)
    kv.forget(1)
    assert kv.allocate(1, 16) and kv.blocks[1] == [0]  # shared again: identified blocks


def test_forget_drops_the_memoised_hashes() -> None:
    kv = KVCacheManager(num_blocks=4, block_size=16)
    assert kv.allocate(1, 32)
    kv.cache_full_blocks(1, [(6, 32)], 32)
    assert kv.find_cached(2, [(7, 33)], 33) == NO_HIT  # request 2's hashes are memoised for content 7
    kv.forget(2)
    assert kv.find_cached(2, [(6, 33)], 33) == CacheHit((0, 1), 32)  # recomputed for its new content


def test_the_cpu_tier_is_asked_past_the_gpu_hit_up_to_the_usable_blocks() -> None:
    kv = KVCacheManager(num_blocks=8, block_size=16)
    assert kv.find_offloaded(1, 65, 0) == 0  # no tier
    kv.tier = CpuTier(capacity_blocks=10)
    assert kv.find_offloaded(1, 65, 0) == 0  # request 1 was never hashed
    assert kv.allocate(1, 64)
    kv.cache_full_blocks(1, SEGMENTS, 64)  # stores all four hashes in the tier
    assert kv.tier.stored_blocks == 4
    assert kv.find_offloaded(1, 65, 0) == 4
    assert kv.find_offloaded(1, 65, 1) == 3
    assert kv.find_offloaded(1, 64, 0) == 3  # 63 tokens usable: three blocks
    assert kv.find_offloaded(1, 49, 2) == 1
