"""A vLLM command line's flags, as vllm_args.py parsed them, turned into ttftsim's engine arguments: each modelled
flag (MODELLED) converted to its EngineArgs value, the CUDA-graph keys of --compilation-config, -O, and warnings
for a flag given twice or written as an abbreviation.

A flag with no effect on the prediction (NO_EFFECT: address, names, logging) is silent; any other flag vLLM reads,
and a modelled flag with a value ttftsim does not model (--kv-cache-dtype nvfp4, an n-gram speculative config),
is recorded as not modelled; --dtype float32 is an error finding. --config's file in the container is not read
(a warning). Refusals and values vLLM cannot read are vllm_args.py's and vllm_command.py's.
"""

from __future__ import annotations

from typing import Any, get_args

from ttftsim.config.graphs import COMPILATION_KEYS, CudagraphMode
from ttftsim.config.versions import at_least
from ttftsim.validate.lmcache_env import kv_transfer_value
from ttftsim.validate.vllm_args import ParsedCommand
from ttftsim.validate.vllm_invocation import CommandFinding, VllmCommand, note_not_modelled


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# vLLM destinations ttftsim models, each an EngineArgs field of the same name, values converted by _engine_value.
# Listed, not taken from EngineArgs: a value vLLM accepts must not become an input error where ttftsim's schema
# asks for more (a speculative config needs an acceptance rate that no command line states).
MODELLED = words(
    """
tensor_parallel_size max_num_seqs max_num_batched_tokens max_model_len gpu_memory_utilization block_size
kv_cache_dtype quantization dtype scheduling_policy long_prefill_token_threshold enable_prefix_caching
enable_chunked_prefill enforce_eager async_scheduling num_gpu_blocks_override speculative_config enable_lora
max_loras max_lora_rank max_cpu_loras kv_offloading_size kv_transfer_config enable_expert_parallel data_parallel_size
disable_hybrid_kv_cache_manager enable_extensible_kv_cache optimization_level performance_mode max_num_queued_reqs
max_num_queued_tokens cudagraph_capture_sizes max_cudagraph_capture_size
"""
)
# flags that argparse appends (action="append"): given twice, both count
APPENDED = frozenset({"middleware", "lora_modules", "prompt_adapters", "tool_parser_plugin"})
# --compilation-config's engine arguments are config/graphs.py COMPILATION_KEYS; `level` is -O before vLLM 0.13
CUDAGRAPH_MODES = get_args(CudagraphMode)
# Flags with no effect on scheduling, memory or kernel time: the server's address, names, auth, logging,
# chat formatting and tool parsing, where weights are downloaded from
NO_EFFECT = words(
    """
model model_tag host port served_model_name api_key download_dir uvicorn_log_level disable_log_requests
enable_log_requests disable_log_stats disable_uvicorn_access_log trust_remote_code chat_template
enable_auto_tool_choice tool_call_parser reasoning_parser response_role root_path ssl_keyfile
ssl_certfile ssl_ca_certs allowed_origins allowed_methods allowed_headers hf_token revision
tokenizer_revision code_revision max_log_len disable_fastapi_docs enable_prompt_tokens_details
enable_server_load_tracking enable_force_include_usage tokenizer seed log_error_stack
disable_frontend_multiprocessing
"""
)
QUANT_NAMES = {"fp8": "fp8", "awq": "int4", "awq_marlin": "int4", "gptq": "int4", "gptq_marlin": "int4"}
QUANT_NAMES |= {"compressed-tensors": "int8", "bitsandbytes": "int4", "modelopt": "fp8", "mxfp4": "mxfp4"}
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "auto": "auto"}
KV_DTYPES = {"auto": "auto", "bfloat16": "bf16", "float16": "fp16"}


def _check_repeated(parsed: ParsedCommand, command: VllmCommand, where: str) -> None:
    """A flag given twice: argparse keeps the last value, almost always not what was meant (a warning)."""
    seen: dict[str, str] = {}
    for given in parsed.given:
        dest = given.flag.dest
        if dest in seen and dest not in APPENDED:  # (dotted -cc.key=value flags were joined into one already)
            command.findings.append(
                CommandFinding(
                    "warning",
                    f"{where}: {given.written} is given more than once ({seen[dest]}, then {given.written} "
                    f"{given.value}): vLLM takes the last",
                    f"give {given.option} once",
                )
            )
        seen[dest] = f"{given.written} {given.value}"


def _check_abbreviation(
    written: str, canonical: str, options: tuple[str, ...], command: VllmCommand, where: str
) -> None:
    """A flag written as a prefix of its name (not one of its own spellings, such as -cc or -O)."""
    if written not in options and written.replace("_", "-") != canonical:
        command.findings.append(
            CommandFinding(
                "warning",
                f"{where}: {written} is read by vLLM as {canonical} (argparse accepts a unique prefix; "
                "a later vLLM with a new flag of the same prefix refuses it as ambiguous)",
                f"write {canonical} in full",
            )
        )


def interpret(parsed: ParsedCommand, command: VllmCommand, where: str, version: str) -> None:
    _check_repeated(parsed, command, where)
    last_compilation = next((g for g in reversed(parsed.given) if g.flag.dest == "compilation_config"), None)
    kept = [g for g in parsed.given if g.flag.dest != "compilation_config" or g is last_compilation]  # argparse's last
    for given in kept:
        dest = given.flag.dest
        _check_abbreviation(given.written, given.option, given.flag.options, command, where)
        if dest == "pipeline_parallel_size":
            command.pipeline_parallel = int(given.value)
        elif dest == "config":  # FlexibleArgumentParser._pull_args_from_config: a YAML file in the container
            command.findings.append(
                CommandFinding(
                    "warning",
                    f"{where}: --config {given.value}: vLLM reads more arguments from this file in the container; "
                    "ttftsim cannot see it and predicts without them",
                    "put the arguments on the command line (or in the manifest's args)",
                )
            )
        elif dest == "compilation_config":
            # -O n before vLLM 0.13 is the compilation config's level (vllm_args._preprocess); config/graphs.py reads it
            level_is_compilation = given.written == "-O" or not at_least(version, (0, 13))
            _compilation(given.written, given.value, command, level_is_compilation)
        elif dest in MODELLED:
            value = _engine_value(dest, given.value)
            if dest == "max_model_len" and given.value == -1:
                continue  # auto / -1: the model's own length, as when unset
            if dest == "dtype" and str(given.value) in ("float32", "float"):
                command.findings.append(  # a CI gate must not pass what it predicted in half the memory
                    CommandFinding(
                        "error",
                        f"{where}: {given.written} {given.value}: 32-bit weights and activations are not modelled "
                        "(their weights take twice the memory of bf16's, their steps several times the time); "
                        "memory fit and TTFT are not predicted for them",
                        f"serve in bfloat16 or float16 ({given.written} auto), or check this deployment by hand",
                    )
                )
            elif value is None:
                note_not_modelled(command, f"{given.written} {given.value}")
            else:
                command.engine[dest] = value
        elif dest not in NO_EFFECT:
            note_not_modelled(command, given.written)


def _engine_value(dest: str, value: Any) -> Any:
    """The EngineArgs value of a modelled vLLM value; None for a value ttftsim does not model."""
    if dest == "max_model_len":
        return None if value == -1 else value  # -1 / auto: the model's own length, as unset
    if dest == "quantization":
        return QUANT_NAMES.get(str(value))
    if dest == "dtype":
        return DTYPES.get(str(value))
    if dest == "kv_cache_dtype":
        text = str(value)
        return "fp8" if text in ("fp8", "fp8_e4m3", "fp8_e5m2") else KV_DTYPES.get(text)
    if dest == "speculative_config":
        return _speculative(value)
    if dest == "optimization_level":
        return _level(value)
    if dest == "kv_transfer_config":
        return kv_transfer_value(value)
    if dest == "kv_offloading_size":  # GiB; vLLM's argument list types it loosely
        try:
            return float(value)
        except (TypeError, ValueError):
            return None
    return value


def _compilation(written: str, value: Any, command: VllmCommand, level_is_compilation: bool) -> None:
    """The keys of --compilation-config that are engine arguments (COMPILATION_KEYS; before vLLM 0.13 also `level`,
    the -O of those versions); every other key is read by vLLM and not modelled (a warning naming it)."""
    if not isinstance(value, dict):
        note_not_modelled(command, f"{written} {value}")
        return
    for key, item in value.items():
        name = "optimization_level" if key == "level" and level_is_compilation else key
        converted = _compilation_value(name, item) if name in (*COMPILATION_KEYS, "optimization_level") else None
        if converted is None:
            note_not_modelled(command, f"{written}.{key} {item}")
        else:
            command.engine[name] = converted


def _compilation_value(name: str, item: Any) -> Any:
    """The engine argument's value of one --compilation-config key; None for one ttftsim does not model."""
    if name == "optimization_level":
        return _level(item)
    if name == "cudagraph_mode":
        text = str(item).upper()
        return text if text in CUDAGRAPH_MODES else None
    if name == "cudagraph_capture_sizes":
        sizes = item if isinstance(item, list) else None
        ok = sizes and all(isinstance(size, int) and not isinstance(size, bool) and size >= 1 for size in sizes)
        return sizes if ok else None
    return item if isinstance(item, int) and not isinstance(item, bool) and item >= 1 else None


def _level(value: Any) -> int | None:
    """An optimization (or, before vLLM 0.13, compilation) level: 0-3, written as a number or O0-O3."""
    text = str(value).upper().removeprefix("O")
    return int(text) if text in ("0", "1", "2", "3") else None


def _speculative(value: Any) -> dict[str, Any] | None:
    """A speculative config ttftsim can model from the command line alone: EAGLE, EAGLE-3 or MTP (their
    acceptance has a published default, docs/engine-semantics.md 11); n-gram and draft models depend on the
    workload's acceptance, which no command line states (a warning: not modelled)."""
    if not isinstance(value, dict):
        return None
    method, tokens = str(value.get("method", "")), value.get("num_speculative_tokens")
    method = "mtp" if method.endswith("mtp") else method  # deepseek_mtp, qwen3_next_mtp, ...
    if method not in ("eagle", "eagle3", "mtp") or not isinstance(tokens, int) or tokens < 1:
        return None
    return {"method": method, "num_speculative_tokens": tokens}
