"""What vLLM compiles and captures at start: torch.compile on or off, the CUDA-graph mode and the batch sizes
captured, from -O / --enforce-eager / --compilation-config / --performance-mode, read in the wheels of 0.11,
0.13-0.15.1 and 0.17-0.34 (docs/engine-semantics.md 19). perf/cudagraph.py dispatches each batch on the result.

- Optimization level (config/vllm.py OPTIMIZATION_LEVEL_00..03, from 0.13): -O0 no compilation
  (CompilationMode.NONE) and cudagraph_mode NONE; -O1 PIECEWISE; -O2 (the default) and -O3 FULL_AND_PIECEWISE,
  both with vLLM's piecewise compile (VLLM_COMPILE). --enforce-eager sets -O0 ("Enforce eager set, overriding
  optimization level to -O0") and cudagraph_mode NONE. Before 0.13 (0.11 config/__init__.py), -O n is the
  compilation level: unset, 3 (PIECEWISE) unless eager, else 0; graphs (FULL_AND_PIECEWISE) only at level 3,
  torch.compile at 1-3; --enforce-eager turns graphs off, and compilation too where no level was given.
- A mode with piecewise graphs (PIECEWISE, FULL_AND_PIECEWISE) without the piecewise compile is NONE
  ("Cudagraph mode ... is not compatible with compilation mode ... Overriding to NONE").
- FULL runs mixed batches in FULL graphs only with an attention backend of AttentionCGSupport.ALWAYS:
  FlashAttention 3, on Hopper (v1/attention/backends/flash_attn.py); FlashAttention 2 elsewhere supports uniform
  batches only, and gpu_model_runner._check_and_update_cudagraph_mode falls back to FULL_AND_PIECEWISE when
  attention is a splitting op (the piecewise compile's default) or else to FULL_DECODE_ONLY.
- Capture sizes (VllmConfig._set_cudagraph_sizes): cudagraph_capture_sizes as given (deduplicated, those above
  max_num_batched_tokens dropped), else 1, 2, 4, multiples of 8 below 256, multiples of 16 up to
  max_cudagraph_capture_size = min(its value or 2 x max_num_seqs x decode query length, 512 unless given,
  max_num_batched_tokens); interactivity (0.17+) captures every size from 1 to min(that, 32) before the
  multiples of 8. A given max_cudagraph_capture_size that disagrees with the given sizes' largest is refused.
- No graphs on a CPU.
Left out: sequence parallelism's size filter (off by default), 0.34's separate prefill and decode capture grids
(not the default), a user's compilation mode or splitting ops.
"""

from __future__ import annotations

from typing import Literal

# vLLM's CUDAGraphMode (config/compilation.py): what a uniform decode batch and any other batch replay
CudagraphMode = Literal["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]
PerformanceMode = Literal["balanced", "interactivity", "throughput"]
LEVEL_MODES: tuple[CudagraphMode, ...] = ("NONE", "PIECEWISE", "FULL_AND_PIECEWISE", "FULL_AND_PIECEWISE")
PIECEWISE_MODES = ("PIECEWISE", "FULL_AND_PIECEWISE")  # those that need vLLM's piecewise compile
# compilation_config keys that are engine arguments (validate reads them, plan writes them)
COMPILATION_KEYS = ("cudagraph_mode", "cudagraph_capture_sizes", "max_cudagraph_capture_size")


def capture_sizes(max_capture_size: int, interactivity: bool = False) -> tuple[int, ...]:
    """vLLM's default capture sizes up to max_capture_size (empty when it is 0: eager)."""
    fine = min(max_capture_size, 32) if interactivity else 0
    sizes = list(range(1, fine + 1)) if fine else [size for size in (1, 2, 4) if size <= max_capture_size]
    if max_capture_size >= 8:
        sizes += range(8, min(max_capture_size + 1, 256), 8)
    if max_capture_size >= 256:
        sizes += range(256, max_capture_size + 1, 16)
    return tuple(sorted(set(sizes)))


def compile_and_mode(
    version_levels: bool, level: int | None, enforce_eager: bool, asked: CudagraphMode | None
) -> tuple[bool, bool, CudagraphMode]:
    """(torch.compile runs, vLLM's piecewise compile runs, the CUDA-graph mode before the backend's check).
    version_levels: the version has optimization levels (0.13+); else `level` is the compilation level."""
    if version_levels:
        level = 0 if enforce_eager else (2 if level is None else level)
        compiled = piecewise = level > 0
        mode = LEVEL_MODES[level] if asked is None else asked
    else:
        level = (0 if enforce_eager else 3) if level is None else level
        compiled, piecewise = level > 0, level == 3
        if asked in PIECEWISE_MODES and not piecewise:  # 0.11 asserts it: the server exits
            raise ValueError(f"cudagraph_mode {asked} needs compilation level 3 (vLLM before 0.13 refuses to start)")
        mode = ("FULL_AND_PIECEWISE" if level == 3 else "NONE") if asked is None else asked
    if mode in PIECEWISE_MODES and not piecewise:
        mode = "NONE"
    return compiled, piecewise, "NONE" if enforce_eager else mode


def graph_sizes(
    sizes: list[int] | None, max_size: int | None, default_max: int, max_num_batched_tokens: int, interactivity: bool
) -> tuple[int, ...]:
    """The capture sizes: those given (deduplicated, within max_num_batched_tokens), else the default grid up to
    min(max_size or default_max, max_num_batched_tokens). A given max that is not the given sizes' largest is
    refused (ValueError), as vLLM refuses it."""
    if sizes is None:
        limit = default_max if max_size is None else max_size
        return capture_sizes(min(limit, max_num_batched_tokens), interactivity)
    captured = tuple(sorted({size for size in sizes if size <= max_num_batched_tokens}))
    if max_size is not None and captured and max_size != captured[-1]:
        raise ValueError(
            f"max_cudagraph_capture_size {max_size} is not the largest of cudagraph_capture_sizes ({captured[-1]}, "
            "of those within max_num_batched_tokens): vLLM refuses the two disagreeing"
        )
    return captured
