"""Block tables of a model with sliding-window layers, one per KV-cache group, as vLLM 0.15.1's hybrid KV-cache
manager keeps them: the blocks that fall out of the window are freed as the request runs.

vLLM (v1/core/kv_cache_coordinator.py, single_type_kv_cache_manager.py) gives every KV-cache group (perf/
kv_groups.py) its own block table per request, all drawn from one BlockPool whose block is one group's page
(num_blocks = MemoryPlan.vllm_num_blocks). A full-attention group keeps every block; a sliding-window group
(SlidingWindowManager) keeps only the blocks the next token can attend to:

- get_num_skipped_tokens(n) = max(0, n - sliding_window + 1) tokens of the n computed ones are outside the
  window; remove_skipped_blocks frees the whole blocks among them (last first, each replaced by the null block,
  stopping at the first one already null) at every allocate_slots, before the new blocks are counted, even when
  the allocation then fails (kv_cache_manager.py allocate_slots).
- A new request's hit: the full-attention groups take the longest cached prefix (every full group must hold
  each block: BlockPool.get_cached_block over the group ids); the sliding-window groups then search that prefix
  from its end for cdiv(sliding_window - 1, block_size) cached blocks in a row (the run that starts at block 0
  counts when shorter), and the hit is cut to what they found (HybridKVCacheCoordinator.find_longest_cache_hit:
  one pass for one full and one windowed kind). The hit's blocks before the window are null from the start
  (allocate_new_computed_blocks): they are neither touched nor counted.
- Blocks are allocated and freed group by group in vLLM's group order: each kind's groups in the order its first
  layer comes, the sliding-window groups first in every hybrid family we know (Gemma 2/3, gpt-oss, Cohere2: layer
  0 is windowed; kv_cache_utils.py _get_kv_cache_groups_uniform_page_size), each table freed last block first
  (coordinator.free, manager.free); only the hit search puts the full groups first. A block's prefix-cache key
  is its hash and its group (BlockHashWithGroupId).
- A private request (no other request can share its content) is hashed as it runs here, as vLLM hashes every
  block it allocates: the blocks it frees out of the window stay findable by itself after a preemption.

A model whose layers all share one window (Mistral-7B-v0.1, Phi-3-mini-4k) is one sliding-window group
(UnitaryKVCacheCoordinator). This manager is driven by allocate alone: the scheduler's cohort and the engine's
closed-form decode runs (which count one new block per block_size tokens) are off for it, and every step is
scheduled request by request. KV offloading, LMCache and a disaggregated pod's KV transfer are KV connectors, with
which vLLM's hybrid manager is off (replica.py hybrid_kv_cache): those engines keep every token (KVCacheManager).
"""

from __future__ import annotations

from collections.abc import Sequence

from ttftsim.config.resolved_engine import WindowedGroups
from ttftsim.kvcache.hashing import Segment, extend_block_hashes
from ttftsim.kvcache.manager import NO_HIT, CacheHit, KVCacheManager

NULL = -1  # vLLM's null block: a table entry whose block was freed (out of the window) or never taken
COHORT_OFF = "a windowed KV cache grows through allocate only (the scheduler's cohort is off for it)"


def group_hash(block_hash: int, group: int) -> int:
    """A block's prefix-cache key in one group (vLLM: BlockHashWithGroupId)."""
    return hash((block_hash, group))


class WindowedKVCacheManager(KVCacheManager):
    """Per-request tables, one per group (table[g][i]: the block of logical block i in group g, or NULL).
    Invariant: the non-null entries of all live tables are exactly the held blocks."""

    def __init__(self, groups: WindowedGroups, block_size: int, enable_caching: bool = True) -> None:
        super().__init__(groups.num_blocks, block_size, "paged", enable_caching)
        self.num_full = groups.full
        self.num_groups = groups.full + groups.windowed
        self.window = groups.window
        self.contiguous = -(-(groups.window - 1) // block_size)  # cached blocks in a row a windowed hit needs
        self.tables: dict[int, list[list[int]]] = {}  # per request: the full groups' tables, then the windowed
        self.hashes_private_as_run = True
        self._vllm_order = [*range(groups.full, self.num_groups), *range(groups.full)]  # windowed groups first

    def num_held(self, request_id: int) -> int:
        tables = self.tables.get(request_id)
        return 0 if tables is None else sum(1 for table in tables for block in table if block != NULL)

    def skipped_blocks(self, num_computed: int) -> int:
        """Whole blocks out of the window once num_computed tokens are computed."""
        return max(0, num_computed - self.window + 1) // self.block_size

    # ---- the prefix cache ----

    def find_cached(self, request_id: int, segments: Sequence[Segment], num_tokens: int) -> CacheHit:
        """The hit of a request about to be admitted (at most num_tokens - 1 tokens): its blocks group by
        group (each group's list as long as the hit, NULL before the window), flattened."""
        if not self.caching or (request_id in self._private and request_id not in self._hashes):
            return NO_HIT
        usable = (num_tokens - 1) // self.block_size
        hashes = extend_block_hashes(self._hashes.setdefault(request_id, []), segments, self.block_size, usable)
        full = self._full_hit(hashes[:usable])
        length = len(full[0]) if full else usable
        windowed = self._windowed_hit(hashes, length)
        length = len(windowed[0]) if windowed else length
        if not length:
            return NO_HIT
        flat = [block for table in full for block in table[:length]]
        for table in windowed:
            flat.extend(table)
        return CacheHit(tuple(flat), length * self.block_size)

    def _cached(self, block_hash: int, first: int, last: int) -> list[int] | None:
        """The blocks that groups first..last-1 cache under block_hash, or None unless every one does."""
        cached, found = self.pool.cached, []
        for group in range(first, last):
            block = cached.get(group_hash(block_hash, group))
            if block is None:
                return None
            found.append(block)
        return found

    def _full_hit(self, hashes: Sequence[int]) -> list[list[int]]:
        """FullAttentionManager.find_longest_cache_hit over the full groups: the longest cached prefix."""
        tables: list[list[int]] = [[] for _ in range(self.num_full)]
        if not self.num_full:
            return tables
        for block_hash in hashes:
            found = self._cached(block_hash, 0, self.num_full)
            if found is None:
                break
            for table, block in zip(tables, found, strict=True):
                table.append(block)
        return tables

    def _windowed_hit(self, hashes: Sequence[int], length: int) -> list[list[int]]:
        """SlidingWindowManager.find_longest_cache_hit over the first `length` blocks: from the end, the
        first run of `contiguous` cached blocks (earlier entries NULL), else the run that starts at block 0."""
        tables = [[NULL] * length for _ in range(self.num_groups - self.num_full)]
        run = 0
        for index in range(length - 1, -1, -1):
            found = self._cached(hashes[index], self.num_full, self.num_groups)
            if found is None:
                run = 0
                continue
            for table, block in zip(tables, found, strict=True):
                table[index] = block
            run += 1
            if run >= self.contiguous:
                for table in tables:
                    del table[index + run :]
                return tables
        for table in tables:
            del table[run:]
        return tables

    def cache_full_blocks(
        self, request_id: int, segments: Sequence[Segment], num_computed: int, preempting: bool = False
    ) -> None:
        """Hash and register the blocks that are full after num_computed tokens, in every group (a block
        already out of the window is not registered); a private request's too (module docstring)."""
        if not self.caching:
            return
        full = num_computed // self.block_size
        done = self._num_hashed.get(request_id, 0)
        if full <= done:
            return
        hashes = extend_block_hashes(self._hashes.setdefault(request_id, []), segments, self.block_size, full)
        owner, cached = self.pool.block_hash, self.pool.cached
        for group, table in enumerate(self.tables[request_id]):
            for index in range(done, full):
                block = table[index]
                if block != NULL and owner[block] is None:
                    key = group_hash(hashes[index], group)
                    owner[block] = key
                    cached.setdefault(key, block)
        self._num_hashed[request_id] = full

    # ---- allocation ----

    def allocate(
        self,
        request_id: int,
        num_tokens_after: int,
        hit: CacheHit = NO_HIT,
        reserve_tokens: int = 0,
        computed_tokens: int = -1,
    ) -> bool:
        """Blocks in every group for num_tokens_after tokens, after freeing what left the window of the
        computed_tokens already computed (a running request); False, changing no table but that freeing,
        when the free queue cannot supply them."""
        count = -(-num_tokens_after // self.block_size)
        needed = -(-max(num_tokens_after, reserve_tokens) // self.block_size)
        tables = self.tables.get(request_id)
        if tables is None:
            return self._admit(request_id, count, needed, hit)
        if computed_tokens >= 0:
            self._remove_skipped(tables, computed_tokens)
        if sum(max(needed - len(table), 0) for table in tables) > self.pool.num_free:
            return False
        self._extend(tables, count)
        return True

    def _admit(self, request_id: int, count: int, needed: int, hit: CacheHit) -> bool:
        length = hit.num_tokens // self.block_size
        skipped = self.skipped_blocks(hit.num_tokens)
        hits = [list(hit.blocks[group * length : (group + 1) * length]) for group in range(self.num_groups)]
        refs, wanted = self.pool.ref_counts, 0
        for group, blocks in enumerate(hits):
            if group >= self.num_full:  # the hit's blocks before the window are null from the start
                blocks[:skipped] = [NULL] * min(skipped, length)
                wanted += max(needed - max(skipped, length), 0)
            else:
                wanted += max(needed - length, 0)
            wanted += sum(1 for block in blocks if block != NULL and refs[block] == 0)
        if wanted > self.pool.num_free:
            return False
        for blocks in hits:
            self.pool.touch([block for block in blocks if block != NULL])
        self.tables[request_id] = hits
        self._num_hashed[request_id] = length
        self._extend(hits, count)
        return True

    def _extend(self, tables: list[list[int]], count: int) -> None:
        for group in self._vllm_order:
            table = tables[group]
            if count > len(table):
                table.extend(self.pool.allocate(count - len(table)))

    def _remove_skipped(self, tables: list[list[int]], num_computed: int) -> None:
        """SlidingWindowManager.remove_skipped_blocks in each windowed group: free the blocks out of the
        window, the last one first."""
        skipped = self.skipped_blocks(num_computed)
        if not skipped:
            return
        for table in tables[self.num_full :]:
            end = min(skipped, len(table))
            start = end
            while start > 0 and table[start - 1] != NULL:
                start -= 1
            if start < end:
                self.pool.free(table[start:end])  # frees from the end: the last block joins the queue first
                table[start:end] = [NULL] * (end - start)

    def blocks_needed(self, request_id: int, num_tokens_after: int) -> int:
        raise RuntimeError(COHORT_OFF)

    def append_block(self, request_id: int) -> bool:
        raise RuntimeError(COHORT_OFF)

    def append_blocks(self, request_ids: list[int]) -> None:
        raise RuntimeError(COHORT_OFF)

    def append_anonymous(self, counts: list[tuple[int, int]]) -> None:
        raise RuntimeError(COHORT_OFF)

    def free(self, request_id: int) -> None:
        """Release a finished or preempted request's blocks, group by group in vLLM's order, each table last
        block first."""
        tables = self.tables.pop(request_id, None)
        if tables is not None:
            for group in self._vllm_order:
                self.pool.free([block for block in tables[group] if block != NULL])
        self._num_hashed.pop(request_id, None)

    def check(self) -> None:
        """Raise unless the live tables hold exactly the pool's held blocks (tests)."""
        self.pool.check()
        held: dict[int, int] = {}
        for tables in self.tables.values():
            for table in tables:
                for block in table:
                    if block != NULL:
                        held[block] = held.get(block, 0) + 1
        for block, refs in enumerate(self.pool.ref_counts):
            if refs != held.get(block, 0):
                raise AssertionError(f"block {block}: ref count {refs}, held by {held.get(block, 0)} table entries")
