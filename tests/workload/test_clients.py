"""Benchmark clients: aiperf's warm-up barrier and synchronized start, the turnaround between a response
and the next request (each client on its own) and the sending process's work (one send at a time), on a
replica with known step costs (10 ms + 1 ms per token)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.factories import make_engine
from ttftsim.config.scenario import Client
from ttftsim.config.workload import SyntheticWorkload
from ttftsim.perf.linear import LinearStepModel
from ttftsim.workload.sources import WorkloadContext
from ttftsim.workload.start import start_workload


def _run(
    client: Client,
    clients: int,
    requests: int,
    prompts: dict[str, object],
    seqs: int = 256,
    outputs: dict[str, object] | None = None,
) -> pd.DataFrame:
    env, engine, recorder = make_engine(cost=LinearStepModel(0.01, 0.001), max_num_seqs=seqs)
    spec = SyntheticWorkload.model_validate(
        {
            "type": "synthetic",
            "arrivals": {"type": "closed_loop", "clients": clients},
            "prompt_tokens": prompts,
            "output_tokens": outputs or {"type": "fixed", "value": 4},
            "num_requests": requests,
        }
    )
    start_workload(env, spec, WorkloadContext(np.random.default_rng(0), Path()), engine.submit, client)
    env.run()
    return recorder.requests_frame().sort_values("request_id").reset_index(drop=True)


def test_aiperf_starts_the_measured_phase_with_every_client_once_the_warmup_has_returned() -> None:
    prompts = {"type": "fixed", "value": 100}  # one sequence at a time: warm-up responses end apart
    client = Client(tool="aiperf", warmup_requests=2, turnaround_s=0.002, send_s=0.001)
    frame = _run(client, clients=2, requests=4, prompts=prompts, seqs=1)
    warm, measured = frame.iloc[:2], frame.iloc[2:]
    # both clients ready after their turnaround (2 ms each, side by side), then one process, one send (1 ms) each
    assert warm["arrival_s"].tolist() == pytest.approx([0.003, 0.004], abs=1e-12)
    assert warm["finish_s"].iloc[0] < warm["finish_s"].iloc[1]
    opened = warm["finish_s"].max()  # the barrier opens with the last warm-up response: both clients send
    assert sorted(measured["arrival_s"]) == pytest.approx([opened + 0.003, opened + 0.004], abs=1e-12)


def test_without_a_barrier_each_client_sends_when_its_own_response_ends() -> None:
    prompts = {"type": "uniform", "low": 50, "high": 400}
    frame = _run(Client(tool="vllm-bench", turnaround_s=0.0, send_s=0.0), clients=2, requests=4, prompts=prompts)
    assert frame["arrival_s"].iloc[:2].tolist() == [0.0, 0.0]  # c requests go out together
    assert sorted(frame["arrival_s"].iloc[2:]) == pytest.approx(sorted(frame["finish_s"].iloc[:2]), abs=1e-12)


def test_fixed_lengths_re_form_the_convoy_every_round() -> None:
    # Three clients, 100-token prompts, 4 output tokens, 10 ms + 1 ms per token: one prefill step of all three
    # (10 + 300 ms), then three decode steps of three sequences (13 ms each). They finish together, send again
    # together, and every round repeats the first exactly (the real server keeps such groups together too:
    # benchmarks/closed_loop_harness.py).
    frame = _run(
        Client(tool="vllm-bench", turnaround_s=0.0, send_s=0.0),
        clients=3,
        requests=9,
        prompts={"type": "fixed", "value": 100},
    )
    for round_ in range(3):
        rows = frame.iloc[3 * round_ : 3 * round_ + 3]
        start = round_ * 0.349
        assert rows["arrival_s"].tolist() == pytest.approx([start] * 3, abs=1e-9)
        assert rows["ttft_s"].tolist() == pytest.approx([0.31] * 3, abs=1e-9)
        assert rows["finish_s"].tolist() == pytest.approx([start + 0.31 + 3 * 0.013] * 3, abs=1e-9)


def test_spread_output_lengths_dissolve_the_convoy() -> None:
    # The same three clients asking for 2-8 output tokens (seed 0 draws 7, 6, 5 for the first round). After
    # the shared prefill (310 ms) the 5-token request ends 4 decode steps later (13 ms each); its client's next
    # request arrives alone and is prefilled beside the two still decoding (10 + 100 + 2 ms), the step in which
    # the 6-token request ends; its successor is prefilled in the next such step, where the 7-token one ends.
    # Each second-round request waits for no other prefill: 112 ms, not the convoy's 310.
    client, prompts = Client(tool="vllm-bench", turnaround_s=0.0, send_s=0.0), {"type": "fixed", "value": 100}
    frame = _run(client, clients=3, requests=6, prompts=prompts, outputs={"type": "uniform", "low": 2, "high": 8})
    assert frame["output_tokens"].iloc[:3].tolist() == [7, 6, 5]
    finishes = [0.31 + 4 * 0.013, 0.31 + 4 * 0.013 + 0.112, 0.31 + 4 * 0.013 + 2 * 0.112]
    assert sorted(frame["finish_s"].iloc[:3]) == pytest.approx(finishes, abs=1e-9)
    assert frame["arrival_s"].iloc[3:].tolist() == pytest.approx(finishes, abs=1e-9)  # one at a time
    assert frame["ttft_s"].iloc[3:].tolist() == pytest.approx([0.112] * 3, abs=1e-9)


def test_turnaround_delays_the_next_request() -> None:
    prompts = {"type": "fixed", "value": 100}
    frame = _run(Client(tool="guidellm", turnaround_s=0.05), clients=1, requests=3, prompts=prompts)
    gaps = frame["arrival_s"].iloc[1:].to_numpy() - frame["finish_s"].iloc[:-1].to_numpy()
    assert frame["arrival_s"].iloc[0] == pytest.approx(0.05, abs=1e-12)
    assert gaps.tolist() == pytest.approx([0.05, 0.05], abs=1e-12)


def test_each_client_waits_its_turnaround_on_its_own() -> None:
    # GuideLLM runs a worker process per stream: three clients whose responses end in the same step all send
    # 50 ms later, not 50, 100 and 150 ms later (fixed prompts: one prefill step of all three, 310 ms, then
    # three decode steps of 13 ms).
    prompts = {"type": "fixed", "value": 100}
    frame = _run(Client(tool="guidellm", turnaround_s=0.05), clients=3, requests=6, prompts=prompts)
    assert frame["arrival_s"].iloc[:3].tolist() == pytest.approx([0.05] * 3, abs=1e-12)
    assert frame["arrival_s"].iloc[3:].tolist() == pytest.approx([0.05 + 0.349 + 0.05] * 3, abs=1e-9)


def test_one_sending_process_sends_one_request_at_a_time() -> None:
    # vllm-bench's clients are coroutines of one asyncio process: its 0.32 ms of work per send (the tool's
    # default) puts three simultaneous sends 0.32 ms apart.
    frame = _run(Client(tool="vllm-bench"), clients=3, requests=3, prompts={"type": "fixed", "value": 100})
    assert frame["arrival_s"].tolist() == pytest.approx([0.00032, 0.00064, 0.00096], abs=1e-12)


def test_a_real_tool_refuses_an_ideal_ramp() -> None:
    from ttftsim.config.scenario import Scenario

    with pytest.raises(ValueError, match="ramp_up_s"):
        Scenario.model_validate(
            {
                "model": "Llama-3.1-8B",
                "hardware": "H100-SXM5-80GB",
                "client": {"tool": "aiperf"},
                "workload": {
                    "type": "synthetic",
                    "arrivals": {"type": "closed_loop", "clients": 2, "ramp_up_s": 1.0},
                    "prompt_tokens": {"type": "fixed", "value": 100},
                    "output_tokens": {"type": "fixed", "value": 4},
                    "num_requests": 4,
                },
            }
        )


# ---- the tool's prompt dataset (aiperf/genai-perf --num-dataset-entries) ----

UNIFORM = {"type": "uniform", "low": 40, "high": 400}


def test_aiperf_cycles_its_dataset_each_pass_in_a_new_order_and_repeats_hit_the_prefix_cache() -> None:
    client = Client(tool="aiperf", dataset_entries=3, turnaround_s=0.0)
    frame = _run(client, clients=1, requests=7, prompts=UNIFORM)
    lengths = frame["prompt_tokens"].tolist()
    assert len(set(lengths[:3])) == 3  # three entries, each once in the first pass
    assert sorted(lengths[3:6]) == sorted(lengths[:3])  # the second pass: the same three, reshuffled
    assert lengths[6] in lengths[:3]
    # vLLM serves a repeated prompt from cache up to its last full block before the last token (16-token blocks)
    expected = [0, 0, 0] + [(n - 1) // 16 * 16 for n in lengths[3:]]
    assert frame["cached_tokens"].tolist() == expected


def test_random_sampling_draws_each_entry_with_replacement_and_repeats_hit_the_prefix_cache() -> None:
    # aiperf 0.1 (DatasetManager._return_any_conversation: random.choice over the dataset for every request).
    # Three entries, their prompt lengths drawn first from the workload's generator, then one uniform pick
    # per request from the same stream: a repeat can come before every entry has been sent.
    client = Client(tool="aiperf", dataset_entries=3, dataset_sampling="random", turnaround_s=0.0)
    frame = _run(client, clients=1, requests=8, prompts=UNIFORM)
    rng = np.random.default_rng(0)
    entries = [int(rng.integers(40, 401)) for _ in range(3)]
    picks = [int(rng.integers(3)) for _ in range(8)]
    assert frame["prompt_tokens"].tolist() == [entries[i] for i in picks]
    seen: set[int] = set()
    cached = []
    for i in picks:  # a repeated entry is served from cache up to its last full block before the last token
        cached.append((entries[i] - 1) // 16 * 16 if i in seen else 0)
        seen.add(i)
    assert frame["cached_tokens"].tolist() == cached
    assert len(set(picks[:3])) < 3  # a repeat within the first three requests, which no pass-wise order makes


def test_genai_perf_cycles_its_dataset_in_order() -> None:
    frame = _run(Client(tool="genai-perf", dataset_entries=2, turnaround_s=0.0), 1, 5, UNIFORM)
    lengths = frame["prompt_tokens"].tolist()
    assert lengths[2:] == [lengths[0], lengths[1], lengths[0]]


def test_the_default_dataset_is_the_tools_own() -> None:
    from ttftsim.workload.clients import behaviour

    assert behaviour(Client(tool="aiperf")).dataset_entries == 100  # aiperf's NUM_DATASET_ENTRIES
    assert behaviour(Client(tool="genai-perf")).dataset_entries == 100
    assert behaviour(Client(tool="aiperf", dataset_entries="unique")).dataset_entries is None
    assert behaviour(Client(tool="aiperf")).sampling == "shuffle"  # --dataset-sampling-strategy default
    assert behaviour(Client(tool="genai-perf")).sampling == "sequential"
    assert behaviour(Client(tool="aiperf", dataset_sampling="random")).sampling == "random"
    for tool in ("ideal", "vllm-bench", "inference-perf", "guidellm"):  # a new prompt per request
        assert behaviour(Client(tool=tool)).dataset_entries is None


def test_a_unique_dataset_never_repeats_a_prompt() -> None:
    frame = _run(
        Client(tool="aiperf", dataset_entries="unique", turnaround_s=0.0), 1, 6, {"type": "fixed", "value": 64}
    )
    assert frame["cached_tokens"].tolist() == [0] * 6


def test_an_open_loop_workload_draws_from_the_dataset_too() -> None:
    from ttftsim.workload.sources import open_loop_requests

    spec = SyntheticWorkload.model_validate(
        {
            "type": "synthetic",
            "arrivals": {"type": "constant", "rate": 10.0},
            "prompt_tokens": UNIFORM,
            "output_tokens": {"type": "fixed", "value": 4},
            "num_requests": 6,
        }
    )
    ctx = WorkloadContext(np.random.default_rng(0), Path())
    requests = open_loop_requests(spec, ctx, Client(tool="genai-perf", dataset_entries=3))
    contents = [r.segments for r in requests]
    assert contents[3:] == contents[:3] and len(set(contents[:3])) == 3
    assert not any(r.private for r in requests)  # repeated prompts share blocks


@pytest.mark.parametrize(
    ("client", "field"),
    [({"dataset_entries": 10}, "dataset_entries"), ({"dataset_sampling": "random"}, "dataset_sampling")],
)
def test_a_tools_dataset_needs_a_synthetic_workload(client: dict[str, object], field: str) -> None:
    from ttftsim.config.scenario import Scenario

    with pytest.raises(ValueError, match=f"client.{field} applies to synthetic workloads"):
        Scenario.model_validate(
            {
                "model": "Llama-3.1-8B",
                "hardware": "H100-SXM5-80GB",
                "client": {"tool": "aiperf", **client},
                "workload": {
                    "type": "shared_prefix",
                    "arrivals": {"type": "poisson", "rate": 1.0},
                    "num_groups": 1,
                    "num_prompts_per_group": 2,
                    "system_prompt_len": 10,
                    "question_len": 10,
                    "output_len": 4,
                    "num_requests": 4,
                },
            }
        )
