"""What vLLM compiles and captures (config/graphs.py): each rule a small case read off the source of the version
it names (vLLM 0.15.1 config/vllm.py OPTIMIZATION_LEVEL_00..03 and _set_cudagraph_sizes, 0.11 config/__init__.py,
gpu_model_runner._check_and_update_cudagraph_mode, 0.17 --performance-mode)."""

from __future__ import annotations

from typing import Any

import pytest

from ttftsim.config.engine import EngineArgs
from ttftsim.config.graphs import capture_sizes, compile_and_mode
from ttftsim.config.resolved_engine import ResolvedEngine, resolve_engine, weight_dtype
from ttftsim.hardware.catalog import load_hardware


def _resolve(hardware: str = "H100-SXM5-80GB", **args: Any) -> ResolvedEngine:
    return resolve_engine(EngineArgs(**args), load_hardware(hardware), 131072, "bf16")


@pytest.mark.parametrize(
    ("level", "eager", "asked", "expected"),
    [
        (None, False, None, (True, True, "FULL_AND_PIECEWISE")),  # -O2, the default
        (0, False, None, (False, False, "NONE")),
        (1, False, None, (True, True, "PIECEWISE")),
        (3, False, None, (True, True, "FULL_AND_PIECEWISE")),
        (3, True, None, (False, False, "NONE")),  # "Enforce eager set, overriding optimization level to -O0"
        (0, False, "PIECEWISE", (False, False, "NONE")),  # piecewise graphs need the piecewise compile
        (0, False, "FULL", (False, False, "FULL")),  # a FULL graph does not
        (1, False, "FULL_DECODE_ONLY", (True, True, "FULL_DECODE_ONLY")),
    ],
)
def test_optimization_levels_from_0_13(level: int | None, eager: bool, asked: Any, expected: tuple[Any, ...]) -> None:
    assert compile_and_mode(True, level, eager, asked) == expected


@pytest.mark.parametrize(
    ("level", "eager", "expected"),
    [
        (None, False, (True, True, "FULL_AND_PIECEWISE")),  # compilation level 3 (PIECEWISE) unless eager
        (None, True, (False, False, "NONE")),  # NO_COMPILATION
        (2, False, (True, False, "NONE")),  # torch.compile (DYNAMO_ONCE) without vLLM's graphs
        (0, False, (False, False, "NONE")),
        (3, True, (True, True, "NONE")),  # a level given keeps compiling; eager still captures nothing
    ],
)
def test_compilation_levels_before_0_13(level: int | None, eager: bool, expected: tuple[Any, ...]) -> None:
    assert compile_and_mode(False, level, eager, None) == expected


def test_full_graphs_for_mixed_batches_need_flash_attention_3() -> None:
    """FlashAttention 3 (Hopper) supports FULL graphs for any batch; FlashAttention 2 (A100) uniform batches only:
    FULL falls back to FULL_AND_PIECEWISE where attention is a splitting op (compiled), else FULL_DECODE_ONLY."""
    assert _resolve(cudagraph_mode="FULL").cudagraph_mode == "FULL"
    assert _resolve("A100-SXM4-80GB", cudagraph_mode="FULL").cudagraph_mode == "FULL_AND_PIECEWISE"
    a100_o0 = _resolve("A100-SXM4-80GB", cudagraph_mode="FULL", optimization_level=0)
    assert (a100_o0.compiled, a100_o0.cudagraph_mode) == (False, "FULL_DECODE_ONLY")
    cpu = _resolve("CPU-host")
    assert (cpu.cudagraph_mode, cpu.capture_sizes) == ("NONE", ())


def test_capture_sizes_default_given_and_refused() -> None:
    # H100, 0.15: 8192 tokens, 1024 sequences: min(2 x 1024, 512) = 512, the whole default grid
    assert _resolve().capture_sizes == capture_sizes(512) and len(capture_sizes(512)) == 51
    assert _resolve(max_num_seqs=20).capture_sizes == (1, 2, 4, 8, 16, 24, 32, 40)  # cap 40
    assert _resolve(max_num_seqs=64, max_num_batched_tokens=100).capture_sizes[-1] == 96  # the budget caps 128
    given = _resolve(cudagraph_capture_sizes=[64, 8, 8, 4096, 1], max_num_batched_tokens=2048)
    assert given.capture_sizes == (1, 8, 64)  # deduplicated, sorted, 4096 above the budget dropped
    assert _resolve(max_cudagraph_capture_size=20).capture_sizes == (1, 2, 4, 8, 16)
    with pytest.raises(ValueError, match="max_cudagraph_capture_size 32 is not the largest"):
        _resolve(cudagraph_capture_sizes=[8, 16], max_cudagraph_capture_size=32)
    speculative = {"method": "eagle", "num_speculative_tokens": 3}
    assert _resolve(max_num_seqs=20, speculative_config=speculative).capture_sizes[-1] == 160  # 20 x 4 x 2
    eager = _resolve(enforce_eager=True)
    assert (eager.compiled, eager.cudagraph_mode, eager.capture_sizes) == (False, "NONE", ())


def test_performance_modes() -> None:
    """throughput doubles the tier's defaults that were left unset (H100: 8192 tokens, 1024 sequences);
    interactivity captures every size from 1 to 32, then vLLM's grid."""
    throughput = _resolve(vllm_version="0.17.0", performance_mode="throughput")
    assert (throughput.max_num_batched_tokens, throughput.max_num_seqs) == (16384, 2048)
    kept = _resolve(vllm_version="0.17.0", performance_mode="throughput", max_num_seqs=64)
    assert (kept.max_num_batched_tokens, kept.max_num_seqs) == (16384, 64)
    fine = _resolve(vllm_version="0.17.0", performance_mode="interactivity").capture_sizes
    assert fine[:33] == (*range(1, 33), 40) and fine[-1] == 512
    with pytest.raises(ValueError, match=r"performance_mode: vLLM 0\.15\.1 has none"):
        EngineArgs(performance_mode="throughput")


def test_a_budget_below_max_num_seqs_is_refused_as_vllm_refuses_it() -> None:
    """SchedulerConfig.verify_max_model_len (0.11-0.34): max_num_batched_tokens >= max_num_seqs. A max_num_seqs left
    unset is the tier's at most the budget (arg_utils.py: min(default, max_num_batched_tokens)), so only one the user
    set is refused (the H100 tier's 1024 sequences against 512 tokens: 512 sequences)."""
    with pytest.raises(
        ValueError, match=r"max_num_batched_tokens \(512\) must be greater than or equal to max_num_seqs \(600\)"
    ):
        _resolve(max_num_batched_tokens=512, max_num_seqs=600)
    assert _resolve(max_num_batched_tokens=512).max_num_seqs == 512
    assert _resolve(max_num_batched_tokens=512, max_num_seqs=512).max_num_seqs == 512
    assert _resolve(max_num_batched_tokens=4096).max_num_seqs == 1024


def test_an_mla_model_on_hopper_and_vllm_0_11s_refusal() -> None:
    """FlashMLA's cudagraph support is UNIFORM_BATCH (0.15.1 flashmla.py): FULL falls back as on an A100; vLLM 0.11
    asserts compilation level 3 for a piecewise mode (config/__init__.py) and exits."""
    mla = resolve_engine(
        EngineArgs(cudagraph_mode="FULL"), load_hardware("H100-SXM5-80GB"), 131072, "bf16", mla_qk_nope_head_dim=128
    )
    assert mla.cudagraph_mode == "FULL_AND_PIECEWISE"
    with pytest.raises(ValueError, match="needs compilation level 3"):
        compile_and_mode(False, 2, False, "PIECEWISE")


def test_a_quantized_checkpoint_keeps_its_format_and_mxfp4_is_never_made_at_load() -> None:
    """--dtype is the activations' dtype: a 16-bit checkpoint takes it, an fp8 or MXFP4 one keeps its weights;
    MXFP4 comes only from a checkpoint published in it (vLLM's Mxfp4Config has no online quantization)."""
    assert weight_dtype(EngineArgs(dtype="fp16"), "bf16") == "fp16"
    assert weight_dtype(EngineArgs(dtype="bf16"), "mxfp4") == "mxfp4"
    assert weight_dtype(EngineArgs(dtype="bf16"), "fp8") == "fp8"
    assert weight_dtype(EngineArgs(dtype="fp16"), "int4") == "int4"  # --dtype half with an AWQ checkpoint
    assert weight_dtype(EngineArgs(quantization="fp8"), "bf16") == "fp8"
    assert weight_dtype(EngineArgs(quantization="mxfp4"), "mxfp4") == "mxfp4"
    with pytest.raises(ValueError, match="quantization mxfp4 does not match the checkpoint's bf16"):
        weight_dtype(EngineArgs(quantization="mxfp4"), "bf16")
    with pytest.raises(ValueError, match="quantization fp8 does not match the checkpoint's mxfp4"):
        weight_dtype(EngineArgs(quantization="fp8"), "mxfp4")
