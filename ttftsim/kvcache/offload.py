"""A CPU tier for KV blocks: vLLM's native KV offloading (`--kv-offloading-size`, the OffloadingConnector
with its CPU backend; vllm/v1/kv_offload/ and distributed/kv_transfer/kv_connector/v1/offloading_connector.py).

Every block that fills and is hashed is also stored to host memory (write-through; the copies run on their
own CUDA stream and are not charged here); the tier holds capacity_blocks blocks and evicts the least
recently used (LRUOffloadingManager). A new request whose prefix goes on past its GPU prefix-cache hit into
blocks the tier holds loads them (get_num_new_matched_tokens): it waits for the copy in
WAITING_FOR_REMOTE_KVS, skipped by admission, and is then admitted with those tokens computed.

LMCache's tiers (--kv-transfer-config LMCacheConnectorV1: host memory, local disk, a remote store) keep
chunks of chunk_size tokens instead, each tier LRU, and charge their copies to the engine's steps
(LMCacheTiers; docs/engine-semantics.md 14). A remote store is one for every replica of a cluster that names
its URL (RemoteStores). Left out: copies sharing bandwidth.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass


class CpuTier:
    """Block hashes held in host memory, least recently used first. Invariant: len <= capacity_blocks."""

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity_blocks = capacity_blocks
        self._held: OrderedDict[int, None] = OrderedDict()
        self.stored_blocks = 0
        self.loaded_blocks = 0

    def __len__(self) -> int:
        return len(self._held)

    def store(self, hashes: Sequence[int]) -> None:
        """Blocks just filled on the GPU: kept (most recent last), evicting the least recently used."""
        held = self._held
        for block_hash in hashes:
            if block_hash in held:
                held.move_to_end(block_hash)
                continue
            held[block_hash] = None
            self.stored_blocks += 1
            if len(held) > self.capacity_blocks:
                held.popitem(last=False)

    def held(self) -> list[int]:
        """The block hashes held, least recently used first."""
        return list(self._held)

    def lookup(self, hashes: Sequence[int], start: int) -> int:
        """How many consecutive blocks from hashes[start] the tier holds (touched as used)."""
        count = 0
        for block_hash in hashes[start:]:
            if block_hash not in self._held:
                break
            self._held.move_to_end(block_hash)
            count += 1
        return count


# ---- LMCache (LMCacheConnectorV1): chunks in tiers, docs/engine-semantics.md 14 ----

# LMCacheAsyncLookupClient.lookup sends the lookup to the workers, sleeps lookup_backoff_time (default 0.01 s,
# extra_config) and answers "not yet": a request with asynchronous loading waits at least that long.
LOOKUP_BACKOFF_S = 0.01


@dataclass(frozen=True, slots=True)
class TierSpec:
    """One LMCache storage backend, in the order LMCache searches them (CPU, local disk, remote)."""

    name: str  # LMCache's backend class: LocalCPUBackend, LocalDiskBackend, RemoteBackend
    capacity_chunks: int | None  # None: no limit here (a remote server evicts on its own terms)
    read_s_per_chunk: float  # reading one chunk into host memory before its copy to the GPUs (0: host memory)


@dataclass(frozen=True, slots=True)
class ChunkLoad:
    """What an LMCache lookup found for a request about to be admitted."""

    hit_chunks: int = 0  # the prompt's prefix chunks held across the tiers (LMCache's hit)
    tokens: int = 0  # tokens loaded past the GPU prefix hit (0: nothing is loaded)
    chunks_by_tier: tuple[int, ...] = ()  # chunks read from each tier
    load_s: float = 0.0  # the synchronous load before the step's forward pass
    prompt_tokens: int = 0
    waits: bool = False  # asynchronous loading: the request waits prefetch_s for a prefetch, then looks up again
    prefetch_s: float = 0.0


class LruChunks:
    """One tier's chunk keys, least recently used first. Invariant: len <= capacity (when it has one)."""

    def __init__(self, spec: TierSpec) -> None:
        self.spec = spec
        self._held: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._held)

    def keys(self) -> list[int]:
        return list(self._held)

    def put(self, key: int) -> None:
        """Stored, evicting the least recently used chunk when full; a chunk already held is left as it is."""
        held = self._held
        if key in held:
            return
        held[key] = None
        capacity = self.spec.capacity_chunks
        if capacity is not None and len(held) > capacity:
            held.popitem(last=False)

    def prefix(self, keys: Sequence[int], start: int) -> int:
        """How many consecutive keys from keys[start] this tier holds (LMCache's batched_contains)."""
        count = 0
        for key in keys[start:]:
            if key not in self._held:
                break
            count += 1
        return count

    def touch(self, keys: Sequence[int]) -> None:
        """Read now: most recently used. A chunk evicted since it was found (by another replica's writes to a
        shared store while the request waited for its prefetch) is already in host memory: nothing to move."""
        held = self._held
        for key in keys:
            if key in held:
                held.move_to_end(key)


class RemoteStores:
    """The remote stores of one simulated cluster. Every vLLM instance whose LMCache names the same remote_url
    puts into and looks up in the same server, and a chunk's key holds the model, the world size and the TP
    rank beside the chunk hash (LMCache CacheEngineKey: fmt, model_name, world_size, worker_id, chunk_hash), so
    replicas of one deployment (same model, same GPUs per replica) find each other's chunks: one store per
    URL, world size and tier (its capacity and read time in chunks of one size; pods whose KV chunks differ,
    another KV dtype, keep apart)."""

    def __init__(self) -> None:
        self._stores: dict[tuple[str, int, TierSpec], LruChunks] = {}

    def __len__(self) -> int:
        return len(self._stores)

    def store(self, url: str, world_size: int, spec: TierSpec) -> LruChunks:
        key = (url, world_size, spec)
        found = self._stores.get(key)
        if found is None:
            found = self._stores[key] = LruChunks(spec)
        return found


class LMCacheTiers:
    """LMCache's storage manager for one vLLM instance, in chunks of chunk_blocks KV blocks (a chunk's key
    is its last block's prefix hash: equal keys mean equal prefixes, as LMCache's chained chunk hashes).

    - Store (wait_for_save, after each forward pass): a request's prompt chunks completed in that step and
      not yet saved, full chunks only (save_unfull_chunk false), none while decoding (save_decode_cache false);
      each is copied from the GPUs to host memory (charged to the step) and put into every tier (the disk
      and remote writes are asynchronous, not charged). Each tier evicts its least recently used chunk.
    - Lookup (get_num_new_matched_tokens, at admission): prefix match across the tiers in order, each tier
      continuing where the one before stopped (StorageManager.batched_contains).
    - Load (start_load_kv, synchronous: LMCacheConnectorV1 answers load_async False): the chunks from the
      one holding the GPU hit's end to the LMCache hit's end, each read from its tier into host memory then
      copied to the GPUs, before the forward pass of the step that admits the request; chunks read from a
      lower tier are written back into the CPU tier (StorageManager.batched_get).
    - Asynchronous loading (enable_async_loading): the request first waits aside while its hit chunks are
      read into host memory (no write-back), then is admitted with only their copy to the GPUs in the step.
    - Layerwise (use_layerwise): the load and the store run layer by layer alongside the forward pass
      (retrieve_layer / store_layer, wait_for_layer_load): the step lasts the longest of the three, plus
      one layer's load before the first layer computes and one layer's store after the last.
    """

    def __init__(
        self,
        tiers: Sequence[TierSpec | LruChunks],
        chunk_blocks: int,
        chunk_tokens: int,
        h2d_s_per_chunk: float,
        d2h_s_per_chunk: float,
        layers: int = 0,
        prefetch_timeout_s: float | None = None,
    ) -> None:
        self.tiers = [tier if isinstance(tier, LruChunks) else LruChunks(tier) for tier in tiers]  # may be shared
        self.chunk_blocks, self.chunk_tokens = chunk_blocks, chunk_tokens
        self.h2d_s_per_chunk, self.d2h_s_per_chunk = h2d_s_per_chunk, d2h_s_per_chunk
        self.prefetch_timeout_s = prefetch_timeout_s  # asynchronous loading's lookup timeout (None: synchronous)
        self._pending: dict[int, ChunkLoad] = {}  # looked up, not yet admitted
        self._prefetched: dict[int, tuple[tuple[int, int], ...]] = {}  # tier spans read into host memory
        self._saved: dict[int, int] = {}  # chunks of each admitted request already stored (or found)
        self._prompt: dict[int, int] = {}
        self.layers = layers  # layerwise loads and stores over this many layers; 0: whole, around the step
        self._load_s = 0.0  # loads owed by the step being scheduled
        self._store_s = 0.0  # stores owed by it
        self.stored_chunks = 0
        self.loaded_chunks = 0
        self.query_tokens = 0  # vLLM's external_prefix_cache_queries / _hits: tokens past the GPU hit asked
        self.hit_tokens = 0  # of LMCache at each admission (KVCacheManager.record_admission), and those loaded

    def chunk_keys(self, hashes: Sequence[int], num_chunks: int) -> list[int]:
        step = self.chunk_blocks
        return [hashes[(i + 1) * step - 1] for i in range(min(num_chunks, len(hashes) // step))]

    def lookup(
        self, request_id: int, hashes: Sequence[int], num_tokens: int, gpu_hit_tokens: int, prompt_tokens: int = 0
    ) -> ChunkLoad:
        """What LMCache holds of this request's tokens (num_tokens: its prompt, and the tokens it generated
        before a preemption) and what admitting it now would load; remembered until the request is admitted
        (its first store), which charges the load. Only prompt chunks are ever stored (prompt_tokens; 0: all
        num_tokens are prompt). With asynchronous loading the first lookup answers that the request must wait
        for a prefetch (ChunkLoad.waits); the next one finds the prefetched chunks in host memory."""
        prompt_tokens = prompt_tokens or num_tokens
        spans = self._prefetched.pop(request_id, None)
        prefetched = spans is not None
        if spans is None:
            spans = self._spans(self.chunk_keys(hashes, num_tokens // self.chunk_tokens))
            if self.prefetch_timeout_s is not None:
                return self._prefetch(request_id, spans)
        load = self._load(spans, num_tokens, gpu_hit_tokens, prompt_tokens, prefetched)
        self._pending[request_id] = load
        return load

    def _spans(self, keys: Sequence[int]) -> tuple[tuple[int, int], ...]:
        """The chunk range each tier gives: a prefix match continuing where the tier before stopped."""
        found, spans = 0, []
        for tier in self.tiers:
            count = tier.prefix(keys, found) if found < len(keys) else 0
            spans.append((found, found + count))
            found += count
        return tuple(spans)

    def _load(
        self, spans: tuple[tuple[int, int], ...], num_tokens: int, gpu_hit_tokens: int, prompt: int, prefetched: bool
    ) -> ChunkLoad:
        found = spans[-1][1]
        hit_tokens = found * self.chunk_tokens
        need = hit_tokens - gpu_hit_tokens - (1 if hit_tokens == num_tokens else 0)  # the last token is computed
        if need <= 0:
            return ChunkLoad(found, prompt_tokens=prompt)
        first = gpu_hit_tokens // self.chunk_tokens  # the chunk holding the GPU hit's end is loaded whole
        by_tier = tuple(max(0, end - max(start, first)) for start, end in spans)
        reads = zip(by_tier, self.tiers, strict=True)
        read_s = 0.0 if prefetched else sum(n * tier.spec.read_s_per_chunk for n, tier in reads)
        load_s = read_s + sum(by_tier) * self.h2d_s_per_chunk
        return ChunkLoad(found, need, by_tier, load_s, prompt)

    def _prefetch(self, request_id: int, spans: tuple[tuple[int, int], ...]) -> ChunkLoad:
        """enable_async_loading (LMCacheAsyncLookupClient, StorageManager.async_lookup_and_prefetch): every
        hit chunk is read into host memory, from the first (the GPU hit is not skipped), off the engine's
        steps; past lookup_timeout_ms LMCache answers 0 hit tokens and the prompt is recomputed. The wait is at
        least the client's backoff (the scheduler's own sleep then is not charged to other requests)."""
        tiers = zip(spans, self.tiers, strict=True)
        read_s = sum((end - start) * tier.spec.read_s_per_chunk for (start, end), tier in tiers)
        timeout_s = self.prefetch_timeout_s or 0.0
        if read_s > timeout_s:
            spans, read_s = tuple((0, 0) for _ in spans), timeout_s
        self._prefetched[request_id] = spans
        return ChunkLoad(waits=True, prefetch_s=max(read_s, LOOKUP_BACKOFF_S))

    def store(self, request_id: int, hashes: Sequence[int], full_blocks: int) -> None:
        """The request's blocks are full up to full_blocks after the step being scheduled: admit its pending
        load, then save its prompt chunks completed by then."""
        load = self._pending.pop(request_id, None)
        if load is not None:
            self._admit(request_id, load, hashes)
        upto = min(full_blocks // self.chunk_blocks, self._prompt.get(request_id, 0) // self.chunk_tokens)
        saved = self._saved.get(request_id, 0)
        if upto > saved:
            self._save(request_id, self.chunk_keys(hashes, upto)[saved:], upto)

    def lookup_private(self, request_id: int, prompt_tokens: int) -> ChunkLoad:
        """A private request (no other shares its content, ttftsim hashes none of its blocks): nothing to
        find, but LMCache stores its chunks all the same (store_private)."""
        load = ChunkLoad(prompt_tokens=prompt_tokens)
        self._pending[request_id] = load
        return load

    def store_private(self, request_id: int, num_tokens: int) -> None:
        """A private request holds blocks for num_tokens after the step being scheduled: its completed prompt
        chunks are saved under keys of their own (request id, chunk index), taking room as any chunk."""
        load = self._pending.pop(request_id, None)
        if load is not None:
            self._admit(request_id, load, ())
        upto = min(num_tokens, self._prompt.get(request_id, 0)) // self.chunk_tokens
        saved = self._saved.get(request_id, 0)
        if upto > saved:
            self._save(request_id, [hash((request_id, index)) for index in range(saved, upto)], upto)

    def _save(self, request_id: int, keys: Sequence[int], upto: int) -> None:
        for key in keys:
            for tier in self.tiers:
                tier.put(key)
        self._saved[request_id] = upto
        self.stored_chunks += len(keys)
        self._store_s += len(keys) * self.d2h_s_per_chunk

    def _admit(self, request_id: int, load: ChunkLoad, hashes: Sequence[int]) -> None:
        self._saved[request_id] = load.hit_chunks  # LMCache: num_saved_tokens = its hit
        self._prompt[request_id] = load.prompt_tokens
        self.hit_tokens += load.tokens
        if not load.tokens:
            return
        keys, start = self.chunk_keys(hashes, load.hit_chunks), load.hit_chunks - sum(load.chunks_by_tier)
        for index, (tier, count) in enumerate(zip(self.tiers, load.chunks_by_tier, strict=True)):
            read = keys[start : start + count]
            tier.touch(read)
            if index and self.tiers[0].spec.name == "LocalCPUBackend" and self.prefetch_timeout_s is None:
                for key in read:
                    self.tiers[0].put(key)
            start += count
        self.loaded_chunks += sum(load.chunks_by_tier)
        self._load_s += load.load_s

    def step_s(self, compute_s: float) -> float:
        """How long the step just scheduled lasts with the chunk copies it owes (which it settles)."""
        load_s, store_s = self._load_s, self._store_s
        self._load_s = self._store_s = 0.0
        if not self.layers:
            return load_s + compute_s + store_s
        return max(compute_s, load_s, store_s) + (load_s + store_s) / self.layers

    def forget(self, request_id: int) -> None:
        self._pending.pop(request_id, None)
        self._prefetched.pop(request_id, None)
        self._saved.pop(request_id, None)
        self._prompt.pop(request_id, None)
