"""A plan's manifests must name weights vLLM can load: each preset knows the repository it was written from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ttftsim.config.plan import Plan
from ttftsim.model.catalog import preset_names, preset_repository
from ttftsim.plan.run import model_id

ROOT = Path(__file__).resolve().parents[2]


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
    assert model_id(plan_of(model)) == served


def plan_of(model: str) -> Plan:
    return Plan.model_validate(
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


def test_a_plan_on_a_config_json_serves_its_hub_id_or_says_the_files_need_one(tmp_path: Path) -> None:
    """A plan on models/qwen.json wrote `vllm serve models` without a word (cold trial F1): the config's
    _name_or_path (what transformers writes into a saved config) is served when it is a Hugging Face id; else the
    folder stands in and the plan says so."""
    from ttftsim.plan.run import check_plan
    from ttftsim.plan.served_model import served_model

    folder = tmp_path / "models"
    folder.mkdir()
    config = json.loads((ROOT / "ttftsim" / "model" / "presets" / "Qwen2.5-7B.json").read_text())
    (folder / "qwen.json").write_text(json.dumps(config | {"_name_or_path": "Qwen/Qwen2.5-7B-Instruct"}))
    (folder / "local.json").write_text(json.dumps(config | {"_name_or_path": "/data/ckpt"}))
    named, local = (plan_of("models/qwen.json"), plan_of("models/local.json"))
    assert served_model(named, tmp_path) == ("Qwen/Qwen2.5-7B-Instruct", None)
    served, said = served_model(local, tmp_path)
    assert served == "models" and said is not None and said.startswith("the deployment files (vllm-args.txt")
    path = tmp_path / "plan.yaml"
    assert said in check_plan(local, path) and not [w for w in check_plan(named, path) if "deployment files" in w]
