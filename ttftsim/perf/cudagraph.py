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
Other modes (cudagraph_mode, -O, --enforce-eager: config/graphs.py): PIECEWISE replays piecewise graphs for
every batch within the limit, FULL a FULL graph for every batch (FlashAttention 3), FULL_DECODE_ONLY FULL graphs
for uniform decode batches and nothing else, NONE none; a batch that replays no graph is not padded
(CudagraphDispatcher.dispatch returns BatchDescriptor(num_tokens)).
Left out: speculative decoding (query length > 1), LoRA, sequence parallelism (off by default in 0.15:
IS_DENSE = False), data parallelism. Newer vLLM (0.33) uses the same grid and raises the cap to 1024 on
datacenter Blackwell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ttftsim.config.graphs import CudagraphMode, capture_sizes

GraphMode = Literal["full", "piecewise", "eager"]
# what a batch within the capture limit replays when it is not a uniform decode batch with its own FULL graph
# (CUDAGraphMode.mixed_mode())
_MIXED: dict[str, GraphMode] = {
    "NONE": "eager",
    "PIECEWISE": "piecewise",
    "FULL": "full",
    "FULL_DECODE_ONLY": "eager",
    "FULL_AND_PIECEWISE": "piecewise",
}


@dataclass(frozen=True)
class GraphDispatch:
    """CUDA-graph dispatch for one engine. Invariant: padded[n] is the smallest capture size >= n for
    1 <= n <= limit (padded[0] = 0); batches above the limit run eagerly, as does any batch whose graph mode
    is eager (unpadded)."""

    padded: tuple[int, ...]
    full_max_tokens: int  # separate FULL (uniform decode) graphs are captured up to this many tokens (0: none)
    mixed: GraphMode = "piecewise"

    @classmethod
    def of(cls, max_capture_size: int, max_num_seqs: int | None) -> GraphDispatch:
        """vLLM's default: FULL_AND_PIECEWISE on the default grid up to max_capture_size."""
        return cls.of_sizes(capture_sizes(max_capture_size), "FULL_AND_PIECEWISE", max_num_seqs)

    @classmethod
    def of_sizes(cls, sizes: tuple[int, ...], mode: CudagraphMode, max_num_seqs: int | None) -> GraphDispatch:
        """Dispatch over these capture sizes (ascending) in this cudagraph_mode (config/graphs.py resolves
        both): uniform decode batches get FULL graphs of their own up to max_num_seqs in FULL_DECODE_ONLY and
        FULL_AND_PIECEWISE (initialize_cudagraph_keys: decode_mode FULL with a separate routine); in FULL
        every batch replays a FULL graph."""
        if mode == "NONE":
            sizes = ()
        padded = [0]
        for size in sizes:
            padded += [size] * (size - len(padded) + 1)
        limit = sizes[-1] if sizes else 0
        separate = mode in ("FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
        full_max = (limit if max_num_seqs is None else min(limit, max_num_seqs)) if separate else 0
        return cls(tuple(padded), full_max, _MIXED[mode])

    @property
    def limit(self) -> int:
        return len(self.padded) - 1

    def mode(self, num_tokens: int, is_uniform_decode: bool) -> GraphMode:
        if num_tokens > self.limit:
            return "eager"
        if is_uniform_decode and self.padded[num_tokens] <= self.full_max_tokens:
            return "full"
        return self.mixed

    def padded_tokens(self, num_tokens: int, is_uniform_decode: bool = True) -> int:
        """The token count the captured (non-attention) kernels run at: the batch's own where it runs eagerly."""
        if num_tokens > self.limit:
            return num_tokens
        padded = self.padded[num_tokens]
        if self.mixed == "eager" and not (is_uniform_decode and padded <= self.full_max_tokens):
            return num_tokens
        return padded
