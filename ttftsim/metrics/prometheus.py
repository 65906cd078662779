"""Prometheus text exposition of a run with vLLM's own metric names and histogram buckets
(serving-semantics.md part 5): what a scrape of the engine would have returned at the end of the run.

vllm:time_to_first_token_seconds is vLLM's own TTFT, not the client's: from the request's arrival_time (set
when the parsed, tokenized request enters the engine client, vllm/v1/engine/input_processor.py) to the output
handler's processing of the step output with its first token (vllm/v1/metrics/stats.py,
IterationStats.update_from_output). `server_ttft_s` is the engine's arrival-to-first-token plus the API
server's measured server_ttft_extra_s (the hand-offs to and from the engine core and the output handler);
the client's TTFT adds the API server's ingress (its queue, parsing, tokenizing), the HTTP hand-offs and the
wait for a visible token. vllm:e2e_request_latency_seconds is the server's too: from the same arrival_time to
the output handler's processing of the step output that finishes the request (stats.py
IterationStats.update_from_finished_request, read in vLLM 0.15.1): `server_e2e_s`, the server TTFT plus the
engine's first token to its last."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680)


def go_float(value: float) -> str:
    """A sample value or `le` bound as vLLM's exporter (prometheus-client's floatToGoString) writes it: 1.0, not 1
    (before Prometheus 3.0, le="1" and le="1.0" are different series), every digit of a count, Go's exponent form
    from 1e6 up."""
    value = float(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:  # Go switches to an exponent sooner than Python
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def histogram_lines(
    name: str,
    labels: str,
    values: NDArray[np.float64],
    buckets: Sequence[float],
    weights: NDArray[Any] | None = None,
) -> list[str]:
    weights = np.ones(len(values)) if weights is None else weights
    lines = [f"# TYPE {name} histogram"]
    for bound in buckets:
        count = float(weights[values <= bound].sum())
        lines.append(f'{name}_bucket{{{labels},le="{go_float(bound)}"}} {go_float(count)}')
    lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {go_float(weights.sum())}')
    lines.append(f"{name}_sum{{{labels}}} {go_float((values * weights).sum())}")
    lines.append(f"{name}_count{{{labels}}} {go_float(weights.sum())}")
    return lines


def server_ttft_s(requests: pd.DataFrame, extra_s: float) -> NDArray[np.float64]:
    """vLLM's own TTFT of each request that got a token (module docstring): the engine's arrival to its first
    token (queue, recomputation after preemption, prefill, waiting for the step that samples it) plus extra_s."""
    served = requests.loc[requests["ttft_s"].notna(), ["queue_s", "recompute_s", "prefill_s", "waiting_s"]]
    window: NDArray[np.float64] = served.to_numpy(dtype=np.float64).sum(axis=1)
    return window + extra_s


def server_e2e_s(requests: pd.DataFrame, extra_s: float) -> NDArray[np.float64]:
    """vLLM's own end-to-end latency of each finished request (module docstring): its server TTFT plus the
    engine's first token to its last (finish_s - first_token_s), with the same hand-offs extra_s."""
    finished = requests[(requests["status"] == "finished") & requests["ttft_s"].notna()]
    decode: NDArray[np.float64] = (finished["finish_s"] - finished["first_token_s"]).to_numpy(dtype=np.float64)
    return server_ttft_s(finished, extra_s) + decode


def exposition(
    requests: pd.DataFrame,
    itl: tuple[NDArray[np.float64], NDArray[Any]],  # gap values, integer weights
    gauges: dict[str, float],
    prefix: tuple[int, int],
    model_name: str,
    engine: int = 0,
    external: tuple[int, int] | None = None,
    server_ttft_extra_s: float = 0.0,
) -> str:
    labels = f'model_name="{model_name}",engine="{engine}"'
    served = requests[requests["ttft_s"].notna()]
    finished = requests[requests["status"] == "finished"]
    lines: list[str] = []
    ttft = server_ttft_s(requests, server_ttft_extra_s)
    lines += histogram_lines("vllm:time_to_first_token_seconds", labels, ttft, TTFT_BUCKETS)
    lines += histogram_lines("vllm:inter_token_latency_seconds", labels, itl[0], ITL_BUCKETS, itl[1])
    e2e = server_e2e_s(requests, server_ttft_extra_s)
    lines += histogram_lines("vllm:e2e_request_latency_seconds", labels, e2e, REQUEST_BUCKETS)
    lines += histogram_lines("vllm:request_queue_time_seconds", labels, served["queue_s"].to_numpy(), REQUEST_BUCKETS)
    for name, value in gauges.items():
        lines += [f"# TYPE vllm:{name} gauge", f"vllm:{name}{{{labels}}} {go_float(value)}"]
    counters = {
        "prompt_tokens": float(served["prompt_tokens"].sum()),
        "generation_tokens": float(requests["generated_tokens"].sum()),
        "num_preemptions": float(requests["num_preemptions"].sum()),
        "prefix_cache_queries": float(prefix[0]),
        "prefix_cache_hits": float(prefix[1]),
    }
    if external is not None:  # a KV connector's (LMCache's) queries and hits past the GPU's
        counters |= {
            "external_prefix_cache_queries": float(external[0]),
            "external_prefix_cache_hits": float(external[1]),
        }
    for name, value in counters.items():
        lines += [f"# TYPE vllm:{name} counter", f"vllm:{name}_total{{{labels}}} {go_float(value)}"]
    lines += [
        "# TYPE vllm:request_success counter",
        f'vllm:request_success_total{{{labels},finished_reason="length"}} {go_float(len(finished))}',
    ]
    return "\n".join(lines) + "\n"
