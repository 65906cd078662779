"""vLLM's KV-cache groups of a model with sliding-window layers, as vLLM 0.15.1 forms them.

vllm/v1/core/kv_cache_utils.py get_kv_cache_groups: a model whose layers all have one spec (every layer full
attention, or every layer the same sliding window: Mistral-7B-v0.1, Phi-3-mini-4k) is one group of all its
layers (_get_kv_cache_groups_uniform_spec). A hybrid model (full and sliding-window layers: Gemma 2/3, gpt-oss)
is split by _get_kv_cache_groups_uniform_page_size into groups of equal size: the group size is the smaller
layer count of the two kinds (the larger one when it is under 1.25 times the smaller), and each kind takes
cdiv(its layers, group size) groups, the last one padded with empty layers. Every group's block is one page
(block_size tokens of one layer's K and V) in each of group-size tensors that one layer of every group shares
(get_kv_cache_config_from_groups), so num_blocks = KV memory // page // group size (get_num_blocks), and a
request holds blocks in every group: a token costs group size x groups layer pages, the padding included.
With the hybrid manager disabled (--disable-hybrid-kv-cache-manager, or by default whenever a KV connector is set:
vllm/config/vllm.py VllmConfig.__post_init__) unify_hybrid_kv_cache_specs turns a hybrid model's sliding-window
layers into full-attention ones: one group, every token kept in every layer (the window still saves compute).
"""

from __future__ import annotations

from dataclasses import dataclass

from ttftsim.model.spec import ModelSpec
from ttftsim.perf.attention import LayerKinds

PADDING_TOLERANCE = 1.25  # vLLM pads the smaller kind up to the larger one's count below this ratio


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class KvCacheGroups:
    """vLLM's grouping: full-attention groups, sliding-window groups (window `window`), layers per group."""

    full_groups: int
    windowed_groups: int
    group_size: int
    window: int = 0  # the windowed groups' sliding window; 0 when there are none

    @classmethod
    def of(cls, spec: ModelSpec, hybrid: bool = True) -> KvCacheGroups:
        """The groups of `spec`; hybrid=False: vLLM's hybrid KV-cache manager off (a KV connector, or asked)."""
        kinds = LayerKinds.of(spec)
        if not kinds.windowed or spec.is_mla:
            return cls(1, 0, spec.num_hidden_layers)
        if not kinds.full:
            return cls(0, 1, kinds.windowed, kinds.window)
        if not hybrid:
            return cls(1, 0, spec.num_hidden_layers)
        smaller, larger = min(kinds.full, kinds.windowed), max(kinds.full, kinds.windowed)
        size = larger if larger < smaller * PADDING_TOLERANCE else smaller
        return cls(_cdiv(kinds.full, size), _cdiv(kinds.windowed, size), size, kinds.window)

    @property
    def num_groups(self) -> int:
        return self.full_groups + self.windowed_groups

    @property
    def padded_layers(self) -> int:
        """Layer pages one token costs when held in every group: group size x groups (padding included)."""
        return self.group_size * self.num_groups
