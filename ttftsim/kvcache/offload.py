"""A CPU tier for KV blocks: vLLM's native KV offloading (`--kv-offloading-size`, the OffloadingConnector
with its CPU backend; vllm/v1/kv_offload/ and distributed/kv_transfer/kv_connector/v1/offloading_connector.py).

Every block that fills and is hashed is also stored to host memory (write-through; the copies run on their
own CUDA stream and are not charged here); the tier holds capacity_blocks blocks and evicts the least
recently used (LRUOffloadingManager). A new request whose prefix goes on past its GPU prefix-cache hit into
blocks the tier holds loads them (get_num_new_matched_tokens): it waits for the copy in
WAITING_FOR_REMOTE_KVS, skipped by admission, and is then admitted with those tokens computed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class CpuTier:
    """Block hashes held in host memory, least recently used first. Invariant: len <= capacity_blocks."""

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity_blocks = capacity_blocks
        self._held: OrderedDict[int, None] = OrderedDict()
        self.stored_blocks = 0
        self.loaded_blocks = 0

    def __len__(self) -> int:
        return len(self._held)

    def store(self, hashes: Sequence[int]) -> None:
        """Blocks just filled on the GPU: kept (most recent last), evicting the least recently used."""
        held = self._held
        for block_hash in hashes:
            if block_hash in held:
                held.move_to_end(block_hash)
                continue
            held[block_hash] = None
            self.stored_blocks += 1
            if len(held) > self.capacity_blocks:
                held.popitem(last=False)

    def lookup(self, hashes: Sequence[int], start: int) -> int:
        """How many consecutive blocks from hashes[start] the tier holds (touched as used)."""
        count = 0
        for block_hash in hashes[start:]:
            if block_hash not in self._held:
                break
            self._held.move_to_end(block_hash)
            count += 1
        return count
