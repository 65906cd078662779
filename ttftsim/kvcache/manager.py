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
from ttftsim.kvcache.offload import ChunkLoad, CpuTier, LMCacheTiers


@dataclass(frozen=True, slots=True)
class CacheHit:
    """Blocks a new request can reuse and the tokens they cover."""

    blocks: tuple[int, ...] = ()
    num_tokens: int = 0


NO_HIT = CacheHit()


class KVCacheManager:
    """Block tables by request id: identified blocks (ids, a prefix of the table) then anonymous ones (a
    count; see block_pool). Invariant: the blocks of all live requests are exactly the held blocks.

    A private request (mark_private: no other request can share its content) takes anonymous blocks and
    is not hashed as it runs: nothing but itself could ever hit its blocks, and only after it is
    preempted, so its full blocks get ids and hashes then (cache_full_blocks(..., preempting=True)). Its
    re-admission finds them exactly as vLLM, which hashes every block as it fills, would."""

    def __init__(
        self, num_blocks: int, block_size: int, mode: str = "paged", enable_caching: bool = True, max_model_len: int = 0
    ) -> None:
        self.block_size = block_size
        self.mode = mode
        self.pool = BlockPool(num_blocks, enable_caching and mode == "paged")
        self._static_blocks = -(-max_model_len // block_size)
        self.blocks: dict[int, list[int]] = {}
        self.anonymous: dict[int, int] = {}
        self._private: set[int] = set()
        self._hashes: dict[int, list[int]] = {}
        self._num_hashed: dict[int, int] = {}
        self.query_tokens = 0
        self.hit_tokens = 0
        self.hashes_private_as_run = False  # private requests are hashed only when preempted (windowed.py: as they run)
        self.tier: CpuTier | None = None  # host-memory KV offloading (offload.py), when configured
        self.lmcache: LMCacheTiers | None = None  # LMCache's tiers (offload.py), when configured

    @property
    def caching(self) -> bool:
        return self.pool.enable_caching

    @property
    def hashes_private(self) -> bool:
        """Whether a private request's full blocks are registered as it runs (the scheduler asks): always with
        a CPU tier, which stores every filled block (mark_private)."""
        return self.hashes_private_as_run or self.tier is not None

    def usage(self) -> float:
        return self.pool.usage()

    def mark_private(self, request_id: int) -> None:
        """No other request can share this one's content (its first content id is its own). Not with a CPU
        tier: every block filled on the GPU is stored there, a private one too, and takes its room (vLLM's
        offloading connector stores each request's full blocks, whoever could share them), so such a request
        is hashed as it runs."""
        if self.tier is None:
            self._private.add(request_id)

    def is_anonymous(self, request_id: int) -> bool:
        """Whether the request's new blocks are anonymous (a count): no prefix cache, or a private request."""
        return not self.caching or request_id in self._private

    def num_held(self, request_id: int) -> int:
        return len(self.blocks.get(request_id, ())) + self.anonymous.get(request_id, 0)

    def find_cached(self, request_id: int, segments: Sequence[Segment], num_tokens: int) -> CacheHit:
        """Longest cached prefix of a request about to be admitted (at most num_tokens - 1 tokens)."""
        if not self.caching or (request_id in self._private and request_id not in self._hashes):
            return NO_HIT
        usable = (num_tokens - 1) // self.block_size
        hashes = extend_block_hashes(self._hashes.setdefault(request_id, []), segments, self.block_size, usable)
        hits = self.pool.lookup(hashes, usable)
        return CacheHit(tuple(hits), len(hits) * self.block_size) if hits else NO_HIT

    def find_offloaded(self, request_id: int, num_tokens: int, gpu_hit_blocks: int) -> int:
        """Blocks after a GPU hit of gpu_hit_blocks that the CPU tier holds (0 without one); call after
        find_cached, which computed the request's block hashes."""
        if self.tier is None or request_id not in self._hashes:
            return 0
        usable = (num_tokens - 1) // self.block_size
        return self.tier.lookup(self._hashes[request_id][:usable], gpu_hit_blocks)

    def find_in_lmcache(
        self, request_id: int, segments: Sequence[Segment], num_tokens: int, gpu_hit_tokens: int, prompt_tokens: int
    ) -> ChunkLoad:
        """What LMCache holds of a request about to be admitted past its GPU hit (call after find_cached); a
        private request's chunks are stored under keys of their own (allocate), never found."""
        if self.lmcache is None:
            return ChunkLoad()
        if request_id in self._private and request_id not in self._hashes:
            return self.lmcache.lookup_private(request_id, prompt_tokens)
        full = num_tokens // self.block_size
        hashes = extend_block_hashes(self._hashes.setdefault(request_id, []), segments, self.block_size, full)
        return self.lmcache.lookup(request_id, hashes, num_tokens, gpu_hit_tokens, prompt_tokens)

    def with_transfers(self, compute_s: float) -> float:
        """The step just scheduled, compute_s long, with the LMCache copies it owes (offload.py step_s)."""
        return self.lmcache.step_s(compute_s) if self.lmcache is not None else compute_s

    def record_admission(self, num_tokens: int, hit_tokens: int) -> None:
        """Count one admitted request's prefix-cache query and hit, in tokens."""
        if self.caching:
            self.query_tokens += num_tokens
            self.hit_tokens += hit_tokens
        if self.lmcache is not None:  # vLLM: the connector is asked for the tokens past the GPU hit
            self.lmcache.query_tokens += num_tokens - hit_tokens

    def allocate(
        self,
        request_id: int,
        num_tokens_after: int,
        hit: CacheHit = NO_HIT,
        reserve_tokens: int = 0,
        computed_tokens: int = -1,
    ) -> bool:
        """Give a request blocks for num_tokens_after tokens (hit blocks first); False, changing nothing,
        when the free queue cannot supply them (or cannot cover reserve_tokens, for full-prompt admission).
        computed_tokens (a running request's, before this step) matters only to a sliding window (windowed.py)."""
        done = self._allocate(request_id, num_tokens_after, hit, reserve_tokens)
        if done and self.lmcache is not None and request_id in self._private:  # its chunks, never registered
            self.lmcache.store_private(request_id, num_tokens_after)
        return done

    def _allocate(self, request_id: int, num_tokens_after: int, hit: CacheHit, reserve_tokens: int) -> bool:
        if self.mode == "none":
            return True
        live = request_id in self.blocks
        if self.mode == "static":
            return live or self._allocate_new(request_id, self._static_blocks, hit)
        have = self.num_held(request_id) if live else len(hit.blocks)
        needed = -(-num_tokens_after // self.block_size) - have
        reserve = -(-reserve_tokens // self.block_size) - have
        available = self.pool.num_free - (0 if live else self.pool.count_free_among(hit.blocks))
        if max(needed, reserve) > available:
            return False
        if not live:
            return self._allocate_new(request_id, max(needed, 0), hit)
        if needed > 0:
            self._grow(request_id, needed)
        return True

    def _grow(self, request_id: int, count: int) -> None:
        if self.is_anonymous(request_id):
            self.pool.take_anonymous(count)
            self.anonymous[request_id] += count
        else:
            self.blocks[request_id].extend(self.pool.allocate(count))

    def append_block(self, request_id: int) -> bool:
        """One more block for a running request whose next token starts a new block; False if none free."""
        if self.mode != "paged":
            return True
        if not self.pool.num_free:
            return False
        self._grow(request_id, 1)
        return True

    def append_blocks(self, request_ids: list[int]) -> None:
        """append_block for each request in order, when the free queue is known to cover them all; a
        stretch of anonymous requests takes its blocks in one go."""
        if self.mode != "paged":
            return
        private, anonymous, pending = self._private, self.anonymous, 0
        for request_id in request_ids:
            if request_id in private or not self.caching:
                anonymous[request_id] += 1
                pending += 1
                continue
            if pending:
                self.pool.take_anonymous(pending)
                pending = 0
            self.blocks[request_id].extend(self.pool.allocate(1))
        if pending:
            self.pool.take_anonymous(pending)

    def append_anonymous(self, counts: list[tuple[int, int]]) -> None:
        """append_blocks for anonymous requests (is_anonymous), `count` blocks more for each, when the free queue is
        known to cover them: the same counts and the same blocks out of the pool as append_blocks given each id
        `count` times, in any order (anonymous blocks have no identity, and the pool gives them in one go)."""
        if self.mode != "paged":
            return
        anonymous, total = self.anonymous, 0
        for request_id, count in counts:
            anonymous[request_id] += count
            total += count
        if total:
            self.pool.take_anonymous(total)

    def blocks_needed(self, request_id: int, num_tokens_after: int) -> int:
        """New blocks a running request needs to hold num_tokens_after tokens (paged mode)."""
        return max(0, -(-num_tokens_after // self.block_size) - self.num_held(request_id))

    def _allocate_new(self, request_id: int, count: int, hit: CacheHit) -> bool:
        if count > self.pool.num_free - self.pool.count_free_among(hit.blocks):
            return False
        self.pool.touch(hit.blocks)
        self.blocks[request_id] = list(hit.blocks)
        self.anonymous[request_id] = 0
        self._grow(request_id, count)
        self._num_hashed[request_id] = len(hit.blocks)
        return True

    def cache_full_blocks(
        self, request_id: int, segments: Sequence[Segment], num_computed: int, preempting: bool = False
    ) -> None:
        """Hash and register the request's blocks that are full after num_computed tokens (a private
        request's only when it is being preempted)."""
        if not self.caching or (request_id in self._private and not preempting):
            return
        full = num_computed // self.block_size
        done = self._num_hashed.get(request_id, 0)
        if full > done:
            ids = self.blocks[request_id]
            if full > len(ids):  # a private request's anonymous full blocks get ids
                count = full - len(ids)
                ids.extend(self.pool.identify(count))
                self.anonymous[request_id] -= count
            hashes = extend_block_hashes(self._hashes.setdefault(request_id, []), segments, self.block_size, full)
            self.pool.cache_blocks(ids, hashes, done, full)
            if self.tier is not None:
                self.tier.store(hashes[done:full])
            self._num_hashed[request_id] = full
        if self.lmcache is not None:  # its chunks stored as they complete (and its admission's load charged)
            self.lmcache.store(request_id, self._hashes.get(request_id, []), full)

    def free(self, request_id: int) -> None:
        """Release a finished or preempted request's blocks, last first (they stay cached until evicted)."""
        held = self.blocks.pop(request_id, None)
        if held is not None:
            self.pool.free_anonymous(self.anonymous.pop(request_id))
            self.pool.free(held)
        self._num_hashed.pop(request_id, None)

    def forget(self, request_id: int) -> None:
        """Drop a finished request's memoised hashes."""
        self._hashes.pop(request_id, None)
        self._private.discard(request_id)
        if self.lmcache is not None:
            self.lmcache.forget(request_id)
