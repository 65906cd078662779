"""The Prometheus exposition of a tiny run, line by line, and the result folder it is written into.

Expected bucket counts are counted by hand from four requests. The same run is also fed to
prometheus-client (the library vLLM's /metrics uses: vllm/v1/metrics/loggers.py PrometheusStatLogger
registers these histograms with these buckets and labels model_name, engine) and both texts are parsed
with prometheus-client's own parser: every sample (name, labels, value) must agree, and every sample line
ttftsim writes is one prometheus-client writes, spelled the same (floats as `3.0`, bounds as `le="1.0"`:
before Prometheus 3.0, le="1" and le="1.0" are different series); prometheus-client adds HELP lines and
`_created` samples.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ttftsim.metrics.export import write_results
from ttftsim.metrics.prometheus import (
    ITL_BUCKETS,
    REQUEST_BUCKETS,
    TTFT_BUCKETS,
    exposition,
    go_float,
    histogram_lines,
)
from ttftsim.result_folder import MARKER

LABELS = 'model_name="m",engine="0"'
GAUGES = {"num_requests_running": 1.0, "num_requests_waiting": 1.0, "kv_cache_usage_perc": 0.25}
ITL = (np.array([0.02, 0.1]), np.array([3.0, 2.0]))  # five gaps: three of 20 ms, two of 100 ms
PREFIX = (160, 48)


def _requests() -> pd.DataFrame:
    """Two finished requests, one served but still running, one never served."""
    nan = float("nan")
    return pd.DataFrame(
        {
            "request_id": [0, 1, 2, 3],
            "status": ["finished", "finished", "in_flight", "rejected"],
            "ttft_s": [0.045, 0.8, 0.012, nan],  # the client's: not what vLLM's histogram holds
            "e2e_s": [1.2, 2.0, nan, nan],  # the client's too
            "first_token_s": [0.5, 1.5, 0.25, nan],
            "finish_s": [1.5, 3.0, nan, nan],
            # binary fractions (2^-n s), so that every sum below is exact in any order
            "queue_s": [2**-7, 0.375, 0.0, nan],
            "recompute_s": [0.0, 0.125, 0.0, nan],
            "prefill_s": [2**-6, 2**-4, 2**-10, nan],
            "waiting_s": [2**-8, 2**-7, 0.0, nan],
            "prompt_tokens": [100, 50, 30, 20],
            "generated_tokens": [10, 5, 2, 0],
            "num_preemptions": [0, 1, 0, 0],
        }
    )


def _bucket_lines(name: str, bounds: tuple[float, ...], counts: list[int], total: int, sum_text: str) -> list[str]:
    assert len(bounds) == len(counts)
    lines = [f"# TYPE {name} histogram"]
    lines += [f'{name}_bucket{{{LABELS},le="{float(b)}"}} {float(c)}' for b, c in zip(bounds, counts, strict=True)]
    lines.append(f'{name}_bucket{{{LABELS},le="+Inf"}} {float(total)}')
    lines.append(f"{name}_sum{{{LABELS}}} {sum_text}")
    lines.append(f"{name}_count{{{LABELS}}} {float(total)}")
    return lines


# vLLM's own TTFT of the three served requests, from the engine's arrival (queue + recompute + prefill + waiting)
# plus the API server's 2^-9 s beyond the engine: 2.93 ms, 29.30 ms, 572.27 ms. Their client TTFTs (12, 45, 800
# ms) would fill other buckets.
EXTRA_S = 2**-9
TTFT_COUNTS = [0, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3] + [3] * 11
SERVER_TTFT = [2**-7 + 2**-6 + 2**-8 + EXTRA_S, 0.375 + 0.125 + 2**-4 + 2**-7 + EXTRA_S, 2**-10 + EXTRA_S]
# gaps: 3 x 20 ms, 2 x 100 ms (on the 0.1 bound)
ITL_COUNTS = [0, 3, 3, 3, 5] + [5] * 14
# vLLM's own end-to-end latency of the two finished requests: their server TTFT plus first token to finish (1 s
# and 1.5 s): 1.029 s and 2.072 s. Their client end-to-end (1.2 s, 2.0 s on the 2 bound) would fill other buckets.
SERVER_E2E = [SERVER_TTFT[0] + 1.0, SERVER_TTFT[1] + 1.5]
E2E_COUNTS = [0, 0, 0, 0, 1, 1, 2] + [2] * 14
# queue time of the three served requests: 0, 7.8 ms, 375 ms
QUEUE_COUNTS = [2, 3] + [3] * 19

EXPECTED = [
    *_bucket_lines("vllm:time_to_first_token_seconds", TTFT_BUCKETS, TTFT_COUNTS, 3, "0.6044921875"),
    *_bucket_lines("vllm:inter_token_latency_seconds", ITL_BUCKETS, ITL_COUNTS, 5, "0.26"),
    *_bucket_lines("vllm:e2e_request_latency_seconds", REQUEST_BUCKETS, E2E_COUNTS, 2, "3.1015625"),
    *_bucket_lines("vllm:request_queue_time_seconds", REQUEST_BUCKETS, QUEUE_COUNTS, 3, "0.3828125"),
    "# TYPE vllm:num_requests_running gauge",
    f"vllm:num_requests_running{{{LABELS}}} 1.0",
    "# TYPE vllm:num_requests_waiting gauge",
    f"vllm:num_requests_waiting{{{LABELS}}} 1.0",
    "# TYPE vllm:kv_cache_usage_perc gauge",
    f"vllm:kv_cache_usage_perc{{{LABELS}}} 0.25",
    "# TYPE vllm:prompt_tokens counter",
    f"vllm:prompt_tokens_total{{{LABELS}}} 180.0",  # the served requests' prompts: 100 + 50 + 30
    "# TYPE vllm:generation_tokens counter",
    f"vllm:generation_tokens_total{{{LABELS}}} 17.0",
    "# TYPE vllm:num_preemptions counter",
    f"vllm:num_preemptions_total{{{LABELS}}} 1.0",
    "# TYPE vllm:prefix_cache_queries counter",
    f"vllm:prefix_cache_queries_total{{{LABELS}}} 160.0",
    "# TYPE vllm:prefix_cache_hits counter",
    f"vllm:prefix_cache_hits_total{{{LABELS}}} 48.0",
    "# TYPE vllm:request_success counter",
    f'vllm:request_success_total{{{LABELS},finished_reason="length"}} 2.0',
]


def test_the_tiny_runs_exposition_line_by_line() -> None:
    text = exposition(_requests(), ITL, GAUGES, PREFIX, "m", server_ttft_extra_s=EXTRA_S)
    assert text.endswith("\n") and not text.endswith("\n\n")
    lines = text.splitlines()
    for number, (got, expected) in enumerate(zip(lines, EXPECTED, strict=False)):
        assert got == expected, f"line {number}"
    assert len(lines) == len(EXPECTED)


def test_a_kv_connectors_queries_and_hits_follow_the_gpus() -> None:
    text = exposition(_requests(), ITL, GAUGES, PREFIX, "m", external=(96, 32), server_ttft_extra_s=EXTRA_S)
    lines = text.splitlines()
    at = lines.index(f"vllm:prefix_cache_hits_total{{{LABELS}}} 48.0") + 1
    assert lines[at:] == [
        "# TYPE vllm:external_prefix_cache_queries counter",
        f"vllm:external_prefix_cache_queries_total{{{LABELS}}} 96.0",
        "# TYPE vllm:external_prefix_cache_hits counter",
        f"vllm:external_prefix_cache_hits_total{{{LABELS}}} 32.0",
        *EXPECTED[-2:],
    ]
    assert lines[:at] == EXPECTED[:at]


def test_the_engine_label_names_the_replica() -> None:
    text = exposition(_requests(), ITL, {}, PREFIX, "llama", engine=3)
    assert 'vllm:request_success_total{model_name="llama",engine="3",finished_reason="length"} 2.0' in text.splitlines()
    assert text.count('engine="3"') == text.count("engine=")


def _reference_text() -> str:
    """The same run observed through prometheus-client, as vLLM's PrometheusStatLogger would record it."""
    registry = CollectorRegistry()
    names = ["model_name", "engine"]
    requests = _requests()
    served = requests[requests["ttft_s"].notna()]
    histograms = [
        ("vllm:time_to_first_token_seconds", TTFT_BUCKETS, SERVER_TTFT),
        ("vllm:inter_token_latency_seconds", ITL_BUCKETS, [0.02] * 3 + [0.1] * 2),
        ("vllm:e2e_request_latency_seconds", REQUEST_BUCKETS, SERVER_E2E),
        ("vllm:request_queue_time_seconds", REQUEST_BUCKETS, list(served["queue_s"])),
    ]
    for name, buckets, values in histograms:
        histogram = Histogram(name, name, names, buckets=buckets, registry=registry).labels("m", "0")
        for value in values:
            histogram.observe(value)
    for name, value in GAUGES.items():
        Gauge(f"vllm:{name}", name, names, registry=registry).labels("m", "0").set(value)
    counts = {"prompt_tokens": 180, "generation_tokens": 17, "num_preemptions": 1}
    counts |= {"prefix_cache_queries": PREFIX[0], "prefix_cache_hits": PREFIX[1]}
    for name, value in counts.items():
        Counter(f"vllm:{name}", name, names, registry=registry).labels("m", "0").inc(value)
    success = Counter("vllm:request_success", "finished", [*names, "finished_reason"], registry=registry)
    success.labels("m", "0", "length").inc(2)
    return generate_latest(registry).decode()


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Samples by name and labels, a bucket bound read as the number it is (le="1" and le="1.0" alike)."""
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                labels = dict(sample.labels)
                if "le" in labels:
                    labels["le"] = repr(float(labels["le"]))
                samples[(sample.name, tuple(sorted(labels.items())))] = sample.value
    return samples


def test_every_sample_agrees_with_prometheus_client() -> None:
    ours = _samples(exposition(_requests(), ITL, GAUGES, PREFIX, "m", server_ttft_extra_s=EXTRA_S))
    reference = _samples(_reference_text())
    assert sorted(ours) == sorted(reference)
    for key, value in reference.items():
        assert ours[key] == pytest.approx(value, rel=1e-12), key
    # four histograms (their bounds, +Inf, sum, count), three gauges, six counters
    assert len(ours) == 22 + 19 + 21 + 21 + 4 * 3 + 3 + 6


def test_a_histogram_of_nothing_and_one_with_weights() -> None:
    empty = histogram_lines("h", 'a="b"', np.zeros(0), (1.0,))
    assert empty == [
        "# TYPE h histogram",
        'h_bucket{a="b",le="1.0"} 0.0',
        'h_bucket{a="b",le="+Inf"} 0.0',
        'h_sum{a="b"} 0.0',
        'h_count{a="b"} 0.0',
    ]
    weighted = histogram_lines("h", 'a="b"', np.array([0.5, 2.0]), (1.0,), np.array([4.0, 1.0]))
    assert weighted[1:] == [
        'h_bucket{a="b",le="1.0"} 4.0',
        'h_bucket{a="b",le="+Inf"} 5.0',
        'h_sum{a="b"} 4.0',
        'h_count{a="b"} 5.0',
    ]
    assert go_float(1_234_567.0) == "1.234567e+06"  # every digit of a large counter (was 1.23457e+06)


def test_vllms_bucket_bounds() -> None:
    """serving-semantics.md part 5 (vllm/v1/metrics/loggers.py): the bounds a dashboard's queries assume."""
    assert TTFT_BUCKETS[:3] == (0.001, 0.005, 0.01) and TTFT_BUCKETS[-3:] == (160.0, 640.0, 2560.0)
    assert len(TTFT_BUCKETS) == 22 and len(ITL_BUCKETS) == 19 and len(REQUEST_BUCKETS) == 21
    assert ITL_BUCKETS[:2] == (0.01, 0.025) and ITL_BUCKETS[-1] == 80.0
    assert REQUEST_BUCKETS[:4] == (0.3, 0.5, 0.8, 1) and REQUEST_BUCKETS[-2:] == (1920, 7680)


def test_write_results_stages_every_file_and_marks_the_folder_complete(tmp_path: Path) -> None:
    out = tmp_path / "run"
    requests = _requests()
    steps = pd.DataFrame({"time_s": [0.0, 0.5], "duration_s": [0.5, 0.25]})
    series = pd.DataFrame({"window_start_s": [0.0], "arrival_rate": [4.0]})
    summary = {"zeta": 1, "alpha": {"b": 2.5, "a": None}}
    prometheus_text = exposition(requests, ITL, GAUGES, PREFIX, "m")
    names = ["requests.parquet", "requests.csv", "steps.parquet", "timeseries.csv", "summary.json", "metrics.prom"]
    written = write_results(out, requests, steps, series, summary, prometheus_text)
    assert written == [out / name for name in names]
    assert sorted(p.name for p in out.iterdir()) == sorted([*names, MARKER])
    assert json.loads((out / MARKER).read_text())["kind"] == "simulation"
    assert (out / "summary.json").read_text() == '{\n  "alpha": {\n    "a": null,\n    "b": 2.5\n  },\n  "zeta": 1\n}\n'
    assert (out / "metrics.prom").read_text() == prometheus_text
    pd.testing.assert_frame_equal(pd.read_parquet(out / "requests.parquet"), requests)
    pd.testing.assert_frame_equal(pd.read_parquet(out / "steps.parquet"), steps)
    # no index column: other readers (DuckDB, polars) see exactly the frame's columns
    assert pq.read_schema(out / "requests.parquet").names == list(requests.columns)
    assert pq.read_schema(out / "steps.parquet").names == ["time_s", "duration_s"]
    assert (out / "requests.csv").read_text().splitlines()[:2] == [
        "request_id,status,ttft_s,e2e_s,first_token_s,finish_s,queue_s,recompute_s,prefill_s,waiting_s,prompt_tokens,"
        "generated_tokens,num_preemptions",
        "0,finished,0.045,1.2,0.5,1.5,0.0078125,0.0,0.015625,0.00390625,100,10,0",
    ]
    assert (out / "timeseries.csv").read_text() == "window_start_s,arrival_rate\n0.0,4.0\n"


def _spelled(line: str) -> tuple[str, tuple[str, ...], str]:
    """A sample line as written: its name, its label pairs as spelled (sorted: the order is not the format's), and
    its value as spelled."""
    name, _, rest = line.partition("{")
    labels, _, value = rest.rpartition("} ")
    return name, tuple(sorted(labels.split(","))), value


def test_every_sample_line_is_spelled_as_prometheus_client_spells_it() -> None:
    """Bounds as le="1.0", values as 3.0: a rule or dashboard that selects {le="1.0"} finds our series too."""
    reference = {_spelled(line) for line in _reference_text().splitlines() if not line.startswith("#")}
    text = exposition(_requests(), ITL, GAUGES, PREFIX, "m", server_ttft_extra_s=EXTRA_S)
    ours = [_spelled(line) for line in text.splitlines() if line[0] != "#"]
    assert [line for line in ours if line not in reference] == []
    one = ("vllm:e2e_request_latency_seconds_bucket", ('engine="0"', 'le="1.0"', 'model_name="m"'), "0.0")
    assert one in ours
