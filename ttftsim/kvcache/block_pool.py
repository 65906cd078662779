"""The pool of KV blocks: allocation, reference counts, prefix-cache map and LRU eviction.

Mirrors vLLM V1's BlockPool and FreeKVCacheBlockQueue: free blocks sit in one queue, least recently used
at the front; allocation pops from the front and evicts the popped block's cached hash; a freed request's
blocks are appended in reverse order, so the tail of a chain is evicted before its head; a cache hit on a
free block takes it out of the queue ("touch").

Speed: a block only needs an identity while a hash can find it. Blocks of requests whose content no
other request can share ("private": a unique first content id makes every chained hash unique) are
anonymous: held as a count per request, and freed as a run of that many blocks at the queue tail. A
run in the queue is one entry (key < 0, value = its length), so taking or returning a thousand anonymous
blocks is one dictionary operation. Identified blocks (key >= 0, value 0) get ids as they leave a run:
0, 1, 2, ... in queue order, then ids recycled from identified blocks that became anonymous (last
recycled first). When every request shares (the tests of exact ids), ids run 0..num_blocks-1 in id
order, as in vLLM. Positions in the queue, and so the eviction order, are those vLLM has.

Invariants: num_free = identified free blocks + run lengths; an identified block is in the free queue
iff its ref count is 0; free + held (identified and anonymous) = num_blocks; the hash map holds at most
one block per hash, and cached[h] == b implies block_hash[b] == h, so every entry is a valid hit.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence


class BlockPool:
    """Blocks with reference counts and an optional prefix-cache map (hash -> block id)."""

    def __init__(self, num_blocks: int, enable_caching: bool = True) -> None:
        self.num_blocks = num_blocks
        self.enable_caching = enable_caching
        self.ref_counts: list[int] = []  # by block id; ids are minted as blocks first need one
        self.block_hash: list[int | None] = []
        self.cached: dict[int, int] = {}
        # a doubly linked list in C: O(1) pop from either end, append, and removal of any entry
        self._free: OrderedDict[int, int] = OrderedDict()
        self._next_run = -1
        self._spare_ids: list[int] = []
        self.num_free = 0
        self.num_anonymous_held = 0
        self.num_evictions = 0
        if num_blocks:
            self._append_run(num_blocks)

    def usage(self) -> float:
        return 1.0 - self.num_free / self.num_blocks if self.num_blocks else 0.0

    def free_order(self) -> list[int]:
        """Free blocks, next to be evicted first; an anonymous block shows as -1 (tests, debugging)."""
        order: list[int] = []
        for key, length in self._free.items():
            order.extend([key] if key >= 0 else [-1] * length)
        return order

    # ---- taking blocks from the front ----

    def allocate(self, count: int) -> list[int]:
        """Take `count` identified blocks from the front of the free queue, evicting their cached hashes."""
        if count > self.num_free:
            raise RuntimeError(f"allocate({count}) with {self.num_free} free blocks")
        blocks: list[int] = []
        free, refs = self._free, self.ref_counts
        while len(blocks) < count:
            key = next(iter(free))
            if key >= 0:
                free.popitem(last=False)
                if self.block_hash[key] is not None:
                    self._evict(key)
                blocks.append(key)
            else:
                take = min(free[key], count - len(blocks))
                self._shorten_head_run(key, take)
                blocks.extend(self._mint(take))
        for block in blocks:
            refs[block] = 1
        self.num_free -= count
        return blocks

    def take_anonymous(self, count: int) -> None:
        """Take `count` blocks from the front as anonymous blocks (a private request's)."""
        if count > self.num_free:
            raise RuntimeError(f"take_anonymous({count}) with {self.num_free} free blocks")
        free = self._free
        left = count
        while left:
            key = next(iter(free))
            if key < 0:
                take = min(free[key], left)
                self._shorten_head_run(key, take)
                left -= take
                continue
            free.popitem(last=False)
            if self.block_hash[key] is not None:
                self._evict(key)
            self._spare_ids.append(key)
            left -= 1
        self.num_free -= count
        self.num_anonymous_held += count

    def _shorten_head_run(self, key: int, take: int) -> None:
        free = self._free
        if free[key] == take:
            free.popitem(last=False)
        else:
            free[key] -= take

    def _mint(self, count: int) -> list[int]:
        """Ids for `count` blocks leaving a run: recycled ones first, then new ones."""
        spare, ids = self._spare_ids, list[int]()
        while spare and len(ids) < count:
            ids.append(spare.pop())
        fresh = count - len(ids)
        if fresh:
            start = len(self.ref_counts)
            ids.extend(range(start, start + fresh))
            self.ref_counts.extend([0] * fresh)
            self.block_hash.extend([None] * fresh)
        return ids

    def _evict(self, block: int) -> None:
        """Drop a reallocated block's hash from the map (only if the map points at this block)."""
        old = self.block_hash[block]
        self.block_hash[block] = None
        if self.cached.get(old) == block:  # type: ignore[arg-type]
            del self.cached[old]  # type: ignore[arg-type]
        self.num_evictions += 1

    # ---- returning blocks to the tail ----

    def free(self, blocks: Sequence[int]) -> None:
        """Drop one reference on each block; blocks reaching 0 join the queue tail, last block first."""
        refs, free = self.ref_counts, self._free
        for block in reversed(blocks):
            refs[block] -= 1
            if not refs[block]:
                free[block] = 0
                self.num_free += 1

    def free_anonymous(self, count: int) -> None:
        """Return `count` anonymous blocks to the tail as one run."""
        if count:
            self.num_anonymous_held -= count
            self._append_run(count)

    def _append_run(self, count: int) -> None:
        free = self._free
        tail = next(reversed(free)) if free else 0
        if tail < 0:
            free[tail] += count
        else:
            free[self._next_run] = count
            self._next_run -= 1
        self.num_free += count

    def identify(self, count: int) -> list[int]:
        """Give ids to `count` held anonymous blocks (a private request about to free hashed blocks)."""
        ids = self._mint(count)
        for block in ids:
            self.ref_counts[block] = 1
        self.num_anonymous_held -= count
        return ids

    # ---- the prefix cache ----

    def touch(self, blocks: Iterable[int]) -> None:
        """Take a reference on cache-hit blocks, removing free ones from the free queue."""
        for block in blocks:
            if self.ref_counts[block] == 0:
                del self._free[block]
                self.num_free -= 1
            self.ref_counts[block] += 1

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

    def count_free_among(self, blocks: Iterable[int]) -> int:
        return sum(1 for block in blocks if self.ref_counts[block] == 0)

    def check(self) -> None:
        """Raise if the invariants do not hold (used by property tests)."""
        identified_free = {key for key in self._free if key >= 0}
        runs = sum(length for key, length in self._free.items() if key < 0)
        if self.num_free != len(identified_free) + runs:
            raise AssertionError(f"num_free {self.num_free} != {len(identified_free)} identified + {runs} in runs")
        spare = set(self._spare_ids)
        held = 0
        for block, refs in enumerate(self.ref_counts):
            if block in spare:
                continue
            if refs < 0 or (refs == 0) != (block in identified_free):
                raise AssertionError(f"block {block}: ref count {refs}, in free queue {block in identified_free}")
            held += refs > 0
        if self.num_free + held + self.num_anonymous_held != self.num_blocks:
            raise AssertionError(
                f"{self.num_free} free + {held} held + {self.num_anonymous_held} anonymous != {self.num_blocks}"
            )
        for block_hash, block in self.cached.items():
            if block in spare or self.block_hash[block] != block_hash:
                raise AssertionError(f"hash map points at block {block}, which no longer holds that hash")
