"""Paged KV cache: blocks, reference counts, chained prefix hashes, LRU eviction (vLLM V1 semantics)."""
