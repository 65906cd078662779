"""A saved run's settings read back for the dashboard (ttftsim/run_settings.py): the explorer's form from
summary.json's config and the requests, and the comparison's warning when two runs were fed other traffic."""

from __future__ import annotations

import pandas as pd
import pytest

from ttftsim.run_settings import Traffic, form_settings, measured_traffic, traffic_difference

REQUESTS = pd.DataFrame(
    {"arrival_s": [0.0, 0.5, 1.0, 2.0], "prompt_tokens": [100, 300, 200, 400], "output_tokens": [10, 30, 20, 40]}
)
SUMMARY = {
    "config": {
        "model": "Llama-3.1-8B",
        "hardware": "L40S-48GB",
        "engine": {
            "tp": 2,
            "max_num_seqs": 256,
            "max_num_batched_tokens": 2048,
            "enable_chunked_prefill": True,
            "enable_prefix_caching": False,
        },
    },
    "slo": {"ttft_p99_s": 0.75},
}


def test_traffic_is_measured_from_the_requests() -> None:
    # 4 requests, 3 gaps over 2 s: 1.5 req/s; prompts (100 + 300 + 200 + 400) / 4 = 250; outputs 25
    assert measured_traffic(REQUESTS) == Traffic(4, 1.5, 250.0, 25.0)
    assert measured_traffic(REQUESTS).words() == "4 requests at 1.50 req/s, mean prompt 250 and output 25 tokens"
    assert measured_traffic(REQUESTS.head(1)) == Traffic(1, None, 100.0, 10.0)  # one arrival: no rate


def test_the_form_takes_the_runs_config_and_traffic() -> None:
    settings = form_settings(SUMMARY, REQUESTS, {"Llama-3.1-8B"}, {"L40S-48GB", "H100-SXM5-80GB"})
    assert (settings.model, settings.hardware, settings.tensor_parallel_size) == ("Llama-3.1-8B", "L40S-48GB", 2)
    assert (settings.max_num_seqs, settings.max_num_batched_tokens) == (256, 2048)
    assert settings.flags == ["chunked"] and settings.slo_ttft_p99_ms == pytest.approx(750.0)
    assert settings.traffic == Traffic(4, 1.5, 250.0, 25.0)
    assert settings.note == "traffic measured from its requests (summary.json does not record the workload settings)"


def test_what_the_form_cannot_offer_is_named_and_a_bare_summary_gives_nothing() -> None:
    settings = form_settings(SUMMARY, REQUESTS, {"Llama-3.1-70B"}, {"H100-SXM5-80GB"})
    assert settings.note.startswith(
        "model Llama-3.1-8B is not one the form offers: pick one to run; "
        "GPU L40S-48GB is not one the form offers: pick one to run; traffic measured"
    )
    bare = form_settings({"config": "?", "slo": None}, REQUESTS, set(), set())
    assert (bare.model, bare.hardware, bare.tensor_parallel_size, bare.max_num_seqs) == (None, None, None, None)
    assert bare.flags == [] and bare.slo_ttft_p99_ms is None


def test_the_same_requests_in_another_order_are_the_same_traffic() -> None:
    assert traffic_difference(REQUESTS, REQUESTS.iloc[::-1].reset_index(drop=True)) == ""


def test_other_traffic_is_said_with_both_sides() -> None:
    faster = REQUESTS.assign(arrival_s=REQUESTS["arrival_s"] / 2)
    assert traffic_difference(REQUESTS, faster) == (
        "The two runs were not fed the same traffic: A 4 requests at 1.50 req/s, mean prompt 250 and output 25 "
        "tokens; B 4 requests at 3.00 req/s, mean prompt 250 and output 25 tokens. Their latencies are not a "
        "like-for-like comparison."
    )
    shuffled = REQUESTS.assign(prompt_tokens=[300, 100, 200, 400])  # same counts and means, other draws
    assert "the same counts and means, other draws (another seed?)" in traffic_difference(REQUESTS, shuffled)
