"""Which CUDA graph an iteration replays, and the token count its captured kernels run at.

vLLM 0.15.1's default (-O2) is cudagraph_mode FULL_AND_PIECEWISE (config/vllm.py OPTIMIZATION_LEVEL_02):
- capture sizes (config/vllm.py VllmConfig._set_cudagraph_sizes): 1, 2, 4, then multiples of 8 below 256,
  then multiples of 16 up to max_cudagraph_capture_size = min(2 x max_num_seqs, 512, max_num_batched_tokens);
  the largest size on that grid is the effective limit.
- dispatch (v1/cudagraph_dispatcher.py CudagraphDispatcher.dispatch): a batch of more tokens than the limit
  runs without graphs, unpadded. Otherwise its token count is padded up to the next capture size; a
  uniform decode batch (every request one new token, gpu_model_runner._is_uniform_decode) replays the FULL
  graph when that padded size is <= max_num_seqs (initialize_cudagraph_keys captures FULL decode graphs
  only up to max_num_seqs); every other batch replays the PIECEWISE graphs, attention running eagerly
  between the captured pieces.
- the LM head is outside the graphs: it runs on the sampled rows only (gpu_model_runner.execute_model,
  `hidden_states[logits_indices]`), never padded.
Left out: speculative decoding (query length > 1), LoRA, sequence parallelism (off by default in 0.15:
IS_DENSE = False), data parallelism. Newer vLLM (0.33) uses the same grid and raises the cap to 1024 on
datacenter Blackwell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GraphMode = Literal["full", "piecewise", "eager"]


def capture_sizes(max_capture_size: int) -> tuple[int, ...]:
    """vLLM's default capture sizes for a max_cudagraph_capture_size (empty when it is 0: eager)."""
    sizes = [size for size in (1, 2, 4) if size <= max_capture_size]
    if max_capture_size >= 8:
        sizes += range(8, min(max_capture_size + 1, 256), 8)
    if max_capture_size >= 256:
        sizes += range(256, max_capture_size + 1, 16)
    return tuple(sizes)


@dataclass(frozen=True)
class GraphDispatch:
    """CUDA-graph dispatch for one engine. Invariant: padded[n] is the smallest capture size >= n for
    1 <= n <= limit (padded[0] = 0); batches above the limit run eagerly."""

    padded: tuple[int, ...]
    full_max_tokens: int  # FULL (uniform decode) graphs are captured up to this many tokens

    @classmethod
    def of(cls, max_capture_size: int, max_num_seqs: int | None) -> GraphDispatch:
        sizes = capture_sizes(max_capture_size)
        padded = [0]
        for size in sizes:
            padded += [size] * (size - len(padded) + 1)
        limit = sizes[-1] if sizes else 0
        return cls(tuple(padded), limit if max_num_seqs is None else min(limit, max_num_seqs))

    @property
    def limit(self) -> int:
        return len(self.padded) - 1

    def mode(self, num_tokens: int, is_uniform_decode: bool) -> GraphMode:
        if num_tokens > self.limit:
            return "eager"
        if is_uniform_decode and self.padded[num_tokens] <= self.full_max_tokens:
            return "full"
        return "piecewise"

    def padded_tokens(self, num_tokens: int) -> int:
        """The token count the captured (non-attention) kernels run at."""
        return self.padded[num_tokens] if num_tokens <= self.limit else num_tokens
