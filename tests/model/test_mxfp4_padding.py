"""MXFP4 experts as vLLM allocates them: padded to its MoE backend's tiles, by GPU and release
(config/dtypes.py mxfp4_expert_padding), and the weight bytes that padding gives (model/size.py).

gpt-oss's config.json (openai/gpt-oss-120b and -20b; ttftsim/model/presets): hidden_size 2880, intermediate_size
2880, 128 experts on each of 36 layers (120b) and 32 on each of 24 (20b). One expert: gate and up (2 x 2880 x 2880),
down (2880 x 2880) and their biases (2 x 2880 + 2880), at MXFP4's 4.25 bits (17/32 bytes) a parameter."""

from __future__ import annotations

import pytest

from ttftsim.config.dtypes import (
    MARLIN_PADDING,
    NO_PADDING,
    TRITON_PADDING,
    TRTLLM_PADDING,
    TRTLLM_PADDING_0_27,
    ExpertPadding,
    mxfp4_expert_padding,
)
from ttftsim.model.catalog import load_model
from ttftsim.model.size import layer_weight_bytes, padded_expert_params, weight_bytes

MXFP4_BYTES = 17 / 32
GPT_OSS = {"gpt-oss-120b": (36, 128), "gpt-oss-20b": (24, 32)}  # (MoE layers, experts a layer)
CHECKPOINT = {"gpt-oss-120b": 65_190_335_616, "gpt-oss-20b": 13_751_515_776}  # test_presets: 65.2 and 13.8 GB


def _expert(hidden: int, inter: int) -> int:
    """One gpt-oss expert's parameters at this (padded) shape: three projections and their biases."""
    return 3 * hidden * inter + 2 * inter + hidden


@pytest.mark.parametrize(
    ("cc", "version", "padding"),
    [
        ("8.0", "0.10", MARLIN_PADDING),  # A100: Marlin in every release
        ("8.9", "0.34.0", MARLIN_PADDING),  # L40S
        ("12.0", "0.15.1", MARLIN_PADDING),  # RTX PRO 6000: Triton's kernels not enabled there
        ("9.0", "0.11.2", MARLIN_PADDING),  # H100 before vLLM shipped triton_kernels
        ("9.0", "0.12.0", TRITON_PADDING),
        ("9.0", "0.15.1", TRITON_PADDING),
        ("10.0", "0.10.1", TRTLLM_PADDING),  # B200: FlashInfer's TRT-LLM kernel
        ("10.0", "0.26", TRTLLM_PADDING),
        ("10.0", "0.27.0", TRTLLM_PADDING_0_27),  # its intermediate to 128, not 256
        ("10.3", "0.11", MARLIN_PADDING),  # B300: FlashInfer took 10.0 alone before 0.13
        ("10.3", "0.12", TRITON_PADDING),
        ("10.3", "0.13", TRTLLM_PADDING),
        (None, "0.15.1", NO_PADDING),  # ROCm, a CPU: not modelled
    ],
)
def test_the_padding_follows_the_backend_vllm_picks(cc: str | None, version: str, padding: ExpertPadding) -> None:
    assert mxfp4_expert_padding(cc, version) == padding


def test_a_padded_expert_rounds_the_hidden_size_and_each_gpus_slice_of_the_intermediate_size() -> None:
    """Marlin: hidden 2880 -> 3072 (multiple of 256), intermediate 2880 -> 2944 (128); over two GPUs each holds
    1440 -> 1536. Triton (64): 2880 stays, 1440 -> 1472 a GPU. Unpadded: the checkpoint's 24,891,840."""
    spec = load_model("gpt-oss-120b")
    assert padded_expert_params(spec, NO_PADDING) == _expert(2880, 2880) == 24_891_840
    assert padded_expert_params(spec, MARLIN_PADDING) == _expert(3072, 2944) == 27_140_864
    assert padded_expert_params(spec, MARLIN_PADDING, slices=2) == _expert(3072, 2 * 1536)
    assert padded_expert_params(spec, TRITON_PADDING) == _expert(2880, 2880)
    assert padded_expert_params(spec, TRITON_PADDING, slices=2) == _expert(2880, 2 * 1472)
    assert padded_expert_params(spec, TRTLLM_PADDING) == _expert(3072, 3072) == 28_320_768


@pytest.mark.parametrize("preset", GPT_OSS)
@pytest.mark.parametrize(
    ("padding", "hidden", "inter"),
    [(NO_PADDING, 2880, 2880), (MARLIN_PADDING, 3072, 2944), (TRTLLM_PADDING, 3072, 3072)],
)
def test_padded_weights_are_the_checkpoint_and_what_padding_adds(
    preset: str, padding: ExpertPadding, hidden: int, inter: int
) -> None:
    """For every expert of every MoE layer the parameters padding adds, at 17/32 bytes: gpt-oss-120b 65.19 GB,
    70.70 with Marlin's padding (+8.4%), 73.58 with TRT-LLM's (+12.9%); gpt-oss-20b 13.75, 14.67, 15.15. The MoE
    layer's bytes grow by one layer's share."""
    layers, experts = GPT_OSS[preset]
    spec, added = load_model(preset), experts * (_expert(hidden, inter) - _expert(2880, 2880)) * MXFP4_BYTES
    assert weight_bytes(spec, "mxfp4", padding) == CHECKPOINT[preset] + layers * added
    assert layer_weight_bytes(spec, "mxfp4", padding)[1] == layer_weight_bytes(spec, "mxfp4")[1] + added


def test_the_written_out_figures_of_gpt_oss_120b() -> None:
    """Marlin (A100): 65,190,335,616 + 36 x 128 x 2,249,024 x 17/32 = 70,695,946,368 bytes; TRT-LLM under vLLM
    0.15.1 (B200): + 36 x 128 x 3,428,928 x 17/32 = 73,584,351,360; no padding keeps the checkpoint at any TP."""
    spec = load_model("gpt-oss-120b")
    assert weight_bytes(spec, "mxfp4", MARLIN_PADDING) == 70_695_946_368
    assert weight_bytes(spec, "mxfp4", TRTLLM_PADDING) == 73_584_351_360
    assert weight_bytes(spec, "mxfp4", NO_PADDING, slices=4) == weight_bytes(spec, "mxfp4") == 65_190_335_616
