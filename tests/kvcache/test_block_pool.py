"""Exact block ids, reference counts and eviction order of the block pool and the KV manager."""

from __future__ import annotations

from ttftsim.kvcache.block_pool import BlockPool
from ttftsim.kvcache.hashing import block_hashes
from ttftsim.kvcache.manager import KVCacheManager


def test_allocation_takes_lowest_free_ids_first() -> None:
    pool = BlockPool(6)
    assert pool.allocate(2) == [0, 1]
    assert pool.allocate(3) == [2, 3, 4]
    assert pool.num_free == 1
    assert pool.ref_counts == [1, 1, 1, 1, 1]  # ids are minted as blocks leave the initial run
    assert pool.free_order() == [-1]


def test_freed_chain_is_appended_tail_first_so_its_tail_is_evicted_first() -> None:
    pool = BlockPool(5)
    chain = pool.allocate(3)  # [0, 1, 2]
    pool.free(chain)
    assert pool.free_order() == [-1, -1, 2, 1, 0]  # blocks 3 and 4 never had an id yet
    assert pool.allocate(3) == [3, 4, 2]


def test_touch_removes_cached_free_block_from_queue_and_counts_refs() -> None:
    pool = BlockPool(4)
    blocks = pool.allocate(2)
    pool.cache_blocks(blocks, [111, 222], 0, 2)
    pool.free(blocks)
    assert pool.lookup([111, 222, 333]) == [0, 1]
    pool.touch([0, 1])
    assert pool.ref_counts[:2] == [1, 1]
    assert pool.free_order() == [-1, -1]
    pool.touch([0])
    assert pool.ref_counts[0] == 2


def test_eviction_drops_cached_hash_on_reallocation() -> None:
    pool = BlockPool(2)
    blocks = pool.allocate(2)
    pool.cache_blocks(blocks, [7, 8], 0, 2)
    pool.free(blocks)  # free order: 1, 0
    assert pool.allocate(1) == [1]
    assert pool.num_evictions == 1
    assert pool.lookup([7, 8]) == [0]  # block 1 (hash 8) is gone; block 0 still holds hash 7
    assert pool.lookup([8]) == []


def test_chained_hashes_share_prefixes_only() -> None:
    a = block_hashes([(1, 40), (2, 24)], 16, 4)
    b = block_hashes([(1, 40), (3, 24)], 16, 4)
    c = block_hashes([(9, 40), (2, 24)], 16, 4)
    assert a[:2] == b[:2] and a[2:] != b[2:]  # block 2 spans tokens 32-47: prefix 40 then the question
    assert all(x != y for x, y in zip(a, c, strict=True))
    assert block_hashes([(1, 40), (2, 24)], 16, 4, a[:2]) == a  # resuming from memoised hashes


def test_prefix_hit_is_capped_at_one_token_short_of_the_prompt() -> None:
    kv = KVCacheManager(num_blocks=10, block_size=16)
    segments = [(5, 32)]
    assert kv.allocate(1, 32)
    kv.cache_full_blocks(1, segments, 32)
    kv.free(1)
    hit = kv.find_cached(2, segments, 32)
    assert hit.num_tokens == 16  # a full hit still recomputes the whole last block
    assert hit.blocks == (0,)
    assert kv.find_cached(3, [(5, 32), (6, 1)], 33).blocks == (0, 1)


def test_allocate_refuses_without_side_effects_and_counts_free_hit_blocks() -> None:
    kv = KVCacheManager(num_blocks=4, block_size=16)
    assert kv.allocate(1, 32)
    kv.cache_full_blocks(1, [(5, 48)], 32)
    kv.free(1)
    hit = kv.find_cached(2, [(5, 48)], 48)
    assert hit.blocks == (0, 1)
    assert not kv.allocate(2, 48 + 48, hit)  # 2 hit blocks (free, so they count) + 4 new > 4
    assert kv.pool.num_free == 4 and kv.pool.ref_counts == [0, 0]
    assert kv.allocate(2, 48, hit)
    # free queue was [anonymous x2, 1, 0]; touching the hits leaves the two: the new block is 2
    assert kv.blocks[2] == [0, 1, 2]


def test_static_mode_reserves_max_model_len() -> None:
    kv = KVCacheManager(num_blocks=10, block_size=16, mode="static", max_model_len=64)
    assert kv.allocate(1, 5)
    assert kv.num_held(1) == 4 and kv.blocks[1] == []  # no caching: anonymous blocks
    assert kv.allocate(2, 5)
    assert not kv.allocate(3, 5)  # 2 left < 4
    kv.free(1)
    assert kv.pool.num_free == 6
