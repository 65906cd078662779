"""Per-request block tables over a BlockPool, for the three KV modes users compare.

- paged (vLLM V1): blocks allocated as tokens are scheduled; prefix hits reuse cached full blocks; the
  hit length is capped at num_tokens - 1 so the last prompt token is always computed (a full hit
  recomputes the whole last block, as allocation is block-aligned).
- static: each admitted sequence reserves max_model_len tokens of blocks up front (pre-PagedAttention
  engines); no prefix caching.
- none: no KV cache at all; nothing is allocated (the engine recomputes the whole context every step).

Queries and hits are counted in tokens, as vLLM's prefix_cache_queries / prefix_cache_hits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ttftsim.kvcache.block_pool import BlockPool
from ttftsim.kvcache.hashing import Segment, extend_block_hashes


@dataclass(frozen=True, slots=True)
class CacheHit:
    """Blocks a new request can reuse and the tokens they cover."""

    blocks: tuple[int, ...] = ()
    num_tokens: int = 0


NO_HIT = CacheHit()


class KVCacheManager:
    """Block tables by request id. Invariant: the blocks of all live requests are exactly the held blocks."""

    def __init__(
        self, num_blocks: int, block_size: int, mode: str = "paged", enable_caching: bool = True, max_model_len: int = 0
    ) -> None:
        self.block_size = block_size
        self.mode = mode
        self.pool = BlockPool(num_blocks, enable_caching and mode == "paged")
        self._static_blocks = -(-max_model_len // block_size)
        self.blocks: dict[int, list[int]] = {}
        self._hashes: dict[int, list[int]] = {}
        self._num_hashed: dict[int, int] = {}
        self.query_tokens = 0
        self.hit_tokens = 0

    @property
    def caching(self) -> bool:
        return self.pool.enable_caching

    def usage(self) -> float:
        return self.pool.usage()

    def find_cached(self, request_id: int, segments: Sequence[Segment], num_tokens: int) -> CacheHit:
        """Longest cached prefix of a request about to be admitted (at most num_tokens - 1 tokens)."""
        if not self.caching:
            return NO_HIT
        usable = (num_tokens - 1) // self.block_size
        hashes = extend_block_hashes(self._hashes.setdefault(request_id, []), segments, self.block_size, usable)
        hits = self.pool.lookup(hashes, usable)
        return CacheHit(tuple(hits), len(hits) * self.block_size) if hits else NO_HIT

    def record_admission(self, num_tokens: int, hit_tokens: int) -> None:
        """Count one admitted request's prefix-cache query and hit, in tokens."""
        if self.caching:
            self.query_tokens += num_tokens
            self.hit_tokens += hit_tokens

    def allocate(self, request_id: int, num_tokens_after: int, hit: CacheHit = NO_HIT, reserve_tokens: int = 0) -> bool:
        """Give a request blocks for num_tokens_after tokens (hit blocks first); False, changing nothing,
        when the free queue cannot supply them (or cannot cover reserve_tokens, for full-prompt admission)."""
        if self.mode == "none":
            return True
        held = self.blocks.get(request_id)
        if self.mode == "static":
            return held is not None or self._allocate_new(request_id, self._static_blocks, hit)
        have = len(held) if held is not None else len(hit.blocks)
        needed = -(-num_tokens_after // self.block_size) - have
        reserve = -(-reserve_tokens // self.block_size) - have
        available = self.pool.num_free - (self.pool.count_free_among(hit.blocks) if held is None else 0)
        if max(needed, reserve) > available:
            return False
        if held is None:
            return self._allocate_new(request_id, max(needed, 0), hit)
        if needed > 0:
            held.extend(self.pool.allocate(needed))
        return True

    def append_block(self, request_id: int) -> bool:
        """One more block for a running request whose next token starts a new block; False if none free."""
        if self.mode != "paged":
            return True
        if not self.pool.num_free:
            return False
        self.blocks[request_id].append(self.pool.allocate_one())
        return True

    def blocks_needed(self, request_id: int, num_tokens_after: int) -> int:
        """New blocks a running request needs to hold num_tokens_after tokens (paged mode)."""
        return max(0, -(-num_tokens_after // self.block_size) - len(self.blocks.get(request_id, ())))

    def _allocate_new(self, request_id: int, count: int, hit: CacheHit) -> bool:
        if count > self.pool.num_free - self.pool.count_free_among(hit.blocks):
            return False
        self.pool.touch(hit.blocks)
        self.blocks[request_id] = [*hit.blocks, *self.pool.allocate(count)]
        self._num_hashed[request_id] = len(hit.blocks)
        return True

    def cache_full_blocks(self, request_id: int, segments: Sequence[Segment], num_computed: int) -> None:
        """Hash and register the request's blocks that are full after num_computed tokens."""
        if not self.caching:
            return
        full = num_computed // self.block_size
        done = self._num_hashed.get(request_id, 0)
        if full <= done:
            return
        hashes = extend_block_hashes(self._hashes.setdefault(request_id, []), segments, self.block_size, full)
        self.pool.cache_blocks(self.blocks[request_id], hashes, done, full)
        self._num_hashed[request_id] = full

    def free(self, request_id: int) -> None:
        """Release a finished or preempted request's blocks (they stay cached until evicted)."""
        held = self.blocks.pop(request_id, None)
        if held is not None:
            self.pool.free(held)
        self._num_hashed.pop(request_id, None)

    def forget(self, request_id: int) -> None:
        """Drop a finished request's memoised hashes."""
        self._hashes.pop(request_id, None)
