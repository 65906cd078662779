"""Split a kernel table by shape region: whole blocks of shapes go to train, validation or test.

A block is the set of rows that share the operator's block key, chosen for how the simulator meets shapes
the table lacks:
- gemm: the weight shape (n, k). A model's widths over its TP degree fix (n, k); the token count m varies
  every iteration and the tables sweep it densely. A held-out pair is a weight shape the fit never saw at
  any m, its neighbours in n and in k left in.
- prefill and decode attention: the head configuration per GPU (heads, KV heads, head size). A model at a
  TP degree is one configuration; context length and batch vary inside it.
- moe: the expert configuration per GPU (experts, top-k, hidden, expert width over TP); tokens vary inside.
- all-reduce: bands of three octaves of message size (a factor of 8) per GPU count. There is one shape
  column, so a region is a gap in it: three consecutive sizes unseen.

Blocks are dealt, in an order shuffled with a fixed seed, 3:1:1 to train, validation and test (at least one
each). A block sits wholly in one split, so no test shape shares its block with a fitted shape: the test
error measures interpolation (and at the edges of the grid, extrapolation) across gaps, not next-door rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

Mask = NDArray[np.bool_]
SEED = 16  # fixed: the same table always splits the same way
VALIDATION_SHARE = 0.2
TEST_SHARE = 0.2
OCTAVES_PER_BAND = 3
BLOCK_COLUMNS = {
    "gemm": ("n", "k"),
    "prefill_attention": ("heads", "kv_heads", "head_dim"),
    "decode_attention": ("heads", "kv_heads", "head_dim"),
    "moe": ("experts", "top_k", "hidden", "inter"),
    "allreduce": ("message_band",),
}
BLOCK_MEANING = {
    "gemm": "whole weight shapes (n, k), every m",
    "prefill_attention": "whole head configurations (heads, KV heads, head size), every batch and context",
    "decode_attention": "whole head configurations (heads, KV heads, head size), every batch and context",
    "moe": "whole expert configurations (experts, top-k, hidden, expert width), every token count",
    "allreduce": "bands of three consecutive message sizes (x8)",
}


@dataclass(frozen=True)
class Split:
    """Row masks over one table. Every row is in exactly one of train, validation and test, and all rows of
    a block (`block` holds each row's block number) are in the same one."""

    block: NDArray[np.int64]
    train: Mask
    validation: Mask
    test: Mask

    def blocks(self, mask: Mask) -> int:
        return len(np.unique(self.block[mask]))


def block_ids(op: str, frame: pd.DataFrame) -> NDArray[np.int64]:
    """Each row's block number: the rank of its block key among the table's distinct keys."""
    keys = frame.assign(message_band=_message_band(frame)) if op == "allreduce" else frame
    columns = list(BLOCK_COLUMNS[op])
    codes = keys.groupby(columns, sort=True).ngroup()
    return np.asarray(codes.to_numpy(), dtype=np.int64)


def _message_band(frame: pd.DataFrame) -> NDArray[np.int64]:
    octave = np.log2(frame["message_bytes"].to_numpy(dtype=np.float64))
    return np.asarray(np.floor((octave - octave.min()) / OCTAVES_PER_BAND + 1e-9), dtype=np.int64)


def split_by_region(op: str, frame: pd.DataFrame, seed: int = SEED) -> Split | None:
    """Deal the table's blocks to train, validation and test; None when it has fewer than three blocks."""
    block = block_ids(op, frame)
    count = int(block.max()) + 1 if len(block) else 0
    if count < 3:
        return None
    order = np.random.default_rng(seed).permutation(count)
    num_test = max(1, round(TEST_SHARE * count))
    num_validation = max(1, round(VALIDATION_SHARE * count))
    test_blocks = order[:num_test]
    validation_blocks = order[num_test : num_test + num_validation]
    test = np.isin(block, test_blocks)
    validation = np.isin(block, validation_blocks)
    return Split(block, np.logical_not(test | validation), validation, test)
