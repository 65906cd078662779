"""One replica of a vLLM V1-style engine: scheduler, KV cache, and the SimPy loop that runs iterations."""
