"""Async scheduling and prefix blocks registered at allocation, on small cases computed by hand.

Costs: fixed 10 ms per iteration + 1 ms per scheduled token (LinearStepModel(0.01, 0.001)).
A: arrives at 0, prompt 100 -> prefill 0 .. 0.110, then decodes of 11 ms (0.110 .. 0.121 .. 0.132 ...).
B: arrives at 0.115, while A's first decode runs, prompt 50, output 2.
- synchronous engine: B joins the step scheduled at 0.121 (cost 0.01 + 0.051) -> first token 0.182.
- async scheduling (vLLM step_with_batch_queue): the step starting at 0.121 was scheduled at 0.110, when
  B was not there; B enters the step after it (0.132 .. 0.193).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import feed, make_engine, request
from ttftsim.perf.linear import LinearStepModel

COST = LinearStepModel(0.01, 0.001)


def _ttft(async_scheduling: bool, closed_form: bool, arrivals: list[tuple[float, int, int]]) -> list[float]:
    env, engine, recorder = make_engine(
        cost=COST, closed_form=closed_form, async_scheduling=async_scheduling, enable_prefix_caching=False
    )
    feed(env, engine, [request(i, t, prompt, output) for i, (t, prompt, output) in enumerate(arrivals)])
    env.run()
    frame = recorder.requests_frame().sort_values("request_id")
    return [float(x) for x in frame["ttft_s"]]


@pytest.mark.parametrize("closed_form", [True, False])
def test_a_request_arriving_during_a_step_enters_the_step_after_next(closed_form: bool) -> None:
    arrivals = [(0.0, 100, 10), (0.115, 50, 2)]
    sync = _ttft(False, closed_form, arrivals)
    asyn = _ttft(True, closed_form, arrivals)
    assert sync == pytest.approx([0.110, 0.182 - 0.115], abs=1e-12)
    assert asyn == pytest.approx([0.110, 0.193 - 0.115], abs=1e-12)


def test_an_idle_engine_schedules_an_arrival_at_once() -> None:
    assert _ttft(True, True, [(1.0, 100, 3)]) == pytest.approx([0.110], abs=1e-12)


def test_when_the_step_in_flight_ends_every_request_the_waiting_one_is_scheduled_at_its_end() -> None:
    # A has one output token: nothing continues after its prefill, so vLLM's second batch is empty and
    # B (arrived at 0.05) is scheduled as soon as A's step ends, as in a synchronous engine.
    arrivals = [(0.0, 100, 1), (0.05, 50, 2)]
    expected = [0.110, 0.110 - 0.05 + 0.01 + 0.05]
    assert _ttft(True, True, arrivals) == pytest.approx(expected, abs=1e-12)
    assert _ttft(False, True, arrivals) == pytest.approx(expected, abs=1e-12)


def test_async_is_off_on_cpu_hosts_and_follows_the_version() -> None:
    from ttftsim.config.engine import EngineArgs
    from ttftsim.config.resolved_engine import resolve_engine
    from ttftsim.hardware.catalog import load_hardware

    def resolved(version: str, hardware: str, flag: bool | None = None) -> bool:
        args = EngineArgs(vllm_version=version, async_scheduling=flag)
        return resolve_engine(args, load_hardware(hardware), 4096, "bf16").async_scheduling

    assert resolved("0.15.1", "H100-SXM5-80GB")
    assert not resolved("0.13.0", "H100-SXM5-80GB")
    assert resolved("0.13.0", "H100-SXM5-80GB", True)
    assert not resolved("0.15.1", "H100-SXM5-80GB", False)
    assert not resolved("0.32.0", "CPU-host")


def test_async_with_pipeline_parallelism_speculation_and_nodes_follows_each_release() -> None:
    """vLLM's VllmConfig.__post_init__ as read in each release's wheel: 0.14 refuses async scheduling with
    PP (off by default), 0.15 on has no such gate; speculative methods that keep it: EAGLE/MTP, draft models
    from 0.28, every method from 0.33 (the V2 runner); an engine larger than a node (the Ray executor, which
    does not support it) has it off unless asked for."""
    import re

    from ttftsim.config.engine import EngineArgs
    from ttftsim.config.resolved_engine import resolve_engine
    from ttftsim.hardware.catalog import load_hardware

    h100 = load_hardware("H100-SXM5-80GB")

    def resolved(version: str, flag: bool | None = None, **args: object) -> bool:
        engine = EngineArgs(vllm_version=version, async_scheduling=flag, **args)  # type: ignore[arg-type]
        return resolve_engine(engine, h100, 4096, "bf16").async_scheduling

    assert not resolved("0.14.1", pipeline_parallel_size=2)
    with pytest.raises(ValueError, match="not compatible with pipeline_parallel_size > 1"):
        resolved("0.14.1", True, pipeline_parallel_size=2)
    assert resolved("0.15.0", pipeline_parallel_size=2) and resolved("0.34.0", True, pipeline_parallel_size=2)
    draft = {"method": "draft_model", "num_speculative_tokens": 3, "model": "Llama-3.2-1B", "acceptance_rate": 0.6}
    ngram = {"method": "ngram", "num_speculative_tokens": 3, "acceptance_rate": 0.3}
    assert not resolved("0.27.0", speculative_config=draft) and resolved("0.28.0", speculative_config=draft)
    assert not resolved("0.32.0", speculative_config=ngram) and resolved("0.33.0", speculative_config=ngram)
    with pytest.raises(ValueError, match=re.escape("not supported with speculative method draft_model")):
        resolved("0.27.0", True, speculative_config=draft)
    assert not resolved("0.15.1", tensor_parallel_size=8, pipeline_parallel_size=2)  # 16 GPUs, 8 per node
    assert resolved("0.15.1", True, tensor_parallel_size=8, pipeline_parallel_size=2)
    assert resolved("0.15.1", tensor_parallel_size=8)


def test_blocks_being_computed_are_hit_by_a_request_admitted_in_the_same_step() -> None:
    # Two identical 64-token prompts at once, block 16, empty cache: the first allocates and registers its
    # 4 full blocks while being scheduled; the second, admitted in the same step, hits 3 of them (a hit
    # stops one token short of the prompt, rounded down to blocks) and computes 16 tokens.
    env, engine, recorder = make_engine(cost=COST, block_size=16, async_scheduling=False)
    feed(env, engine, [request(0, 0.0, 64, 1, content=7), request(1, 0.0, 64, 1, content=7)])
    env.run()
    assert engine.kv.hit_tokens == 48
    assert engine.kv.query_tokens == 128
    first_step = recorder.steps_frame().iloc[0]
    assert first_step["num_tokens"] == 64 + 16
    frame = recorder.requests_frame().sort_values("request_id")
    assert frame["cached_tokens"].tolist() == [0, 48]


class _HostExposedFromIdle:
    """Steps of 10 ms + 1 ms per token when another step hides their host time, 3 ms more from idle."""

    def __init__(self) -> None:
        self.inner = LinearStepModel(0.01, 0.001)

    def time_s(self, shape):  # type: ignore[no-untyped-def]
        return self.inner.time_s(shape)

    def idle_start_s(self, shape):  # type: ignore[no-untyped-def]
        return self.inner.time_s(shape) + 0.003

    def decode_step_s(self, num_seqs):  # type: ignore[no-untyped-def]
        return self.inner.decode_step_s(num_seqs)

    def decode_run_s(self, num_seqs, kv_tokens, steps):  # type: ignore[no-untyped-def]
        return self.inner.decode_run_s(num_seqs, kv_tokens, steps)


def test_a_step_started_from_idle_pays_its_host_time() -> None:
    cost = _HostExposedFromIdle()
    env, engine, recorder = make_engine(cost=cost, closed_form=False, async_scheduling=True)
    feed(env, engine, [request(0, 0.0, 100, 3), request(1, 5.0, 100, 3)])
    env.run()
    steps = recorder.steps_frame()["duration_s"].tolist()
    # each request: a prefill from idle (0.113), then two decodes hidden behind the step before (0.011)
    assert steps == pytest.approx([0.113, 0.011, 0.011, 0.113, 0.011, 0.011], abs=1e-12)


def test_iteration_model_hides_host_time_only_behind_a_step_in_flight() -> None:
    from ttftsim.hardware.catalog import load_hardware
    from ttftsim.model.catalog import load_model
    from ttftsim.perf.batch import BatchShape
    from ttftsim.perf.iteration import Deployment, IterationModel

    model, hardware = load_model("Llama-3.1-8B"), load_hardware("H100-SXM5-80GB")
    sync = IterationModel(Deployment(model, hardware, max_num_seqs=256))
    asyn = IterationModel(Deployment(model, hardware, max_num_seqs=256, async_scheduling=True))
    shape = BatchShape.from_sequences([1000], [0])
    host = sync.overhead_s(shape)
    assert asyn.idle_start_s(shape) == pytest.approx(sync.time_s(shape), rel=1e-12)
    assert asyn.time_s(shape) == pytest.approx(sync.time_s(shape) - host, rel=1e-12)


@pytest.mark.parametrize("closed_form", [True, False])
def test_a_request_pushed_at_the_instant_a_step_ends_is_in_the_next_schedule(closed_form: bool) -> None:
    # Synchronous engine, requests pushed (as the cluster's gateway does). A (prompt 100, 3 tokens) is prefilled
    # over 0 .. 0.110. B is pushed at 0.110 by a process whose timer is processed after the step's end (created
    # later, same instant): the engine waits for the events due at that instant before it schedules, so B is
    # prefilled with A's first decode (0.01 + 0.001 x 51 = 0.061 s: TTFT 0.061), not after it (0.072).
    env, engine, recorder = make_engine(cost=COST, closed_form=closed_form, enable_prefix_caching=False)
    engine.submit(request(0, 0.0, 100, 3))

    def push_b() -> Any:
        yield env.timeout(0.110)
        engine.submit(request(1, env.now, 50, 2))

    env.process(push_b())
    env.run()
    first = recorder.steps_frame().iloc[0]
    assert first["time_s"] + first["duration_s"] == 0.110  # B was pushed at the very instant A's prefill ended
    frame = recorder.requests_frame().sort_values("request_id")
    assert [float(x) for x in frame["ttft_s"]] == pytest.approx([0.110, 0.061], abs=1e-12)
