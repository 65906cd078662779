"""What a vLLM container will run, for `ttftsim validate`: its command line read as that vLLM version parses it
(vllm_args.py), turned into ttftsim's engine arguments, and its VLLM_* environment checked against the
variables that version reads (vllm/envs.py).

Every flag and variable ends in one of four places: modelled (an engine argument), of no effect on what
ttftsim predicts (ports, names, logging: silent), read by vLLM but not modelled (a warning naming it), or
refused by vLLM (an error: the server exits at start). When ttftsim has no argument list for the exact
version, an unknown flag is a warning, since the nearest list cannot prove that version refuses it.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, get_args

from ttftsim.config.graphs import COMPILATION_KEYS, CudagraphMode
from ttftsim.config.versions import at_least, version_defaults, version_table
from ttftsim.errors import InputError
from ttftsim.model.catalog import find_preset, preset_repository
from ttftsim.model.hf_ids import parse_model_id
from ttftsim.validate.lmcache_env import kv_transfer_value, lmcache_environment
from ttftsim.validate.vllm_arg_list import arg_list_for
from ttftsim.validate.vllm_args import ParsedCommand, parse_command, vllm_arguments


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# vLLM destinations ttftsim models, each an EngineArgs field of the same name, values converted by _engine_value.
# Listed, not taken from EngineArgs: a value vLLM accepts must not become an input error where ttftsim's schema
# asks for more (a speculative config needs an acceptance rate that no command line states).
MODELLED = _words(
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
NO_EFFECT = _words(
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
QUANT_NAMES |= {"compressed-tensors": "int8", "bitsandbytes": "int4", "modelopt": "fp8"}
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "auto": "auto"}
KV_DTYPES = {"auto": "auto", "bfloat16": "bf16", "float16": "fp16"}
# VLLM_* variables with no effect on what ttftsim predicts (logging, telemetry, where files go, ports)
NO_EFFECT_ENV = _words(
    """
VLLM_LOGGING_LEVEL VLLM_CONFIGURE_LOGGING VLLM_LOGGING_CONFIG_PATH VLLM_LOGGING_PREFIX
VLLM_NO_USAGE_STATS VLLM_DO_NOT_TRACK VLLM_USAGE_SOURCE VLLM_CACHE_ROOT VLLM_CONFIG_ROOT
VLLM_ASSETS_CACHE VLLM_HOST_IP VLLM_PORT VLLM_API_KEY VLLM_LOG_STATS_INTERVAL
VLLM_DEBUG_LOG_API_SERVER_RESPONSE VLLM_SERVER_DEV_MODE VLLM_USE_MODELSCOPE VLLM_RPC_TIMEOUT
VLLM_HTTP_TIMEOUT_KEEP_ALIVE VLLM_ENGINE_READY_TIMEOUT_S
"""
)

IMAGE_VERSION = re.compile(r":v?(\d+\.\d+(?:\.\d+)?)(?:$|[^\d.])")
ENV_NOTES = {
    "VLLM_USE_V1": "VLLM_USE_V1=0 runs the V0 engine, whose scheduler ttftsim does not model (V1's is)",
    "VLLM_ATTENTION_BACKEND": "kernel costs are those of the version's default attention backend",
}


@dataclass(frozen=True)
class CommandFinding:
    """One thing the command line or environment does that validate reports."""

    severity: str  # error, warning, info
    message: str
    fix: str = ""


@dataclass
class VllmCommand:
    """The container's vLLM invocation as ttftsim reads it."""

    model: str | None
    engine: dict[str, Any]
    pipeline_parallel: int
    not_modelled: list[str] = field(default_factory=list)  # flags as written, read by vLLM, not modelled
    findings: list[CommandFinding] = field(default_factory=list)


_UNEXPANDED = re.compile(
    r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)


def _without_fix(message: str) -> str:
    """unknown_variable's message without its closing advice (a warning gives its own)."""
    return re.split(r"[:;] give that", message, maxsplit=1)[0]


def unknown_variable(text: str) -> str | None:
    """What to say when a value is still an environment variable's reference (None: it holds none)."""
    if "$((" in text or "`" in text:
        return (
            "its value is computed by the shell ($((...)) arithmetic or a `command`), which ttftsim does not run: "
            "write the value"
        )
    match = _UNEXPANDED.search(text)
    if match is None:
        return None
    name = next(group for group in match.groups() if group)
    if match.group(1):  # $(NAME): Kubernetes leaves an undefined one as written, then a shell runs it as a command
        return (
            f"its value is $({name}), which the container's environment does not define (a ConfigMap or Secret "
            "that is not in the files, another valueFrom) and a shell would run as a command: not known here; give "
            "that ConfigMap or Secret with --manifest, or write the value"
        )
    return (
        f"its value is the variable {name}, whose value is not known here (from a ConfigMap or Secret that is not "
        "in the files, another valueFrom, a value the container's script computes, or not defined in the "
        "container): give that ConfigMap or Secret with --manifest, or write the value"
    )


def read_vllm_container(
    words: list[str],
    env: list[Any],
    version: str,
    where: str,
    source: str,
    image: str = "",
    values: dict[str, str] | None = None,
) -> VllmCommand:
    """The model, engine arguments, pipeline-parallel size and findings of a vLLM container's command line
    (`words`: command + args, shell already split) and `env` (the container's env list), for vLLM `version`.
    A flag vLLM does not know is an error finding; a value it cannot read is an InputError naming the flag
    (there is no value to predict with)."""
    chosen = arg_list_for(version)
    split = vllm_arguments(words)
    arguments, positional = split if split is not None else ([], True)
    parsed = parse_command(arguments, chosen, positional)
    command = VllmCommand(parsed.model, {}, 1)
    note = f" ({chosen.note(version)})" if not chosen.is_exact else ""
    if parsed.model and (unknown := unknown_variable(parsed.model)):
        raise InputError(source, "model", unknown)
    for refusal in parsed.refusals:
        unknown = unknown_variable(refusal.message) if refusal.kind == "value" else None
        if unknown and refusal.dest not in MODELLED:  # the prediction does not depend on this flag's value
            command.findings.append(
                CommandFinding(
                    "warning",
                    f"{where}: {refusal.option}: {_without_fix(unknown)}; ttftsim does not model this flag, "
                    "so the prediction does not depend on it, but whether vLLM accepts the value is not checked",
                    f"make sure {refusal.option} gets a valid value in the container",
                )
            )
            continue
        if refusal.kind == "value":
            raise InputError(source, refusal.option, unknown or f"vLLM {version} refuses it: {refusal.message}")
        near = difflib.get_close_matches(refusal.option, chosen.args.long_options(), n=1, cutoff=0.8)
        hint = f"did you mean {near[0]}? " if near and refusal.option.startswith("--") else ""
        command.findings.append(
            CommandFinding(
                "error" if chosen.is_exact else "warning",
                f"{where}: vLLM {version} refuses this command line and exits at start: {refusal.message}{note}",
                f"{hint}check {refusal.option} against `vllm serve --help=all` of vLLM {version}",
            )
        )
    _interpret(parsed, command, where, version)
    _check_quantization(parsed, command, where)
    _check_offloading_start(version, command, where)
    _check_image(image, version, command, where)
    known = chosen.args.environment_variables
    _check_environment(env, parsed, command, known, version, where)
    allow_long = (values if values is not None else {}).get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "")
    if "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in known and allow_long.strip().lower() in ("1", "true"):  # vllm/envs.py
        command.engine["allow_long_max_model_len"] = True
    if "kv_transfer_config" in command.engine:
        _lmcache_settings(env, command, where)
        if command.engine.get("enable_prefix_caching") is False:
            _without_lmcache(command, where)
    return command


def _without_lmcache(command: VllmCommand, where: str) -> None:
    """LMCache beside a vLLM without prefix caching (production-stack's CPU-offloading tutorial): vLLM runs it,
    ttftsim models LMCache's tier only beside the prefix cache (engine.py), so the prediction leaves the tier out."""
    command.engine.pop("kv_transfer_config")
    command.engine.pop("lmcache", None)
    command.findings.append(
        CommandFinding(
            "warning",
            f"{where}: LMCache (--kv-transfer-config) with prefix caching off: ttftsim models LMCache's tier only "
            "beside vLLM's prefix cache, so this prediction leaves it out (repeated prefixes would load from its "
            "CPU tier, not be computed again: TTFT lower than predicted for them)",
            "turn --enable-prefix-caching on (vLLM's default) to have the LMCache tier predicted",
        )
    )


def _lmcache_settings(env: list[Any], command: VllmCommand, where: str) -> None:
    """LMCache's tier settings from its LMCACHE_* variables (lmcache_env.py)."""
    settings, unmodelled, config_file = lmcache_environment(env)
    if settings:
        command.engine["lmcache"] = settings
    for name in unmodelled:
        _not_modelled(command, name)
    if config_file:
        command.findings.append(
            CommandFinding(
                "warning",
                f"{where}: LMCACHE_CONFIG_FILE {config_file}: LMCache reads its settings from this file in the "
                "container; ttftsim cannot see it and predicts with the LMCACHE_* variables and LMCache's defaults",
                "set the tiers with LMCACHE_* variables (LMCACHE_MAX_LOCAL_CPU_SIZE, LMCACHE_LOCAL_DISK, ...)",
            )
        )


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


def _interpret(parsed: ParsedCommand, command: VllmCommand, where: str, version: str) -> None:
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
                _not_modelled(command, f"{given.written} {given.value}")
            else:
                command.engine[dest] = value
        elif dest not in NO_EFFECT:
            _not_modelled(command, given.written)


# methods whose weights must come quantized: vLLM's get_quant_config looks for the checkpoint's quantization config
# (config.json quantization_config, quant_config.json, quantize_config.json) and raises "Cannot find the config file
# for awq" without one (vllm/model_executor/model_loader/weight_utils.py); fp8 and bitsandbytes quantize in flight
CHECKPOINT_METHODS = {"awq": "awq", "awq_marlin": "awq", "gptq": "gptq", "gptq_marlin": "gptq"}
# on an AWQ or GPTQ checkpoint, the methods whose config claims it (ModelConfig._verify_quantization tries each
# method's override_quantization_method first: the Marlin kernels, MoeWNA16 for MoE models) and those it refuses
ACCEPTS = {
    "awq": {"awq", "awq_marlin", "marlin", "moe_wna16"},
    "gptq": {"gptq", "gptq_marlin", "gptq_marlin_24", "gptq_bitblas", "marlin", "moe_wna16"},
}
REFUSED_ON_CHECKPOINT = {*CHECKPOINT_METHODS, "fp8", "bitsandbytes", "compressed-tensors", "modelopt", "gguf"}


def _check_quantization(parsed: ParsedCommand, command: VllmCommand, where: str) -> None:
    """--quantization against the checkpoint its id names: an AWQ or GPTQ method on weights that are not quantized
    exits at start; on an AWQ or GPTQ checkpoint, another method is refused (ModelConfig._verify_quantization: the
    model config's method must match the argument). Unquantized means no quantization suffix: an error for the
    publisher's own repository (the preset's), a warning for any other (its name may just not say)."""
    method = str(parsed.value("quantization") or "")
    model = parsed.model or ""
    if not method or not model or model.startswith(("/", ".", "~")):
        return
    model_id = parse_model_id(model)
    family = CHECKPOINT_METHODS.get(method)
    suffix = (model_id.suffix or "").lower()
    held = next((name for name in ("awq", "gptq") if suffix.startswith(name)), None)
    if held is not None and method in REFUSED_ON_CHECKPOINT - ACCEPTS[held]:
        command.findings.append(
            CommandFinding(
                "error",
                f"{where}: --quantization {method} on {model}, {_an(held)} checkpoint: vLLM exits at start (the "
                f"model config's quantization method {held} does not match the argument)",
                f"drop --quantization (vLLM reads {held} from the checkpoint), or serve weights quantized with "
                f"{method}",
            )
        )
    elif family is not None and model_id.suffix is None:
        preset = find_preset(model_id.base)
        repository = preset_repository(preset) if preset else None
        own = repository is not None and model.split("/", 1)[0].lower() == repository.split("/", 1)[0].lower()
        command.findings.append(
            CommandFinding(
                "error" if own else "warning",
                f"{where}: --quantization {method} on {model}, "
                + ("the publisher's unquantized weights" if own else "whose name carries no quantization suffix")
                + f": vLLM finds no {family.upper()} quantization config in an unquantized checkpoint and exits at "
                f"start ('Cannot find the config file for {method}')",
                f"serve {_an(family)} checkpoint of the model, or drop --quantization (or use fp8: it quantizes "
                "in flight)",
            )
        )


def _an(method: str) -> str:
    return f"{'an' if method == 'awq' else 'a'} {method.upper()}"


def _check_offloading_start(version: str, command: VllmCommand, where: str) -> None:
    """vLLM 0.15 does not start with --kv-offloading-size alone: VllmConfig.__post_init__ decides the hybrid
    KV-cache manager before it turns the offloading size into a KV connector (_post_init_kv_transfer_config),
    so the manager stays on, and creating the OffloadingConnector then raises "does not support HMA"
    (distributed/kv_transfer/kv_connector/factory.py; no 0.15 connector supports it). Read in the 0.15.1 wheel
    only: other versions are not checked."""
    engine = command.engine
    if not version.startswith("0.15") or "kv_offloading_size" not in engine:
        return
    if engine.get("disable_hybrid_kv_cache_manager") is not True:
        command.findings.append(
            CommandFinding(
                "error",
                f"{where}: vLLM {version} exits at start with --kv-offloading-size unless the hybrid KV-cache manager "
                'is disabled: its OffloadingConnector does not support it ("Connector OffloadingConnector does '
                'not support HMA but HMA is enabled")',
                "add --disable-hybrid-kv-cache-manager",
            )
        )


def _not_modelled(command: VllmCommand, written: str) -> None:
    """validate warns about each one (pod_checks.py not_modelled), naming the flag as written."""
    if written not in command.not_modelled:
        command.not_modelled.append(written)


VLLM_IMAGES = (["vllm", "vllm-openai"], ["vllm", "vllm-openai-rocm"], ["vllm", "vllm-openai-cpu"])  # vLLM's own


def upstream_vllm_image(image: str) -> bool:
    """vLLM's own images (vllm/vllm-openai and its -rocm and -cpu builds, from any registry), whose tags are vLLM
    versions; other images that run vLLM tag their own releases (opea/vllm-gaudi:1.22.0 is Gaudi software 1.22,
    lmcache/vllm-openai:v0.3.9 LMCache 0.3.9)."""
    name = image.split("@")[0]
    repository = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
    return repository.split("/")[-2:] in VLLM_IMAGES


def _check_image(image: str, version: str, command: VllmCommand, where: str) -> None:
    """A vLLM image tagged with another version than the one modelled: the flags were read with the wrong list. An
    unpinned one (`latest`, no tag) runs whatever release is newest when the pod starts."""
    repository, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
    if upstream_vllm_image(image) and tag in ("", "latest", "nightly") and "@sha256" not in image:
        command.findings.append(
            CommandFinding(
                "warning",
                f"{where}: the image {image} is not pinned to a release: the vLLM it runs changes as releases come "
                f"out; predicted as vLLM {version}",
                f"pin the image to a release (e.g. {repository or image}:v{version}) and set vllm_version to it",
            )
        )
    match = IMAGE_VERSION.search(image) if upstream_vllm_image(image) else None
    if match is None or match.group(1).split(".")[:2] == version.split(".")[:2]:
        return
    try:
        version_defaults(match.group(1))
        modelled = True
    except ValueError:  # older than every modelled version: advising it would give an error finding
        modelled = False
    fix = (
        f"set vllm_version: {match.group(1)} in the deployment file"
        if modelled
        else f"use a newer image: {match.group(1)} predates every modelled vLLM (version profiles "
        f"{', '.join(version_table())}; a version runs on the nearest profile at or below it)"
    )
    command.findings.append(
        CommandFinding(
            "warning",
            f"{where}: the image {image} runs vLLM {match.group(1)}, but the deployment file models {version}: "
            "flags, defaults and the prediction follow the modelled version",
            fix,
        )
    )


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
        _not_modelled(command, f"{written} {value}")
        return
    for key, item in value.items():
        name = "optimization_level" if key == "level" and level_is_compilation else key
        converted = _compilation_value(name, item) if name in (*COMPILATION_KEYS, "optimization_level") else None
        if converted is None:
            _not_modelled(command, f"{written}.{key} {item}")
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


def _check_environment(
    env: list[Any], parsed: ParsedCommand, command: VllmCommand, known: frozenset[str], version: str, where: str
) -> None:
    """VLLM_* variables: unknown to this version (vLLM warns and ignores them, or refuses to start with
    --fail-on-environ-validation: vllm/platforms/interface.py validate_environ), or known and not modelled."""
    hard_fail = parsed.value("fail_on_environ_validation") is True
    for entry in env:
        name = str(entry.get("name", "")) if isinstance(entry, dict) else ""
        if not name.startswith("VLLM_") or name in NO_EFFECT_ENV:
            continue
        if name == "VLLM_ALLOW_LONG_MAX_MODEL_LEN" and name in known:  # read from the built environment: above
            continue
        if name not in known:
            command.findings.append(
                CommandFinding(
                    "error" if hard_fail else "warning",
                    f"{where}: vLLM {version} does not read the environment variable {name}: "
                    + (
                        "with --fail-on-environ-validation it refuses to start"
                        if hard_fail
                        else "it logs 'Unknown vLLM environment variable detected' and ignores it"
                    ),
                    f"remove {name}, or set what it meant with this version's flag",
                )
            )
        else:
            why = ENV_NOTES.get(name, "its effect is not predicted")
            command.findings.append(
                CommandFinding(
                    "warning", f"{where}: environment variable {name} is read by vLLM {version} but not modelled: {why}"
                )
            )
