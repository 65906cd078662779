"""One replica of a vLLM V1-style engine: scheduler, KV cache, the SimPy loop that runs iterations, and the
recorder it writes what it did to (summaries in metrics/ read the recorder's frames afterwards)."""
