"""LMCache's tiers by hand (kvcache/offload.py LMCacheTiers, engine/loading.py): chunks stored to every tier,
LRU in each, a prefix matched across the tiers in order, and the synchronous load charged to the step that
admits the request (docs/engine-semantics.md 14)."""

from __future__ import annotations

from typing import Any

import pytest
import simpy
from pydantic import ValidationError

from tests.factories import engine_config, feed, make_engine, request
from ttftsim.config.engine import EngineArgs
from ttftsim.config.kv_transfer import LMCacheConfig
from ttftsim.engine.engine import Engine
from ttftsim.engine.loading import lmcache_tiers
from ttftsim.engine.recorder import Recorder
from ttftsim.kvcache.offload import LMCacheTiers, RemoteStores, TierSpec
from ttftsim.perf.linear import LinearStepModel
from ttftsim.workload.request import Request

COST = LinearStepModel(0.01, 0.001)  # 10 ms a step + 1 ms per computed token
MIB = 2**20  # one chunk's KV per GPU in the engine cases: 64 tokens
CHUNK_GB = MIB / 2**30  # a tier of n chunks is n * CHUNK_GB
LMCACHE = {"kv_connector": "LMCacheConnectorV1"}
# 1 ms to copy a chunk between host memory and the GPU, 10 ms to read it from disk, 20 ms from the remote store
SPEEDS = {"local_cpu_bytes_per_s": 1000 * MIB, "local_disk_read_bytes_per_s": 100 * MIB, "remote_bytes_per_s": 50 * MIB}


def tiers() -> LMCacheTiers:
    specs = [
        TierSpec("LocalCPUBackend", 2, 0.0),
        TierSpec("LocalDiskBackend", 4, 0.010),
        TierSpec("RemoteBackend", None, 0.050),
    ]
    return LMCacheTiers(specs, chunk_blocks=1, chunk_tokens=16, h2d_s_per_chunk=0.001, d2h_s_per_chunk=0.002)


def stored(lm: LMCacheTiers, rid: int, hashes: list[int]) -> None:
    """A request whose prompt is these chunks, admitted and computed whole in one step."""
    lm.lookup(rid, hashes, 16 * len(hashes), 0)
    lm.store(rid, hashes, len(hashes))


def test_each_tier_evicts_its_least_recently_used_chunk_and_a_hit_from_below_is_written_back() -> None:
    lm = tiers()
    stored(lm, 1, [11, 12])
    stored(lm, 2, [21, 22])
    stored(lm, 3, [31, 32, 33])
    cpu, disk, remote = lm.tiers
    assert cpu.keys() == [32, 33]
    assert disk.keys() == [22, 31, 32, 33]  # 11, 12, 21 went in that order
    assert remote.keys() == [11, 12, 21, 22, 31, 32, 33]
    assert lm.step_s(0.0) == pytest.approx(7 * 0.002, abs=1e-12)  # every stored chunk copied off the GPU
    # request 1's prompt again, one chunk more: only the remote store still holds its two chunks
    load = lm.lookup(4, [11, 12, 41], 48, 0)
    assert (load.hit_chunks, load.tokens, load.chunks_by_tier) == (2, 32, (0, 0, 2))
    assert load.load_s == pytest.approx(2 * (0.050 + 0.001), abs=1e-12)
    lm.store(4, [11, 12, 41], 3)  # admitted: the load is charged, the chunks come back into host memory
    assert cpu.keys() == [12, 41]  # 11 and 12 written back, then 41 stored: 11 the least recent
    assert disk.keys() == [31, 32, 33, 41]
    assert lm.step_s(0.0) == pytest.approx(0.102 + 0.002, abs=1e-12)
    assert (lm.stored_chunks, lm.loaded_chunks) == (8, 2)


def test_a_prefix_continues_in_the_next_tier_where_the_one_before_stops() -> None:
    lm = tiers()
    stored(lm, 1, [11, 12, 13, 14])  # CPU keeps 13, 14; disk all four
    load = lm.lookup(2, [11, 12, 13, 14, 15], 80, 16)  # the GPU holds the first chunk
    # the CPU tier holds nothing from the start: the disk gives the whole prefix; chunk 0 is on the GPU
    assert (load.hit_chunks, load.tokens, load.chunks_by_tier) == (4, 48, (0, 3, 0))
    assert load.load_s == pytest.approx(3 * (0.010 + 0.001), abs=1e-12)


def test_a_whole_prompt_hit_leaves_its_last_token_to_compute_and_a_lookup_not_admitted_costs_nothing() -> None:
    lm = tiers()
    stored(lm, 1, [11, 12])
    load = lm.lookup(2, [11, 12], 32, 0)
    assert (load.tokens, load.chunks_by_tier) == (31, (2, 0, 0))
    assert load.load_s == pytest.approx(2 * 0.001, abs=1e-12)
    lm.step_s(0.0)
    lm.forget(2)  # left before it was admitted (its client gave up)
    assert lm.step_s(0.0) == 0.0


def test_only_prompt_chunks_are_stored_even_for_a_request_resumed_with_its_output() -> None:
    lm = tiers()
    lm.lookup(1, [11, 12, 13], 48, 0, prompt_tokens=20)  # preempted after generating 28 tokens of a 20-token prompt
    lm.store(1, [11, 12, 13], 3)
    assert (lm.stored_chunks, lm.tiers[2].keys()) == (1, [11])  # save_decode_cache false: the prompt's one chunk


def test_a_private_prompt_takes_room_under_keys_of_its_own() -> None:
    lm = tiers()
    stored(lm, 1, [11, 12])
    lm.step_s(0.0)
    assert lm.lookup_private(2, 40).tokens == 0  # no other request shares its content: nothing to find
    lm.store_private(2, 40)  # 2 full chunks of 16 tokens, the last 8 tokens not stored
    assert lm.tiers[0].keys() == [hash((2, 0)), hash((2, 1))]  # request 1's chunks pushed out of host memory
    assert lm.step_s(0.0) == pytest.approx(2 * 0.002, abs=1e-12)


def lmcache(**settings: Any) -> dict[str, Any]:
    return {"kv_transfer_config": LMCACHE, "lmcache": {"chunk_size": 64, **SPEEDS, **settings}}


def first_tokens(requests: list[Request], num_blocks: int, **overrides: Any) -> dict[int, float]:
    if "lmcache" in overrides:
        overrides["lmcache_chunk_bytes"] = MIB
    env, engine, recorder = make_engine(num_blocks=num_blocks, cost=COST, **overrides)
    feed(env, engine, requests)
    env.run(until=10.0)
    return dict(recorder.requests_frame().set_index("request_id")["first_token_s"])


EVICTED = [
    request(0, 0.0, 128, 1, content=7),  # 2 chunks stored; the GPU holds 9 blocks of 16 tokens
    request(1, 1.0, 143, 1),  # all 9 GPU blocks: request 0's are evicted; 2 chunks stored (143 // 64)
    request(2, 2.0, 128, 1, content=7),  # request 0's prompt again
]


@pytest.mark.parametrize(
    ("settings", "load_s"),
    [
        ({"max_local_cpu_size": 4 * CHUNK_GB}, 2 * 0.001),  # host memory: 2 chunks copied in
        ({"max_local_cpu_size": CHUNK_GB, "local_disk": "/lmc", "max_local_disk_size": 4 * CHUNK_GB}, 2 * 0.011),
        (
            {
                "max_local_cpu_size": CHUNK_GB,
                "local_disk": "/lmc",
                "max_local_disk_size": CHUNK_GB,
                "remote_url": "lm://x",
            },
            2 * 0.021,
        ),
    ],
    ids=["cpu", "disk", "remote"],
)
def test_a_hit_in_each_tier_loads_before_the_step_that_admits_it(settings: dict[str, Any], load_s: float) -> None:
    # the whole 128-token prompt is held: 127 tokens loaded, 1 computed (10 + 1 ms) after the load
    assert first_tokens(EVICTED, 9, **lmcache(**settings))[2] == pytest.approx(2.0 + 0.011 + load_s, abs=1e-12)


@pytest.mark.parametrize(
    ("copy_bytes_per_s", "step_s"),
    [
        (1000 * MIB, 0.011 + 0.002 / 2),  # compute-bound: 11 ms, then the first layer's load before it starts
        (100 * MIB, 0.020 + 0.020 / 2),  # load-bound: 2 chunks x 10 ms, the compute hidden under it
    ],
)
def test_a_layerwise_load_overlaps_the_forward_pass(copy_bytes_per_s: float, step_s: float) -> None:
    settings = {"max_local_cpu_size": 4 * CHUNK_GB, "use_layerwise": True, "local_cpu_bytes_per_s": copy_bytes_per_s}
    found = first_tokens(EVICTED, 9, lmcache_num_layers=2, **lmcache(**settings))
    assert found[2] == pytest.approx(2.0 + step_s, abs=1e-12)


DISK = {"max_local_cpu_size": CHUNK_GB, "local_disk": "/lmc", "max_local_disk_size": 4 * CHUNK_GB}
BEHIND = [*EVICTED, request(3, 2.0, 32, 1)]  # a short prompt queued behind request 0's prompt again


def test_an_asynchronous_load_waits_aside_while_the_queue_goes_on() -> None:
    # synchronous: request 2's step loads 2 chunks from disk (22 ms) and computes 1 token (11 ms); request 3
    # (seen by the next schedule) waits for it, then computes its 32 tokens (42 ms)
    found = first_tokens(BEHIND, 9, **lmcache(**DISK))
    assert (found[2], found[3]) == pytest.approx((2.033, 2.033 + 0.042), abs=1e-12)
    # asynchronous: every request first waits aside for its lookup, at least LMCache's 10 ms backoff: request 2
    # while its 2 chunks are read (20 ms), request 3 (a miss) 10 ms, then runs (42 ms); then request 2 is
    # admitted with only the copy to the GPU (2 ms) before its 1-token step (11 ms)
    found = first_tokens(BEHIND, 9, **lmcache(**DISK, enable_async_loading=True))
    assert (found[2], found[3]) == pytest.approx((2.052 + 0.013, 2.010 + 0.042), abs=1e-12)


def test_a_prefetch_past_the_lookup_timeout_gives_no_hit() -> None:
    # the disk read (20 ms) outlasts a 10 ms timeout: after it, the prompt is recomputed and its 2 chunks stored
    settings = {**DISK, "enable_async_loading": True, "lookup_timeout_ms": 10}
    assert first_tokens(EVICTED, 9, **lmcache(**settings))[2] == pytest.approx(2.010 + 0.138 + 0.002, abs=1e-12)


def test_stores_are_charged_to_the_step_that_computes_the_chunks() -> None:
    found = first_tokens(EVICTED, 9, **lmcache(max_local_cpu_size=4 * CHUNK_GB))
    assert found[0] == pytest.approx(0.01 + 0.128 + 2 * 0.001, abs=1e-12)  # 2 chunks copied to host memory
    assert found[1] == pytest.approx(1.0 + 0.01 + 0.143 + 2 * 0.001, abs=1e-12)  # its partial chunk is not stored
    assert first_tokens(EVICTED, 9)[2] == pytest.approx(2.0 + 0.138, abs=1e-12)  # without LMCache: recomputed
    private = [Request(0, 0.0, 128, 1, ((5, 128),), private=True)]  # its chunks are stored too
    assert first_tokens(private, 9, **lmcache())[0] == pytest.approx(0.01 + 0.128 + 2 * 0.001, abs=1e-12)


def test_the_second_turn_of_a_conversation_hits_the_disk_tier_once_the_cpu_tier_is_full() -> None:
    turns = [
        Request(0, 0.0, 128, 1, ((7, 128),)),  # conversation A, turn 1: 2 chunks
        Request(1, 1.0, 255, 1, ((8, 255),)),  # conversation B: 3 chunks push A's out of a 2-chunk CPU tier
        Request(2, 3.0, 192, 1, ((7, 128), (9, 64))),  # A, turn 2: its history then a new question
    ]
    tiers = {"max_local_cpu_size": 2 * CHUNK_GB, "local_disk": "/lmc", "max_local_disk_size": 8 * CHUNK_GB}
    env, engine, recorder = make_engine(num_blocks=16, cost=COST, lmcache_chunk_bytes=MIB, **lmcache(**tiers))
    feed(env, engine, turns)
    env.run(until=10.0)
    first = dict(recorder.requests_frame().set_index("request_id")["first_token_s"])
    # 2 chunks read from disk (10 ms) and copied in (1 ms) each, 64 tokens computed, the new chunk stored
    assert first[2] == pytest.approx(3.0 + 2 * 0.011 + 0.010 + 0.064 + 0.001, abs=1e-12)
    lm = engine.kv.lmcache
    assert lm is not None and (lm.loaded_chunks, lm.stored_chunks) == (2, 6)
    assert (lm.query_tokens, lm.hit_tokens) == (128 + 255 + 192, 128)  # vLLM's external prefix-cache counters
    cpu_only = {"max_local_cpu_size": 2 * CHUNK_GB}  # A's chunks are gone: the turn is recomputed
    assert first_tokens(turns, 16, **lmcache(**cpu_only))[2] == pytest.approx(3.0 + 0.202 + 3 * 0.001, abs=1e-12)


def test_inconsistent_tiers_are_errors_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="max_local_disk_size is 0 with local_disk /lmc"):
        LMCacheConfig(local_disk="/lmc")
    with pytest.raises(ValidationError, match="max_local_cpu_size is 0 with local_cpu true"):
        LMCacheConfig(max_local_cpu_size=0)
    with pytest.raises(ValidationError, match="no tier: local_cpu is false"):
        LMCacheConfig(local_cpu=False)
    with pytest.raises(ValidationError, match="kv_offloading_size and kv_transfer_config together"):
        EngineArgs(kv_offloading_size=8, kv_transfer_config=LMCACHE)
    with pytest.raises(ValidationError, match="lmcache settings without kv_transfer_config"):
        EngineArgs(lmcache={})
    with pytest.raises(ValidationError, match="use_layerwise with a disk or remote tier is not modelled"):
        LMCacheConfig(use_layerwise=True, remote_url="lm://x")
    with pytest.raises(ValidationError, match="use_layerwise with enable_async_loading"):
        LMCacheConfig(use_layerwise=True, enable_async_loading=True)
    with pytest.raises(ValidationError, match="chunk_size 100 is not a multiple of block_size 16"):
        EngineArgs(kv_transfer_config=LMCACHE, lmcache={"chunk_size": 100})


def test_lmcache_tiers_of_a_replica_sized_and_timed_by_hand() -> None:
    """Three tiers in LMCache's order, each a GB of 2^30 bytes per GPU worker over a 3 MiB chunk: 5 GB of host
    memory hold 5 x 1024 // 3 = 1,706 chunks, 20 GB of disk 6,826, 40 GB remote 13,653; a chunk read from disk or
    the remote store moves both GPUs' shares (6 MiB) at 200 or 100 MiB/s; the host-to-GPU copy is the chunk at
    the host link's 25e9 B/s (no local_cpu_bytes_per_s); 256-token chunks of 16-token blocks; async loading's
    timeout 1.5 s."""
    settings = {"chunk_size": 256, "max_local_cpu_size": 5, "local_disk": "/lmc", "max_local_disk_size": 20}
    settings |= {"remote_url": "lm://x", "max_remote_size": 40, "local_disk_read_bytes_per_s": 200 * MIB}
    settings |= {"remote_bytes_per_s": 100 * MIB, "enable_async_loading": True, "lookup_timeout_ms": 1500}
    chunk = 3 * MIB
    base = {"kv_transfer_config": LMCACHE, "tensor_parallel_size": 2, "lmcache_h2d_bytes_per_s": 25e9}
    tiers = lmcache_tiers(engine_config(**base, lmcache=settings, lmcache_chunk_bytes=chunk))
    assert tiers is not None
    assert [tier.spec for tier in tiers.tiers] == [
        TierSpec("LocalCPUBackend", 1706, 0.0),
        TierSpec("LocalDiskBackend", 6826, 2 * chunk / (200 * MIB)),
        TierSpec("RemoteBackend", 13653, 2 * chunk / (100 * MIB)),
    ]
    assert (tiers.chunk_blocks, tiers.chunk_tokens, tiers.layers) == (16, 256, 0)
    assert tiers.h2d_s_per_chunk == tiers.d2h_s_per_chunk == chunk / 25e9
    assert tiers.prefetch_timeout_s == 1.5
    unlimited = lmcache_tiers(
        engine_config(**base, lmcache=settings | {"max_remote_size": None}, lmcache_chunk_bytes=1)
    )
    assert unlimited is not None and unlimited.tiers[2].spec.capacity_chunks is None
    assert lmcache_tiers(engine_config(**base, lmcache=settings, lmcache_chunk_bytes=0)) is None  # not sized yet
    assert lmcache_tiers(engine_config(lmcache_chunk_bytes=chunk)) is None  # no LMCache


def test_replicas_naming_one_remote_url_share_its_store() -> None:
    """LMCache keys a chunk by model, world size, rank and chunk hash, so every replica of a deployment that
    names the same remote_url finds the chunks another replica stored. Replica 0 computes a 128-token prompt
    (2 chunks stored, also to the remote store); replica 1 gets the same prompt at 1 s with an empty GPU and
    CPU cache: both chunks read from the remote store (20 ms) and copied in (1 ms), 1 token computed (10 + 1 ms),
    where a store of its own would hold nothing: the prompt is recomputed (10 + 128 ms) and its 2 chunks stored
    (1 ms copy each)."""
    settings = {"max_local_cpu_size": 4 * CHUNK_GB, "remote_url": "lm://store:65432"}
    cfg = engine_config(lmcache_chunk_bytes=MIB, **lmcache(**settings))

    def first_token_on_second(stores: RemoteStores | None) -> float:
        env, recorder = simpy.Environment(), Recorder(0.0)
        engines = [Engine(env, cfg, COST, 9, recorder, replica=i, remote_stores=stores) for i in (0, 1)]
        feed(env, engines[0], [request(0, 0.0, 128, 1, content=7)])
        feed(env, engines[1], [request(1, 1.0, 128, 1, content=7)])
        env.run(until=10.0)
        return float(recorder.requests_frame().set_index("request_id")["first_token_s"][1])

    stores = RemoteStores()
    assert first_token_on_second(stores) == pytest.approx(1.0 + 2 * 0.021 + 0.011, abs=1e-12)
    assert len(stores) == 1
    assert first_token_on_second(None) == pytest.approx(1.0 + 0.010 + 0.128 + 2 * 0.001, abs=1e-12)
    other = RemoteStores()  # another world size (a TP2 replica's ranks) keys its chunks apart
    spec = TierSpec("RemoteBackend", None, 0.02)
    assert other.store("lm://a", 1, spec) is other.store("lm://a", 1, spec)
    assert other.store("lm://a", 2, spec) is not other.store("lm://a", 1, spec)
    assert other.store("lm://b", 1, spec) is not other.store("lm://a", 1, spec)


def test_a_chunk_evicted_from_a_shared_store_while_its_prefetch_ran_is_still_loaded() -> None:
    """Asynchronous loading on a remote store of two chunks shared with another replica: request 1 finds chunks
    11 and 12 and waits for their prefetch; meanwhile the other replica's two stores evict both; the prefetched
    copies are in host memory, so the request is admitted with them loaded (LMCache reads them from there)."""
    shared = RemoteStores().store("lm://s", 1, TierSpec("RemoteBackend", 2, 0.02))
    mine = LMCacheTiers([shared], 1, 16, h2d_s_per_chunk=0.001, d2h_s_per_chunk=0.002, prefetch_timeout_s=1.0)
    other = LMCacheTiers([shared], 1, 16, h2d_s_per_chunk=0.001, d2h_s_per_chunk=0.002)  # synchronous loading
    for key in (11, 12):
        shared.put(key)
    assert mine.lookup(1, [11, 12, 13], 48, 0).waits
    other.lookup(9, [21, 22], 32, 0)  # the other replica's request: nothing found, its prompt stored
    other.store(9, [21, 22], 2)
    assert shared.keys() == [21, 22]
    load = mine.lookup(1, [11, 12, 13], 48, 0)
    assert (load.waits, load.tokens, load.chunks_by_tier) == (False, 32, (2,))
    mine.store(1, [11, 12, 13], 3)
    assert mine.loaded_chunks == 2 and shared.keys() == [22, 13]
