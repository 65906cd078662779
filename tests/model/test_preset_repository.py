"""A plan's manifests must name weights vLLM can load: each preset knows the repository it was written from."""

from __future__ import annotations

import pytest

from ttftsim.config.plan import Plan
from ttftsim.model.catalog import preset_names, preset_repository
from ttftsim.plan.run import model_id


def test_every_preset_names_its_repository() -> None:
    missing = [name for name in preset_names() if preset_repository(name) is None]
    assert missing == []
    assert preset_repository("Qwen3-8B") == "Qwen/Qwen3-8B"
    assert preset_repository("gpt-oss-120b") == "openai/gpt-oss-120b"
    assert preset_repository("not-a-preset") is None


@pytest.mark.parametrize(
    ("model", "served"),
    [
        ("Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct"),  # the plan's own table: the chat model
        ("Qwen3-8B", "Qwen/Qwen3-8B"),  # a preset outside it: the repository it was written from
        ("Qwen/Qwen2.5-7B-Instruct-AWQ", "Qwen/Qwen2.5-7B-Instruct-AWQ"),  # a Hugging Face id, as given
    ],
)
def test_the_plan_serves_a_loadable_repository(model: str, served: str) -> None:
    plan = Plan.model_validate(
        {
            "model": model,
            "slo": {"ttft_p99_s": 1.0},
            "search": {"hardware": ["H100-SXM5-80GB"]},
            "workload": {
                "type": "synthetic",
                "arrivals": {"type": "poisson", "rate": 1.0},
                "prompt_tokens": {"type": "fixed", "value": 100},
                "output_tokens": {"type": "fixed", "value": 10},
                "num_requests": 10,
            },
        }
    )
    assert model_id(plan) == served
