"""The model id the deployment files a plan writes serve (`vllm serve ID`, the KServe storageUri, the download
job): a preset's Hugging Face repository, a Hugging Face id as given, or, for a plan naming a config.json, the
`_name_or_path` transformers writes into a config it saves (the repository it came from) when that is a
Hugging Face id. Otherwise the config's folder name stands in, and the plan says those files need the real id
(a `models/qwen.json` planned `vllm serve models` without a word before)."""

from __future__ import annotations

import re
from pathlib import Path

from ttftsim.config.plan import Plan
from ttftsim.inputs.files import read_text
from ttftsim.inputs.structured import parse_json
from ttftsim.model.catalog import preset_repository
from ttftsim.replica import resolve_ref

HF_IDS = {  # presets -> the repository `vllm serve` loads
    "Llama-3.1-8B": "meta-llama/Llama-3.1-8B-Instruct",
    "Llama-3.1-70B": "meta-llama/Llama-3.1-70B-Instruct",
    "Llama-2-7b-hf": "meta-llama/Llama-2-7b-chat-hf",
    "Llama-2-70b-hf": "meta-llama/Llama-2-70b-chat-hf",
    "Mistral-7B-v0.1": "mistralai/Mistral-7B-Instruct-v0.1",
    "Mixtral-8x7B-v0.1": "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "Qwen2.5-7B": "Qwen/Qwen2.5-7B-Instruct",
    "Qwen2.5-72B": "Qwen/Qwen2.5-72B-Instruct",
    "CodeLlama-34b-Instruct-hf": "codellama/CodeLlama-34b-Instruct-hf",
}
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # organisation/name


def served_model(plan: Plan, base: Path) -> tuple[str, str | None]:
    """(the id the files serve, a warning when it is a stand-in)."""
    if plan.model in HF_IDS:
        return HF_IDS[plan.model], None
    if not plan.model.endswith(".json"):
        return preset_repository(plan.model) or plan.model, None  # a preset's repository, or an id as given
    path = Path(resolve_ref(plan.model, base))
    named = parse_json(read_text(path, what="model config"), str(path))
    origin = named.get("_name_or_path") if isinstance(named, dict) else None
    if isinstance(origin, str) and HUB_ID.match(origin) and not (base / origin).exists():
        return origin, None
    stand_in = path.parent.name or path.stem
    return stand_in, (
        f"the deployment files (vllm-args.txt, manifests.yaml, the KServe and download files) serve {stand_in!r}, "
        f"the folder of {plan.model}, whose config has no _name_or_path naming a Hugging Face repository: replace "
        "it with the model's id or path before deploying"
    )
