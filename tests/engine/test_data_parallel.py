"""Data-parallel engines (engine/data_parallel.py; vLLM 0.15.1 v1/engine/core.py, core_client.py, dp_utils.py):
the load balancer's pick, independent ranks of a dense model, the lockstep steps of an MoE model's ranks with
their dummy batches and padding, and a whole scenario on one replica and on a cluster (docs/engine-semantics.md
16)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import simpy

from tests.factories import engine_config, request
from ttftsim.config.scenario import Scenario
from ttftsim.engine.data_parallel import DUMMY_BATCH, DataParallelReplica, queue_lengths, serving_engine
from ttftsim.engine.engine import Engine
from ttftsim.engine.recorder import Recorder
from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.deployment import Deployment
from ttftsim.perf.iteration import IterationModel
from ttftsim.perf.kernels import MoeShape
from ttftsim.perf.linear import LinearStepModel
from ttftsim.perf.memory import stage_weight_bytes
from ttftsim.simulate import simulate

COST = LinearStepModel(0.01, 0.001)  # 10 ms a step + 1 ms per computed token


def replica(dp: int, lockstep: bool, **overrides: Any) -> tuple[simpy.Environment, Any, Recorder]:
    env, recorder = simpy.Environment(), Recorder(0.0)
    engine = serving_engine(env, engine_config(dp=dp, **overrides), COST, 1000, recorder, lockstep)
    return env, engine, recorder


def first_tokens(dp: int, lockstep: bool, sends: list[tuple[int, float, int]]) -> dict[int, float]:
    """Requests (id, send time, prompt tokens; one output token) through the load balancer."""
    env, engine, recorder = replica(dp, lockstep)

    def client() -> Any:
        for rid, at, prompt in sends:
            yield env.timeout(at - env.now)
            engine.submit(request(rid, at, prompt, 1))

    env.process(client())
    env.run(until=10.0)
    return dict(recorder.requests_frame().set_index("request_id")["first_token_s"])


def test_one_rank_is_a_plain_engine() -> None:
    _, engine, _ = replica(1, lockstep=True)
    assert isinstance(engine, Engine)


def test_the_load_balancer_picks_the_lowest_waiting_x4_plus_running_from_the_next_start() -> None:
    """Three requests at 0 s on two ranks: r0 -> rank 0 (both 0, start 0); r1 -> rank 1 (start 1, score 0
    against rank 0's 4); r2 -> rank 0 (start 0, 4 and 4: the first lowest). Dense model: independent ranks,
    rank 0 prefills 200 tokens in one step (10 + 200 ms), rank 1 its 100 (10 + 100 ms)."""
    env, engine, _ = replica(2, lockstep=False)
    assert isinstance(engine, DataParallelReplica)
    states = [engine.submit(request(rid, 0.0, 100, 1)) for rid in range(3)]
    ranks = engine.ranks
    assert [rank.scheduler.waiting.__len__() for rank in ranks] == [2, 1]
    assert queue_lengths(engine) == (3, 0) and engine.num_waiting == 3
    env.run(until=1.0)
    assert [round(state.first_token_s, 9) for state in states] == [0.21, 0.11, 0.21]


def test_equal_scores_go_to_the_rank_the_search_starts_from_which_moves_on_each_pick() -> None:
    """Both ranks with one waiting request (score 4 each): the first pick starts at rank 0 and keeps it (the first
    lowest), the next starts at rank 1 and keeps that one."""
    _, engine, _ = replica(2, lockstep=False)
    assert isinstance(engine, DataParallelReplica)
    for rank, rid in zip(engine.ranks, (0, 1), strict=True):
        rank.submit(request(rid, 0.0, 10, 1))
    assert [engine.pick(), engine.pick(), engine.pick()] == [engine.ranks[0], engine.ranks[1], engine.ranks[0]]


def test_the_ranks_of_one_replica_share_its_lmcache_remote_store() -> None:
    """Each DP rank is an LMCache instance of the same world size: one remote store, their own CPU tiers."""
    lmcache = {"max_local_cpu_size": 1.0, "remote_url": "lm://store:65432"}
    cfg = engine_config(dp=2, kv_transfer_config={"kv_connector": "LMCacheConnectorV1"}, lmcache=lmcache)
    engine = serving_engine(
        simpy.Environment(),
        replace(cfg, lmcache_chunk_bytes=2**20, lmcache_h2d_bytes_per_s=25e9),
        COST,
        100,
        Recorder(),
        True,
    )
    assert isinstance(engine, DataParallelReplica)
    (cpu0, remote0), (cpu1, remote1) = (rank.kv.lmcache.tiers for rank in engine.ranks)  # type: ignore[union-attr]
    assert remote0 is remote1 and cpu0 is not cpu1


def test_a_lockstep_step_pads_every_rank_to_the_largest_and_lasts_the_longest() -> None:
    """Mixtral TP 2 x DP 2 with EP on the iteration model (async scheduling): a rank decoding 200 long sequences
    beside a rank prefilling 512 tokens runs its linears and experts at 512 tokens, which makes its step longer
    than either rank's own; from idle each rank's host time is not hidden (idle_start_s); eager engines are not
    padded (gpu_model_runner.py)."""
    mixtral, h100 = load_model("Mixtral-8x7B-v0.1"), load_hardware("H100-SXM5-80GB")
    model = IterationModel(Deployment(mixtral, h100, 2, expert_parallel=True, dp=2, async_scheduling=True))
    env = simpy.Environment()
    engine = serving_engine(env, engine_config(dp=2), model, 1000, Recorder(), True)
    assert isinstance(engine, DataParallelReplica)
    prefill = BatchShape.from_sequences([512], [0])
    decode = BatchShape(num_decode_seqs=200, decode_kv_tokens=200 * 4000, num_sampled=200)
    padded = decode.with_dp_tokens(512)
    both = engine.step_time_s([prefill, decode], from_idle=False)
    assert both == pytest.approx(max(model.time_s(prefill), model.time_s(padded)), rel=1e-12)
    assert both > max(model.time_s(prefill), model.time_s(decode))
    from_idle = engine.step_time_s([prefill, decode], from_idle=True)
    assert from_idle == pytest.approx(max(model.idle_start_s(prefill), model.idle_start_s(padded)), rel=1e-12)
    assert from_idle > both
    alone = engine.step_time_s([prefill, None], from_idle=False)  # the other rank runs the dummy batch
    assert alone == pytest.approx(max(model.time_s(prefill), model.time_s(DUMMY_BATCH.with_dp_tokens(512))))
    eager = serving_engine(env, engine_config(dp=2, enforce_eager=True), model, 1000, Recorder(), True)
    assert isinstance(eager, DataParallelReplica)
    unpadded = max(model.time_s(prefill), model.time_s(decode))
    assert eager.step_time_s([prefill, decode], from_idle=False) == pytest.approx(unpadded, rel=1e-12)


def test_running_requests_count_once_and_waiting_ones_four_times() -> None:
    """Rank 0 runs two requests (score 2), rank 1 has one waiting (score 4): the next goes to rank 0."""
    env, engine, _ = replica(2, lockstep=False)
    assert isinstance(engine, DataParallelReplica)
    for rid in (0, 1):
        engine.ranks[0].submit(request(rid, 0.0, 10, 100))
    env.run(until=0.05)  # both prefilled, decoding
    engine.ranks[1].submit(request(2, 0.05, 10, 1))
    assert engine.pick() is engine.ranks[0]


def test_moe_ranks_step_together_each_step_as_long_as_the_longest_rank() -> None:
    """A 100-token and a 300-token prompt at 0 s on two ranks: independent (dense) ranks give the first token at
    0.11 and 0.31 s; an MoE model's ranks step together, so the short prompt's step lasts the long one's."""
    sends = [(0, 0.0, 100), (1, 0.0, 300)]
    assert first_tokens(2, lockstep=False, sends=sends) == pytest.approx({0: 0.11, 1: 0.31}, abs=1e-12)
    assert first_tokens(2, lockstep=True, sends=sends) == pytest.approx({0: 0.31, 1: 0.31}, abs=1e-12)


def test_an_idle_moe_rank_runs_the_dummy_batch_and_an_arrival_there_joins_the_next_step() -> None:
    """Rank 0 prefills 300 tokens from 0 s (0.31 s; its one output token ends it); a request at 0.1 s goes to idle
    rank 1 (score 0 against rank 0's 1), which is running the dummy batch in that step: its 100-token prefill
    starts with the next step at 0.31 s (10 + 100 ms), its first token at 0.42 s, not at 0.21 s."""
    got = first_tokens(2, lockstep=True, sends=[(0, 0.0, 300), (1, 0.1, 100)])
    assert got == pytest.approx({0: 0.31, 1: 0.42}, abs=1e-12)


def test_a_request_pushed_at_the_instant_a_lockstep_step_ends_is_in_the_next_step() -> None:
    """Rank 0 prefills 300 tokens over 0 .. 0.31 s and decodes on. A request (100 tokens) is pushed at 0.31 s by a
    process whose timer is processed after the step's end (created later, same instant); it goes to idle rank 1.
    The ranks wait for the events due at that instant before they schedule, so it is prefilled in the step from
    0.31 s (as long as its 0.11 s): first token 0.42 s, not 0.431 s after a decode step of 11 ms."""
    env, engine, recorder = replica(2, lockstep=True)
    engine.submit(request(0, 0.0, 300, 3))

    def push() -> Any:
        yield env.timeout(0.31)
        engine.submit(request(1, env.now, 100, 1))

    env.process(push())
    env.run(until=10.0)
    first = recorder.steps_frame().iloc[0]
    assert first["time_s"] + first["duration_s"] == 0.31  # pushed at the very instant rank 0's prefill ended
    got = dict(recorder.requests_frame().set_index("request_id")["first_token_s"])
    assert got == pytest.approx({0: 0.31, 1: 0.42}, abs=1e-12)


def test_every_request_ends_once_on_dp_ranks() -> None:
    """Conservation: 40 requests over four lockstep ranks, each recorded once, finished."""
    env, engine, recorder = replica(4, lockstep=True)

    def client() -> Any:
        for rid in range(40):
            yield env.timeout(0.013)
            engine.submit(request(rid, env.now, 50 + rid, 5 + rid % 7))

    env.process(client())
    env.run(until=20.0)
    frame = recorder.requests_frame()
    assert sorted(frame["request_id"]) == list(range(40))
    assert set(frame["status"]) == {"finished"}
    assert engine.in_flight() == [] and engine.num_running == engine.num_waiting == 0


def test_dp_padding_runs_the_dense_layers_at_the_largest_ranks_tokens() -> None:
    """Mixtral TP 2, DP 2 with expert parallelism: a rank decoding one sequence while the other runs 64 tokens
    pays its linears and experts at 64 tokens (padded; CUDA graphs capture 64), its attention at its own one."""
    model = IterationModel(
        Deployment(load_model("Mixtral-8x7B-v0.1"), load_hardware("H100-SXM5-80GB"), 2, expert_parallel=True, dp=2)
    )
    one = BatchShape(num_decode_seqs=1, decode_kv_tokens=500, num_sampled=1)
    padded = one.with_dp_tokens(64)
    assert padded.num_tokens == 1 and padded.decode_kv_tokens == 500
    extra = model.time_s(padded) - model.time_s(one)
    assert extra == pytest.approx(model._dense_s(64, 1) - model._dense_s(1, 1), rel=1e-9)
    assert extra > 0
    assert DUMMY_BATCH.num_tokens == 1 and DUMMY_BATCH.num_sampled == 0


def _scenario(model: str, dp: int, tp: int, **engine: Any) -> dict[str, Any]:
    return {
        "name": "dp",
        "model": model,
        "hardware": "H100-SXM5-80GB",
        "engine": {"tensor_parallel_size": tp, "data_parallel_size": dp, **engine},
        "workload": {
            "type": "synthetic",
            "arrivals": {"type": "poisson", "rate": 8},
            "prompt_tokens": {"type": "fixed", "value": 500},
            "output_tokens": {"type": "fixed", "value": 50},
            "num_requests": 80,
        },
        "seed": 3,
    }


@pytest.mark.parametrize(
    ("model", "engine"),
    [("Mixtral-8x7B-v0.1", {"enable_expert_parallel": True}), ("Llama-3.1-8B", {})],
    ids=["moe-lockstep", "dense-independent"],
)
def test_a_dp_scenario_runs_on_one_replica_and_on_a_cluster(tmp_path: Path, model: str, engine: Any) -> None:
    spec = _scenario(model, 2, 2, **engine)
    result = simulate(Scenario.model_validate(spec), tmp_path)
    assert result.replica.engine.gpus == 4 and result.replica.engine.rank_gpus == 2
    assert len(result.requests) == 80 and set(result.requests["status"]) == {"finished"}
    cluster = spec | {
        "cluster": {
            "node_pools": [{"name": "h100", "hardware": "H100-SXM5-80GB", "gpus_per_node": 8, "initial_nodes": 1}],
            "replicas": 2,
        }
    }
    on_cluster = simulate(Scenario.model_validate(cluster), tmp_path)
    assert len(on_cluster.requests) == 80 and set(on_cluster.requests["status"]) == {"finished"}
    assert set(on_cluster.requests["replica"]) == {0, 1}


def test_data_parallel_with_pipeline_parallel_is_refused() -> None:
    with pytest.raises(ValueError, match="data_parallel_size > 1 with pipeline_parallel_size > 1 is not modelled"):
        Scenario.model_validate(_scenario("Llama-3.1-8B", 2, 1, pipeline_parallel_size=2))


def test_without_ep_an_moe_models_dp_engines_slice_every_expert_over_tp_x_dp() -> None:
    """vLLM FusedMoEParallelConfig.make: with DP 2 and no EP the MoE layer's TP is flattened over TP x DP. Mixtral
    TP 1 x DP 2: each GPU holds half of every expert (as many bytes as EP's 4 whole experts of 8), and its fused
    kernel runs both ranks' tokens through slices 14,336 / 2 wide; the dispatch and combine as with EP."""
    hw, mixtral = load_hardware("H100-SXM5-80GB"), load_model("Mixtral-8x7B-v0.1")
    sliced = Deployment(mixtral, hw, 1, dp=2)
    whole = Deployment(mixtral, hw, 1, expert_parallel=True, dp=2)
    assert sliced.experts_sliced_over_dp and not whole.experts_sliced_over_dp
    assert stage_weight_bytes(sliced) == stage_weight_bytes(whole)
    assert stage_weight_bytes(sliced)[0] < stage_weight_bytes(Deployment(mixtral, hw, 1))[0]
    model = IterationModel(sliced)
    costs = model._ffn.costs
    tokens, h = 64, mixtral.hidden_size
    experts = MoeShape(8, 2, h, 14_336 // 2, model._ffn.weight_bytes, model._ffn.dtype)
    router = costs.gemm_s(tokens, 8, h, "bf16", 8 * h * 2.0)
    assert model._ffn.layer_s(tokens) == pytest.approx(router + costs.moe_s(128, experts.experts_hit(128), experts))
    assert model._ffn.all2all_s(tokens) == IterationModel(whole)._ffn.all2all_s(tokens) > 0
