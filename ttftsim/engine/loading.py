"""Requests waiting for their offloaded KV blocks to come back from host memory (vLLM's
WAITING_FOR_REMOTE_KVS): admission skips them, and they return to the front of the waiting queue, in the
order they left it, once their copy is done (kvcache/offload.py). LMCache's loads are synchronous instead:
the request is admitted at once with the loaded tokens computed, and the step that admits it waits for the
copy (lmcache_tiers builds its tiers; docs/engine-semantics.md 14)."""

from __future__ import annotations

from collections.abc import Callable

from ttftsim.config.resolved_engine import ResolvedEngine
from ttftsim.engine.queues import WaitingQueue
from ttftsim.engine.state import RequestState
from ttftsim.kvcache.manager import NO_HIT, CacheHit, KVCacheManager
from ttftsim.kvcache.offload import LMCacheTiers, LruChunks, RemoteStores, TierSpec


class LoadingRequests:
    """Requests whose blocks are being copied in, in the order they started. Invariant: each holds GPU
    blocks for its loaded_tokens and has kv_ready_s set."""

    def __init__(self) -> None:
        self.states: list[RequestState] = []

    def __len__(self) -> int:
        return len(self.states)

    def start(self, state: RequestState, tokens: int, ready_s: float) -> None:
        state.loaded_tokens, state.kv_ready_s = tokens, ready_s
        self.states.append(state)

    def done(self, now: float) -> list[RequestState]:
        """Take out the requests whose copy has finished by now, in the order they started."""
        ready = [s for s in self.states if s.kv_ready_s <= now]
        if ready:
            self.states = [s for s in self.states if s.kv_ready_s > now]
        return ready

    def next_done_s(self) -> float | None:
        return min((s.kv_ready_s for s in self.states), default=None)

    def take_all(self) -> list[RequestState]:
        taken, self.states = self.states, []
        return taken

    def expire(self, now: float, timeout_s: float) -> list[RequestState]:
        """Take out the requests sent timeout_s or more before now (their client gave up)."""
        gone = [s for s in self.states if s.req.arrival_s + timeout_s <= now]
        self.states = [s for s in self.states if s.req.arrival_s + timeout_s > now]
        return gone


def admission_start(
    state: RequestState,
    now: float,
    kv: KVCacheManager,
    loading: LoadingRequests,
    waiting: WaitingQueue,
    load_s_per_block: float,
    reserved: Callable[[], int] | None = None,
) -> tuple[CacheHit, int, bool] | bool:
    """Where a waiting request's computation starts: (GPU prefix hit, its first token to compute, whether its
    prefix query was already counted); blocks back from the CPU tier or KV sent by a prefill pod count as
    computed. True: it left the queue to load blocks from the CPU tier first (vLLM: WAITING_FOR_REMOTE_KVS;
    the queue goes on without it); False: no room for those blocks, or (with `reserved`, vLLM >= 0.23) not
    beside the blocks in-flight prefills and loads still need."""
    if state.loaded_tokens:  # its blocks came back from the CPU tier: held (until the scheduler admits it, which
        return NO_HIT, state.loaded_tokens, True  # clears this), and counted when it left
    hit = kv.find_cached(state.rid, state.token_segments(), state.num_tokens) if kv.caching else NO_HIT
    if kv.lmcache is not None:  # loaded before the forward pass of the step that admits it
        segments, prompt = state.token_segments(), state.req.prompt_tokens
        found = kv.find_in_lmcache(state.rid, segments, state.num_tokens, hit.num_tokens, prompt)
        if found.waits:  # asynchronous loading: aside until the prefetch is done, then looked up again
            waiting.pop()
            loading.start(state, 0, now + found.prefetch_s)
            return True
        return hit, hit.num_tokens + found.tokens, False
    offloaded = kv.find_offloaded(state.rid, state.num_tokens, len(hit.blocks)) if kv.tier else 0
    if offloaded:
        loaded = hit.num_tokens + offloaded * kv.block_size
        if reserved is not None and offloaded > kv.pool.num_free - kv.pool.count_free_among(hit.blocks) - reserved():
            return False
        if not kv.allocate(state.rid, loaded, hit):
            return False
        waiting.pop()
        kv.record_admission(state.num_tokens, hit.num_tokens)
        loading.start(state, loaded, now + offloaded * load_s_per_block)
        return True
    if state.req.preloaded_tokens > hit.num_tokens and state.num_preemptions == 0:  # KV sent by a prefill pod
        return NO_HIT, state.req.preloaded_tokens, False
    return hit, hit.num_tokens, False


def lmcache_tiers(cfg: ResolvedEngine, remote_stores: RemoteStores | None = None) -> LMCacheTiers | None:
    """LMCache's tiers for a replica, sized in chunks of its KV (replica.py sets the chunk's bytes per GPU):
    a GB is 2^30 bytes per GPU worker; a chunk read from disk or the remote store moves every GPU's share
    through one drive or link, then each GPU copies its own share over its PCIe link. The remote tier is the
    cluster's store for the URL (remote_stores), shared with the other replicas; without remote_stores (one
    engine alone) the replica's own."""
    lm, chunk = cfg.lmcache, cfg.lmcache_chunk_bytes
    if lm is None or chunk <= 0:
        return None
    tiers: list[TierSpec | LruChunks] = []
    if lm.local_cpu:
        tiers.append(TierSpec("LocalCPUBackend", int(lm.max_local_cpu_size * 2**30 // chunk), 0.0))
    if lm.local_disk is not None:
        disk_s = chunk * cfg.rank_gpus / lm.local_disk_read_bytes_per_s
        tiers.append(TierSpec("LocalDiskBackend", int(lm.max_local_disk_size * 2**30 // chunk), disk_s))
    if lm.remote_url is not None:
        size = lm.max_remote_size
        capacity = None if size is None else int(size * 2**30 // chunk)
        remote = TierSpec("RemoteBackend", capacity, chunk * cfg.rank_gpus / lm.remote_bytes_per_s)
        tiers.append(remote if remote_stores is None else remote_stores.store(lm.remote_url, cfg.rank_gpus, remote))
    copy_s = chunk / (lm.local_cpu_bytes_per_s or cfg.lmcache_h2d_bytes_per_s)
    layers = cfg.lmcache_num_layers if lm.use_layerwise else 0
    timeout_s = lm.lookup_timeout_ms / 1000 if lm.enable_async_loading else None
    return LMCacheTiers(tiers, lm.chunk_size // cfg.block_size, lm.chunk_size, copy_s, copy_s, layers, timeout_s)
