"""The API-server process: one FIFO server for ingress and output work, on hand-computed cases.

Costs: 1 ms per request, 0.1 ms per output token; steps cost 10 ms + 1 ms per scheduled token.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.factories import feed, make_engine, request
from ttftsim.config.scenario import Scenario
from ttftsim.config.versions import ApiServerCosts
from ttftsim.engine.api_server import ApiServer, ApiServerCostsS
from ttftsim.errors import InputError
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.linear import LinearStepModel
from ttftsim.simulate import simulate
from ttftsim.step_costs import SharedCoreCost

COSTS = ApiServerCostsS(per_request_s=0.001, per_output_token_s=0.0001)


def test_work_queues_first_in_first_out() -> None:
    api = ApiServer(COSTS)
    assert api.ingress(0.0, 100) == pytest.approx(0.001)
    assert api.ingress(0.0005, 100) == pytest.approx(0.002)  # waits for the first request's work
    assert api.outputs(0.0015, 10) == pytest.approx(0.003)  # behind both requests
    assert api.outputs(0.010, 10) == pytest.approx(0.011)  # idle by then


@pytest.mark.parametrize("durations", [[0.01] * 5, [0.0005, 0.0001, 0.01, 0.0002, 0.03]])
def test_a_decode_run_equals_its_steps_one_by_one(durations: list[float]) -> None:
    ends = np.cumsum(durations).tolist()
    run, steps, tracked = ApiServer(COSTS), ApiServer(COSTS), ApiServer(COSTS)
    run.free_at = steps.free_at = tracked.free_at = 0.0012
    run.output_run(0.001, ends, durations, 8)
    delivered: list[float] = []  # when each step's tokens are sent (a first visible token inside a run waits so)
    tracked.output_run(0.001, ends, durations, 8, delivered)
    sent = [steps.outputs(0.001 + end, 8) for end in ends]
    assert run.free_at == pytest.approx(steps.free_at, abs=1e-15)
    assert delivered == pytest.approx(sent, abs=1e-15) and tracked.free_at == pytest.approx(steps.free_at, abs=1e-15)


def _ttfts(arrivals: list[tuple[float, int, int]], closed_form: bool = True) -> list[float]:
    api = ApiServerCosts(per_request_s=0.001, per_prompt_token_s=0.0, per_output_token_s=0.0001)
    env, engine, recorder = make_engine(cost=LinearStepModel(0.01, 0.001), closed_form=closed_form, api_server=api)
    feed(env, engine, [request(i, t, prompt, output) for i, (t, prompt, output) in enumerate(arrivals)])
    env.run()
    return [float(x) for x in recorder.requests_frame().sort_values("request_id")["ttft_s"]]


def test_one_request_pays_its_ingress_and_its_token() -> None:
    # seen by the engine at 0.001, prefill 0.110 -> token at 0.111, sent 0.1 ms later
    assert _ttfts([(0.0, 100, 3)]) == pytest.approx([0.1111], abs=1e-12)


@pytest.mark.parametrize("closed_form", [True, False])
def test_two_requests_at_once_queue_in_the_server_and_miss_the_first_step(closed_form: bool) -> None:
    # A reaches the engine at 0.001 and starts a step (0.001 .. 0.111); B reaches it at 0.002, joins the
    # next step with A's decode (0.111 .. 0.172: 10 ms + 51 tokens); that step's 2 tokens go out 0.2 ms later.
    assert _ttfts([(0.0, 100, 3), (0.0, 50, 2)], closed_form) == pytest.approx([0.1111, 0.1722], abs=1e-12)


def test_a_step_batch_costs_its_dispatch_plus_its_tokens() -> None:
    api = ApiServer(ApiServerCostsS(per_output_token_s=0.0001, per_step_s=0.0005))
    assert api.outputs(0.010, 10) == pytest.approx(0.0115)  # 0.5 ms for the batch + 10 x 0.1 ms
    assert api.outputs(0.011, 1) == pytest.approx(0.0121)  # queued behind the first batch
    assert api.outputs(0.020, 0) == pytest.approx(0.020)  # a step that sampled nothing costs nothing


@pytest.mark.parametrize("closed_form", [True, False])
def test_a_request_sent_mid_decode_run_queues_behind_the_tokens_already_sent(closed_form: bool) -> None:
    """The API server works in time order: B's ingress waits for A's tokens of decode steps that ended before B
    was sent, whether those steps ran one by one or as one closed-form decode run (handed to the server when B
    arrives, engine.py _account_run). 1.25 ms per request, 10 ms per output token; steps 10 ms + 1 ms a token.
    A: ingress to 0.00125, prefill to 0.11125, decode step k ends e_k = 0.11125 + 0.011 k, its token on the
    server e_k .. e_k + 0.010. B is sent at e_2 + 0.0095 = 0.14275, the server is busy to 0.14325, so B reaches
    the engine at 0.1445, just after step 3 started (e_3 = 0.14425; without the wait it would be 0.144, in time):
    B joins step 4 (0.15525 .. 0.21625: A's decode and B's 50 tokens) and its token is on the server after
    step 3's (0.1445 .. 0.1545), 0.21625 .. 0.23625 (two tokens): TTFT 0.23625 - 0.14275."""
    api = ApiServerCosts(per_request_s=0.00125, per_prompt_token_s=0.0, per_output_token_s=0.010)
    env, engine, recorder = make_engine(cost=LinearStepModel(0.01, 0.001), closed_form=closed_form, api_server=api)
    feed(env, engine, [request(0, 0.0, 100, 50), request(1, 0.14275, 50, 2)])
    env.run()
    ttfts = [float(x) for x in recorder.requests_frame().sort_values("request_id")["ttft_s"]]
    assert ttfts == pytest.approx([0.12125, 0.23625 - 0.14275], abs=1e-12)


def test_the_api_server_time_is_the_request_frontend_share_and_a_refused_request_is_recorded_rejected() -> None:
    # request 0, sent at 0.5: 1 ms + 100 x 0.01 ms of ingress, the engine has it at 0.502, its prefill ends at
    # 0.612. Request 1, sent at 0.6, needs 2,002 tokens of KV, more than the 100 blocks of 16 hold: refused, but
    # only once its ingress (1 ms + 2,000 x 0.01 ms, 0.600 .. 0.621) is done, and request 0's first token waits
    # for that: sent at 0.621. Request 0's API-server share (frontend_s) is 0.002 + 0.009, its TTFT 0.121.
    api = ApiServerCosts(per_request_s=0.001, per_prompt_token_s=0.00001, per_output_token_s=0.0)
    env, engine, recorder = make_engine(num_blocks=100, api_server=api, block_size=16)
    feed(env, engine, [request(0, 0.5, 100, 2), request(1, 0.6, 2000, 2)])
    env.run()
    frame = recorder.requests_frame().sort_values("request_id")
    first, refused = frame.iloc[0], frame.iloc[1]
    assert first["status"] == "finished"
    assert (first["first_scheduled_s"], first["first_token_s"]) == pytest.approx((0.502, 0.612), abs=1e-12)
    assert (first["frontend_s"], first["ttft_s"]) == pytest.approx((0.011, 0.121), abs=1e-12)
    assert (refused["status"], refused["reason"]) == ("rejected", "2002 tokens exceed the KV cache (100 blocks of 16)")
    assert np.isnan(refused["ttft_s"]) and refused["generated_tokens"] == 0


def _run(hop_latency_s: float, arrivals: dict[str, object], num_requests: int) -> pd.DataFrame:
    """Requests of 100 prompt tokens and 3 output tokens through `simulate`, on a measured step cost of 10 ms
    + 1 ms per scheduled token and an API server of 1 ms per request and 0.1 ms per output token."""
    scenario = _scenario(hop_latency_s, arrivals, num_requests)
    return simulate(scenario).requests.sort_values("request_id").reset_index(drop=True)


def _scenario(
    hop_latency_s: float, arrivals: dict[str, object], num_requests: int, server_ttft_extra_s: float = 0.0
) -> Scenario:
    model = Path(__file__).resolve().parents[1] / "data" / "reports" / "cpu-server-model" / "config.json"
    return Scenario.model_validate(
        {
            "model": str(model),
            "hardware": "CPU-host",
            "engine": {
                "vllm_version": "0.32",
                "max_num_batched_tokens": 512,
                "max_model_len": 2048,
                "num_gpu_blocks_override": 1000,
                "enable_prefix_caching": False,
                "api_server": {
                    "per_request_s": 0.001,
                    "per_prompt_token_s": 0.0,
                    "per_output_token_s": 0.0001,
                    "hop_latency_s": hop_latency_s,
                    "server_ttft_extra_s": server_ttft_extra_s,
                },
            },
            "workload": {
                "type": "synthetic",
                "arrivals": arrivals,
                "prompt_tokens": {"type": "fixed", "value": 100},
                "output_tokens": {"type": "fixed", "value": 3},
                "num_requests": num_requests,
            },
            "measured_step_cost": {"fixed_s": 0.01, "per_token_s": 0.001, "source": "test"},
            "client": {"tool": "ideal"},
        }
    )


def _one_request_run(hop_latency_s: float) -> tuple[float, float]:
    row = _run(hop_latency_s, {"type": "constant", "rate": 1.0}, 1).iloc[0]
    return float(row["ttft_s"]), float(row["e2e_s"])


def test_the_hand_offs_delay_every_request_by_their_latency_and_queue_nothing() -> None:
    # ingress 1 ms, prefill step 10 + 100 x 1 = 110 ms, its token sent 0.1 ms later: 111.1 ms; then two decode
    # steps of 11 ms each, the last token sent with the first one's delay; the hand-offs add 4 ms to both
    ttft, e2e = _one_request_run(0.0)
    assert ttft == pytest.approx(0.1111, abs=1e-12)
    assert e2e == pytest.approx(0.1111 + 0.022, abs=1e-12)
    with_hops = _one_request_run(0.004)
    assert with_hops == pytest.approx((ttft + 0.004, e2e + 0.004), abs=1e-12)


def test_vllms_own_ttft_runs_from_the_engines_arrival_plus_the_measured_extra() -> None:
    # vllm:time_to_first_token_seconds starts when the parsed request enters the engine client (after the API
    # server's 1 ms of ingress) and ends at the output handler: the 110 ms prefill step plus the 3 ms the
    # API server adds inside vLLM's window; the client's 115.1 ms (ingress, step, 0.1 ms output, 4 ms
    # hand-offs) is not what the histogram holds, and the extra delays no request
    result = simulate(_scenario(0.004, {"type": "constant", "rate": 1.0}, 1, server_ttft_extra_s=0.003))
    assert result.requests["ttft_s"].iloc[0] == pytest.approx(0.1151, abs=1e-12)
    lines = result.prometheus().splitlines()
    total = next(line for line in lines if line.startswith("vllm:time_to_first_token_seconds_sum"))
    assert float(total.rsplit(" ", 1)[1]) == pytest.approx(0.113, abs=1e-12)
    assert 'vllm:time_to_first_token_seconds_bucket{model_name="' in "\n".join(lines)
    le_100ms = next(
        line for line in lines if line.startswith("vllm:time_to_first_token_seconds_bucket") and 'le="0.1"' in line
    )
    le_250ms = next(
        line for line in lines if line.startswith("vllm:time_to_first_token_seconds_bucket") and 'le="0.25"' in line
    )
    assert (le_100ms.endswith(" 0.0"), le_250ms.endswith(" 1.0")) == (True, True)
    without = simulate(_scenario(0.004, {"type": "constant", "rate": 1.0}, 1)).requests
    assert without["ttft_s"].iloc[0] == result.requests["ttft_s"].iloc[0]


def test_two_requests_at_once_each_wait_the_hand_offs_once() -> None:
    # B's ingress queues behind A's (1 ms), so B misses A's prefill step; the hand-offs add
    # 4 ms to each, not 8 ms to the second (they do not queue)
    burst = {"type": "closed_loop", "clients": 2}  # both sent at 0
    base, hops = (_run(hop, burst, 2)["ttft_s"].to_numpy() for hop in (0.0, 0.004))
    assert base[1] > base[0] + 0.05  # B waited for A's step
    assert hops == pytest.approx(base + 0.004, abs=1e-12)


def test_a_closed_loop_client_sends_again_when_it_has_read_the_response() -> None:
    # one ideal client: its second request goes out when the first one's last token has reached it, the
    # API server's delay and the 4 ms of hand-offs included (arrival + e2e)
    rows = _run(0.004, {"type": "closed_loop", "clients": 1}, 2)
    assert rows["arrival_s"][1] == pytest.approx(rows["arrival_s"][0] + rows["e2e_s"][0], abs=1e-12)


# ---- the API server on the engine core's CPU core (engine.api_server_shares_core) ----

SHARED_API = ApiServerCosts(per_request_s=0.0, per_prompt_token_s=0.0, per_output_token_s=0.0001, per_step_s=0.0005)
ONE_REQUEST = {  # 100 prompt tokens, 3 out
    "type": "synthetic",
    "arrivals": {"type": "poisson", "rate": 1.0},
    "prompt_tokens": {"type": "fixed", "value": 100},
    "output_tokens": {"type": "fixed", "value": 3},
    "num_requests": 1,
}


def test_a_shared_core_adds_the_outputs_work_to_every_step() -> None:
    inner = LinearStepModel(0.01, 0.001, 1e-6, 0.0, 0.0002)
    shared = SharedCoreCost(inner, SHARED_API)
    decode = BatchShape(num_decode_seqs=8, decode_kv_tokens=800, num_sampled=8)
    # 8 sampled tokens: 0.5 ms for the batch + 8 x 0.1 ms
    assert shared.time_s(decode) == pytest.approx(inner.time_s(decode) + 0.0013, abs=1e-15)
    # a step started from idle: the outputs before it went out while the engine waited
    assert shared.idle_start_s(decode) == inner.idle_start_s(decode) < shared.time_s(decode)
    assert shared.decode_step_s(8)(800) == pytest.approx(shared.time_s(decode), abs=1e-15)
    run = shared.decode_run_s(8, 800, 3)
    assert run == pytest.approx(inner.decode_run_s(8, 800, 3) + 0.0013, abs=1e-15)
    chunk = BatchShape(num_prefill_seqs=1, prefill_tokens=100, prefill_attn_pairs=5050, prefill_kv_tokens=100)
    assert shared.time_s(chunk) == inner.time_s(chunk)  # a chunk that samples nothing hands the server nothing


def _one_request(shares_core: bool) -> pd.Series:
    scenario = Scenario.model_validate(
        {
            "model": "llama-2-7b",
            "hardware": "CPU-host",
            "engine": {
                "api_server": SHARED_API.model_dump(),
                "api_server_shares_core": shares_core,
            },
            "measured_step_cost": {"fixed_s": 0.01, "per_token_s": 0.0001, "source": "by hand"},
            "workload": ONE_REQUEST,
        }
    )
    return simulate(scenario, Path()).requests.iloc[0]


def test_each_step_after_the_first_waits_for_the_servers_work_on_the_outputs() -> None:
    alone, shared = _one_request(False), _one_request(True)
    # the prefill starts from idle (nothing to wait for), then two decodes of one token: 0.5 + 0.1 ms more each;
    # the tokens' own delivery (0.6 ms after each step) is the same with or without the shared core
    assert shared["ttft_s"] == pytest.approx(alone["ttft_s"], abs=1e-12)
    assert shared["e2e_s"] - alone["e2e_s"] == pytest.approx(2 * 0.0006, abs=1e-12)


@pytest.mark.parametrize(("parallel", "what"), [("pipeline_parallel_size", "pipeline"), ("data_parallel_size", "data")])
def test_a_shared_core_with_stages_or_ranks_is_refused(parallel: str, what: str) -> None:
    scenario = Scenario.model_validate(
        {
            "model": "llama-2-7b",
            "hardware": "H100-SXM5-80GB",
            "engine": {"api_server_shares_core": True, parallel: 2},
            "workload": ONE_REQUEST,
        }
    )
    with pytest.raises(InputError, match=f"api_server_shares_core.*{what} parallelism"):
        simulate(scenario, Path())
