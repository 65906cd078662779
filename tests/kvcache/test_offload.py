"""The CPU tier of KV offloading, by hand: LRU over block hashes, write-through as blocks fill, and a prefix
evicted from the GPU copied back instead of recomputed (kvcache/offload.py, engine/loading.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from pydantic import ValidationError

from tests.factories import feed, make_engine, request
from tests.test_cli import run as run_cli
from ttftsim.config.engine import EngineArgs
from ttftsim.config.scenario import Scenario
from ttftsim.engine.engine import Engine
from ttftsim.engine.state import RequestState
from ttftsim.kvcache.offload import CpuTier
from ttftsim.perf.linear import LinearStepModel
from ttftsim.simulate import simulate
from ttftsim.workload.request import Request

COST = LinearStepModel(0.01, 0.001)  # 10 ms a step + 1 ms per computed token


def test_the_tier_keeps_the_most_recently_used_blocks() -> None:
    tier = CpuTier(capacity_blocks=2)
    tier.store([1, 2, 3])
    assert tier.lookup([1, 2, 3], 0) == 0  # block 1 was evicted first: nothing from the start
    assert tier.lookup([9, 2, 3, 4], 1) == 2  # 2 and 3, touched: 3 is now the most recent
    tier.store([5])  # evicts 2, the least recently used
    assert tier.lookup([2], 0) == 0 and tier.lookup([3, 5], 0) == 2
    assert (tier.stored_blocks, len(tier)) == (4, 2)


def run(offload_blocks: int) -> dict[int, float]:
    env, engine, recorder = make_engine(
        num_blocks=8, cost=COST, kv_offload_blocks=offload_blocks, kv_load_s_per_block=0.005
    )
    feed(
        env,
        engine,
        [
            request(0, 0.0, 64, 1, content=7),  # 4 full blocks, cached on the GPU and stored to the tier
            request(1, 1.0, 127, 1),  # all 8 blocks: request 0's are evicted from the GPU
            request(2, 2.0, 64, 1, content=7),  # request 0's prompt again
        ],
    )
    env.run(until=10.0)
    return dict(recorder.requests_frame().set_index("request_id")["first_token_s"])


def test_an_evicted_prefix_comes_back_from_the_tier_instead_of_being_recomputed() -> None:
    # without the tier: 10 + 64 ms of prefill; with it: 3 blocks (the last prompt token is always computed,
    # so (64 - 1) // 16 blocks) copied back in 3 x 5 ms, then 16 tokens computed: 15 + 10 + 16 ms
    assert run(0)[2] == pytest.approx(2.0 + 0.074, abs=1e-12)
    assert run(100)[2] == pytest.approx(2.0 + 0.015 + 0.026, abs=1e-12)


def test_a_tier_too_small_for_the_prefix_holds_only_the_newest_blocks() -> None:
    # 8 blocks of tier: request 1's 7 full blocks push out request 0's first 3: the prompt is recomputed
    assert run(8)[2] == pytest.approx(2.0 + 0.074, abs=1e-12)


def test_offloading_needs_prefix_caching() -> None:
    with pytest.raises(ValidationError, match="kv_offloading_size needs paged KV blocks with prefix caching on"):
        EngineArgs(kv_offloading_size=8, enable_prefix_caching=False)


def test_a_partial_gpu_hit_then_the_rest_from_the_tier_keeps_its_gpu_blocks() -> None:
    """8 GPU blocks of 16. Request 0 (64 tokens of content 7) holds blocks 0-3 and frees them 3, 2, 1, 0 after
    the four never used. Request 1 (95 tokens, 6 blocks) takes the four unused ones (4-7), then 3 and 2, evicting
    their hashes; it frees 2, 3, 7, 6, 5, 4 behind 1, 0. Request 2 (content 7 again): blocks 0 and 1 are still a
    GPU hit (32 tokens); of its (64 - 1) // 16 = 3 usable blocks the third comes back from the tier (5 ms), then
    16 tokens are computed: first token at 2 + 0.005 + 0.010 + 0.016. It keeps the hit blocks 0 and 1, takes 2
    for the copied block and 3 for the rest, and frees 3, 2, 1, 0 last. Each prompt is one prefix-cache query."""
    env, engine, recorder = make_engine(num_blocks=8, cost=COST, kv_offload_blocks=100, kv_load_s_per_block=0.005)
    feed(env, engine, [request(0, 0.0, 64, 1, content=7), request(1, 1.0, 95, 1), request(2, 2.0, 64, 1, content=7)])
    env.run(until=10.0)
    row = recorder.requests_frame().set_index("request_id").loc[2]
    assert row["first_token_s"] == pytest.approx(2.031, abs=1e-12) and row["cached_tokens"] == 48
    assert engine.kv.pool.free_order() == [7, 6, 5, 4, 3, 2, 1, 0]
    assert (engine.kv.hit_tokens, engine.kv.query_tokens) == (32, 64 + 95 + 64)


def _two_prompts_back_from_the_tier(
    timeout_s: float | None, version: str = "0.15.1"
) -> tuple[Engine, pd.DataFrame, list[RequestState]]:
    """8 GPU blocks of 16 tokens. Prompts A and B (80 tokens, 5 blocks each) run, then a 127-token prompt takes
    all 8 blocks and evicts them from the GPU. At 3 s A and B come back: each copies its (80 - 1) // 16 = 4 full
    blocks from the tier (4 x 5 ms), together holding all 8 blocks. At 3.02 s A needs a fifth block for its last
    16 tokens; none is free, nothing runs, and B waits behind A holding 4: nothing will ever free one."""
    env, engine, recorder = make_engine(
        num_blocks=8, cost=COST, kv_offload_blocks=100, kv_load_s_per_block=0.005, vllm_version=version
    )
    engine.client_timeout_s = timeout_s
    arrivals = [request(0, 0.0, 80, 1, content=7), request(1, 1.0, 80, 1, content=8), request(2, 2.0, 127, 1)]
    arrivals += [request(3, 3.0, 80, 1, content=7), request(4, 3.0, 80, 1, content=8), request(5, 10.0, 16, 1)]
    feed(env, engine, arrivals)
    env.run(until=20.0)
    return engine, recorder.requests_frame().set_index("request_id"), engine.in_flight()


def test_requests_holding_loaded_blocks_in_the_queue_stall_the_engine_and_say_when() -> None:
    engine, rows, in_flight = _two_prompts_back_from_the_tier(None)
    assert engine.stalled_at_s == pytest.approx(3.02, abs=1e-12)
    assert sorted(s.rid for s in in_flight) == [3, 4, 5] and engine.kv.pool.num_free == 0
    assert list(rows.index) == [0, 1, 2]


def test_a_client_timeout_frees_the_blocks_a_waiting_request_loaded() -> None:
    """The stuck requests are aborted when their clients give up, and their loaded blocks go back to the pool (they
    stayed held before: request 5 then timed out on an idle engine)."""
    engine, rows, in_flight = _two_prompts_back_from_the_tier(1.0)
    assert in_flight == [] and engine.kv.pool.num_free == 8
    assert list(rows.loc[[3, 4], "status"]) == ["aborted", "aborted"] and rows.loc[5, "status"] == "finished"
    assert engine.stalled_at_s is None  # it moved again (request 5 ran)


def _two_prompts_back_at_2s(folder: Path) -> Path:
    """A mooncake trace (128-token blocks): two 2,100-token prompts, a 4,000-token one that evicts them from a
    32-block GPU cache, then the first two again together at 2 s."""
    lines = [(0, 2100, [1, 2, 3, 4, 5]), (500, 2100, [11, 12, 13, 14, 15]), (1000, 4000, list(range(21, 29)))]
    lines += [(2000, 2100, [1, 2, 3, 4, 5]), (2000, 2100, [11, 12, 13, 14, 15])]
    trace = folder / "trace.jsonl"
    trace.write_text(
        "".join(
            json.dumps({"timestamp": t, "input_length": n, "output_length": 1, "hash_ids": ids}) + "\n"
            for t, n, ids in lines
        )
    )
    return trace


def test_a_stalled_run_says_so_in_its_summary(tmp_path: Path) -> None:
    """The same stall through `simulate` (32 blocks of 128 tokens, a 16 GiB tier): two prompts come back from the
    tier at 2 s and hold every block; the summary's warnings say when and how many never finished."""
    trace = _two_prompts_back_at_2s(tmp_path)
    free = {"per_request_s": 0, "per_prompt_token_s": 0, "per_output_token_s": 0}
    engine = {"block_size": 128, "num_gpu_blocks_override": 32, "kv_offloading_size": 16, "api_server": free}
    scenario = Scenario.model_validate(
        {
            "model": "Llama-3.1-8B",
            "hardware": "H100-SXM5-80GB",
            "engine": engine,
            "workload": {"type": "trace", "format": "mooncake", "path": str(trace)},
        }
    )
    result = simulate(scenario)
    stalled = [w for w in result.summary().warnings if w.startswith("the engine stalled at")]
    assert len(stalled) == 1 and "2 requests waited" in stalled[0]
    assert (result.requests["status"] == "in_flight").sum() == 2


@pytest.mark.parametrize(
    ("parallel", "rows"),
    [
        ({}, ""),
        # an MoE model's data-parallel ranks step in lockstep: the 10-token request goes to rank 1, which goes on
        # stepping (dummy batches) while rank 0 is stuck
        ({"data_parallel_size": 2}, "0.0001,16,10\n"),
        ({"pipeline_parallel_size": 2}, ""),  # the pipeline-parallel loop
    ],
)
def test_a_preempted_request_whose_recompute_cannot_fit_stalls_the_engine_and_says_so(
    tmp_path: Path, parallel: dict[str, int], rows: str
) -> None:
    """No tier: gpt-oss-20b (full and sliding-window groups), 80 blocks, chunked prefill off. The 16-token request
    is preempted at 786 tokens; recomputing them as one prefill needs blocks in every group, 100 > 80, so it can
    never be admitted again (vLLM's scheduler would wait for ever too): the warning says so, without the tier,
    from each engine loop."""
    trace = tmp_path / "trace.csv"
    trace.write_text(f"arrival_s,input_tokens,output_tokens\n0.0,16,1000\n{rows}0.001,600,300\n")
    engine = {"num_gpu_blocks_override": 80, "enable_chunked_prefill": False, "max_num_batched_tokens": 4096}
    engine |= parallel
    scenario = Scenario.model_validate(
        {
            "model": "gpt-oss-20b",
            "hardware": "H100-SXM5-80GB",
            "engine": engine | {"max_model_len": 4096},
            "workload": {"type": "trace", "format": "csv", "path": str(trace)},
        }
    )
    result = simulate(scenario)
    (stalled,) = [w for w in result.summary().warnings if w.startswith("the engine stalled at")]
    assert "1 request waited" in stalled and "a preempted request whose recompute" in stalled
    assert list(result.requests["status"]).count("in_flight") == 1


def test_a_loaded_request_that_misses_one_schedule_keeps_its_copied_blocks_and_is_not_copied_twice() -> None:
    """Chunked prefill off, a 320-token budget. Prompts 4 and 5 (96 tokens of cached content + 204 new) both copy
    their 96 tokens back from the tier (2.000-2.030 s). At 2.030 s request 4 takes 204 of the budget; request 5's
    204 no longer fit this step, so it waits holding its copied blocks, and is admitted when the step ends
    (2.030 + 0.010 + 0.204 = 2.244 s): first token at 2.458 s. Before, it copied them a second time (first token
    2.488 s) and its prefix query was counted twice."""
    env, engine, recorder = make_engine(
        num_blocks=40,
        cost=COST,
        kv_offload_blocks=1000,
        kv_load_s_per_block=0.005,
        enable_chunked_prefill=False,
        max_model_len=320,
        max_num_batched_tokens=320,
    )

    def made(rid: int, arrival: float, segments: list[tuple[int, int]]) -> Request:
        return Request(rid, arrival, sum(n for _, n in segments), 1, tuple(segments), 0)

    arrivals = [made(0, 0.0, [(7, 96), (100, 204)]), made(1, 0.3, [(8, 96), (101, 204)])]
    arrivals += [made(2, 0.6, [(102, 310)]), made(3, 0.9, [(103, 310)])]  # evict 0 and 1 from the GPU
    arrivals += [made(4, 2.0, [(7, 96), (104, 204)]), made(5, 2.0, [(8, 96), (105, 204)])]
    feed(env, engine, arrivals)
    env.run()
    rows = recorder.requests_frame().set_index("request_id")
    assert rows.loc[5, "first_scheduled_s"] == pytest.approx(2.244, abs=1e-12)
    assert rows.loc[5, "first_token_s"] == pytest.approx(2.458, abs=1e-12) and rows.loc[5, "cached_tokens"] == 96
    assert engine.kv.query_tokens == sum(r.prompt_tokens for r in arrivals)  # each prompt queried once


def test_from_vllm_0_23_a_load_waits_for_the_blocks_in_flight_prefills_need_and_nothing_stalls() -> None:
    """vLLM 0.23 (pull request 44560): at 3 s A copies its 4 blocks and still needs a fifth for its last 16 tokens,
    so B's 4 do not fit beside that reservation (4 free - 1 reserved < 4): B waits in the queue holding nothing.
    A lands at 3.02 s, takes its fifth block and runs; B copies its blocks once A is done. Every request finishes,
    each prompt's 4 blocks come from the tier (cached 64 tokens)."""
    engine, rows, in_flight = _two_prompts_back_from_the_tier(None, "0.23")
    assert engine.stalled_at_s is None and in_flight == []
    assert list(rows["status"]) == ["finished"] * 6 and list(rows.loc[[3, 4], "cached_tokens"]) == [64, 64]
    assert rows.loc[3, "first_token_s"] == pytest.approx(3.02 + 0.010 + 0.016, abs=1e-12)  # A: 16 tokens computed
    assert rows.loc[4, "first_scheduled_s"] > rows.loc[3, "finish_s"]  # B's copy began once A freed its blocks


def test_validate_explains_requests_left_unserved_by_a_stalled_engine(tmp_path: Path) -> None:
    """The same stall through validate (which predicts with its cluster model): the SLO is missed because two
    requests are never served, and a warning finding says the engine stalled and why."""
    _two_prompts_back_at_2s(tmp_path)
    (tmp_path / "deploy.yaml").write_text(
        "name: tier\nmodel: Llama-3.1-8B\nhardware: H100-SXM5-80GB\nreplicas: 1\n"
        "engine: {block_size: 128, num_gpu_blocks_override: 32, kv_offloading_size: 16, api_server: {per_request_s: 0, "
        "per_prompt_token_s: 0, per_output_token_s: 0}}\n"
        "traffic: {type: trace, format: mooncake, path: trace.jsonl}\nslo: {ttft_p99_s: 5}\n"
    )
    report = json.loads(run_cli("validate", str(tmp_path / "deploy.yaml"), "--json").stdout)
    stalls = [f for f in report["findings"] if f["check"] == "stall"]
    assert len(stalls) == 1 and stalls[0]["severity"] == "warning"
    assert stalls[0]["message"].startswith("the engine stalled at ") and "2 requests waited" in stalls[0]["message"]
    assert not report["passed"] and report["prediction"]["ttft_p99_s"] == "inf"
