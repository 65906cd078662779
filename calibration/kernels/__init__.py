"""Triton kernels for the operators that dominate TTFT and TPOT, each with a torch reference: GEMM, causal
prefill attention with GQA, paged decode attention over a block table, RMSNorm. Correctness is tested on
the CPU under TRITON_INTERPRET=1 (tests/calibration/test_kernels.py); timing runs on a GPU (sweep.py)."""
