"""The pool of KV blocks: allocation, reference counts, prefix-cache map and LRU eviction.

Mirrors vLLM V1's BlockPool and FreeKVCacheBlockQueue: free blocks sit in one queue, least recently used
at the front; allocation pops from the front and evicts the popped block's cached hash; a freed request's
blocks are appended in reverse order, so the tail of a chain is evicted before its head; a cache hit on a
free block takes it out of the queue ("touch"). Block ids run 0..num_blocks-1 and start in id order.

Invariant: a block is in the free queue iff its ref count is 0; num_free + blocks held == num_blocks.
The hash map holds at most one block per hash, and cached[h] == b implies block_hash[b] == h (eviction
removes the entry), so every entry is a valid hit and the map never grows beyond the pool.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence


class BlockPool:
    """Blocks with reference counts and an optional prefix-cache map (hash -> block id)."""

    def __init__(self, num_blocks: int, enable_caching: bool = True) -> None:
        self.num_blocks = num_blocks
        self.enable_caching = enable_caching
        self.ref_counts = [0] * num_blocks
        self.block_hash: list[int | None] = [None] * num_blocks
        self.cached: dict[int, int] = {}
        # a doubly linked list in C: O(1) pop from the front, append, and removal of any block
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self.num_evictions = 0

    @property
    def num_free(self) -> int:
        return len(self._free)

    def free_order(self) -> list[int]:
        """Free block ids, next to be evicted first (for tests and debugging)."""
        return list(self._free)

    def usage(self) -> float:
        return 1.0 - len(self._free) / self.num_blocks if self.num_blocks else 0.0

    def allocate(self, count: int) -> list[int]:
        """Take `count` blocks from the front of the free queue, evicting their cached hashes."""
        free = self._free
        if count > len(free):
            raise RuntimeError(f"allocate({count}) with {len(free)} free blocks")
        pop = free.popitem
        blocks = [pop(last=False)[0] for _ in range(count)]
        refs, owner = self.ref_counts, self.block_hash
        for block in blocks:
            refs[block] = 1
            if owner[block] is not None:
                self._evict(block)
        return blocks

    def allocate_one(self) -> int:
        """allocate(1) without building a list (a decode crossing into a new block)."""
        block = self._free.popitem(last=False)[0]
        self.ref_counts[block] = 1
        if self.block_hash[block] is not None:
            self._evict(block)
        return block

    def _evict(self, block: int) -> None:
        """Drop a reallocated block's hash from the map (only if the map points at this block)."""
        old = self.block_hash[block]
        self.block_hash[block] = None
        if self.cached.get(old) == block:  # type: ignore[arg-type]
            del self.cached[old]  # type: ignore[arg-type]
        self.num_evictions += 1

    def touch(self, blocks: Iterable[int]) -> None:
        """Take a reference on cache-hit blocks, removing free ones from the free queue."""
        for block in blocks:
            if self.ref_counts[block] == 0:
                del self._free[block]
            self.ref_counts[block] += 1

    def free(self, blocks: Sequence[int]) -> None:
        """Drop one reference on each block; blocks reaching 0 join the queue tail, last block first."""
        refs, free = self.ref_counts, self._free
        for block in reversed(blocks):
            refs[block] -= 1
            if not refs[block]:
                free[block] = None

    def cache_blocks(self, blocks: Sequence[int], hashes: Sequence[int], start: int, end: int) -> None:
        """Record the hashes of blocks[start:end], which just became full."""
        if not self.enable_caching:
            return
        owner, cached = self.block_hash, self.cached
        for index in range(start, end):
            block, block_hash = blocks[index], hashes[index]
            if owner[block] is None:
                owner[block] = block_hash
                cached.setdefault(block_hash, block)  # a duplicate of a cached block stays unmapped

    def lookup(self, hashes: Sequence[int], limit: int | None = None) -> list[int]:
        """Blocks of the longest cached prefix of `hashes` (of its first `limit` entries)."""
        hits = []
        cached = self.cached
        for block_hash in hashes[:limit] if limit is not None and limit < len(hashes) else hashes:
            block = cached.get(block_hash)
            if block is None:
                break
            hits.append(block)
        return hits

    def check(self) -> None:
        """Raise if the invariants do not hold (used by property tests)."""
        free = set(self._free)
        for block, refs in enumerate(self.ref_counts):
            if refs < 0 or (refs == 0) != (block in free):
                raise AssertionError(f"block {block}: ref count {refs}, in free queue {block in free}")
        for block_hash, block in self.cached.items():
            if self.block_hash[block] != block_hash:
                raise AssertionError(f"hash map points at block {block}, which no longer holds that hash")

    def count_free_among(self, blocks: Iterable[int]) -> int:
        return sum(1 for block in blocks if self.ref_counts[block] == 0)
