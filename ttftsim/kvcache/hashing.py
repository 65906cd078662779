"""Chained hashes of full KV blocks, computed from what a prompt is made of.

A prompt is a list of segments (content id, tokens): a system prompt shared by many requests is one
content id, a unique question another. Block j's key is the tuple of (content id, offset, length) pieces
its tokens come from, and its hash is hash((parent hash, key)), like vLLM's
hash(parent_hash, block_token_ids). Equal hashes therefore mean equal prefixes; only full blocks are
hashed. Python's hash of int tuples does not depend on PYTHONHASHSEED, so runs are reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence

Segment = tuple[int, int]  # (content id, number of tokens)
NONE_HASH = 0


def block_hashes(segments: Sequence[Segment], block_size: int, num_blocks: int, start: Sequence[int] = ()) -> list[int]:
    """Hashes of the first `num_blocks` full blocks; `start` holds hashes already computed (a prefix)."""
    return extend_block_hashes(list(start[:num_blocks]), segments, block_size, num_blocks)


def extend_block_hashes(hashes: list[int], segments: Sequence[Segment], block_size: int, num_blocks: int) -> list[int]:
    """Append to `hashes` (a correct prefix) until it holds at least num_blocks hashes; returns it."""
    if len(hashes) >= num_blocks:
        return hashes
    parent = hashes[-1] if hashes else NONE_HASH
    seg_index, seg_offset = _locate(segments, len(hashes) * block_size)
    for _ in range(len(hashes), num_blocks):
        content, length = segments[seg_index]
        if length - seg_offset >= block_size:  # the common case: the block lies in one segment
            key: tuple[tuple[int, int, int], ...] = ((content, seg_offset, block_size),)
            seg_offset += block_size
            if seg_offset == length:
                seg_index, seg_offset = seg_index + 1, 0
        else:
            key = _pieces(segments, seg_index, seg_offset, block_size)
            seg_index, seg_offset = _locate_after(segments, seg_index, seg_offset, block_size)
        parent = hash((parent, key))
        hashes.append(parent)
    return hashes


def _locate(segments: Sequence[Segment], token: int) -> tuple[int, int]:
    """(segment index, offset) of a token position."""
    for index, (_, length) in enumerate(segments):
        if token < length:
            return index, token
        token -= length
    return len(segments), 0


def _pieces(segments: Sequence[Segment], index: int, offset: int, size: int) -> tuple[tuple[int, int, int], ...]:
    """(content id, offset, length) pieces of the `size` tokens starting at segment `index`, `offset`."""
    pieces = []
    while size:
        content, length = segments[index]
        take = min(size, length - offset)
        pieces.append((content, offset, take))
        size -= take
        index, offset = (index + 1, 0) if offset + take == length else (index, offset + take)
    return tuple(pieces)


def _locate_after(segments: Sequence[Segment], index: int, offset: int, size: int) -> tuple[int, int]:
    """Position `size` tokens after (index, offset)."""
    while size:
        length = segments[index][1]
        take = min(size, length - offset)
        size -= take
        index, offset = (index + 1, 0) if offset + take == length else (index, offset + take)
    return index, offset
