"""Small factories for engine tests: resolved engine arguments, a replica with a known cost model."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import simpy

from ttftsim.config.engine import EngineArgs
from ttftsim.config.resolved_engine import resolve_engine
from ttftsim.config.versions import ApiServerCosts
from ttftsim.engine.engine import Engine
from ttftsim.engine.recorder import Recorder
from ttftsim.hardware.catalog import load_hardware
from ttftsim.perf.linear import LinearStepModel, StepCostModel
from ttftsim.workload.request import Request


def engine_config(**overrides: Any) -> Any:
    """Resolved engine arguments for an H100 (vLLM 0.15 defaults), zero frontend overhead and a
    synchronous engine by default (the hand-computed cases are for one batch in flight); a token budget below the
    H100's 1024 sequences brings max_num_seqs down to it (vLLM refuses the budget otherwise)."""
    free = ApiServerCosts(per_request_s=0.0, per_prompt_token_s=0.0, per_output_token_s=0.0)
    overrides = {"async_scheduling": False, "api_server": free, **overrides}
    budget = overrides.get("max_num_batched_tokens")
    if budget is not None and "max_num_seqs" not in overrides:  # vLLM refuses a budget below max_num_seqs
        overrides["max_num_seqs"] = min(budget, 1024)
    fields = {k: v for k, v in overrides.items() if k in EngineArgs.model_fields}
    resolved = resolve_engine(
        EngineArgs(frontend_overhead_s=0.0, **fields), load_hardware("H100-SXM5-80GB"), 131072, "bf16"
    )
    rest = {k: v for k, v in overrides.items() if k not in EngineArgs.model_fields}
    return replace(resolved, **rest)


def make_engine(
    num_blocks: int = 1000,
    cost: StepCostModel | None = None,
    closed_form: bool = True,
    first_visible_token: int = 1,
    **overrides: Any,
) -> tuple[simpy.Environment, Engine, Recorder]:
    env = simpy.Environment()
    recorder = Recorder(0.0)
    engine = Engine(
        env,
        engine_config(**overrides),
        cost or LinearStepModel(0.01, 0.001, 0.0),
        num_blocks,
        recorder,
        closed_form_decode=closed_form,
        first_visible_token=first_visible_token,
    )
    return env, engine, recorder


def request(
    rid: int, arrival: float, prompt: int, output: int, content: int | None = None, priority: int = 0
) -> Request:
    """A request whose prompt is one segment (content id `content`, default unique per request)."""
    return Request(rid, arrival, prompt, output, ((1000 + rid if content is None else content, prompt),), priority)


def feed(env: simpy.Environment, engine: Engine, requests: list[Request]) -> None:
    def source() -> Any:
        for req in requests:
            if req.arrival_s > env.now:
                yield env.timeout(req.arrival_s - env.now)
            engine.submit(req)

    env.process(source())
