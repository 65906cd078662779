"""KServe's Hugging Face model server (`python -m huggingfaceserver`, kserve/kserve @ aaac4e2,
python/huggingfaceserver/huggingfaceserver/__main__.py and the parser of python/kserve/kserve/model_server.py it
extends) read as the vLLM server it starts (backend vllm, or auto for an architecture vLLM supports): its own flags
are taken out, --max_length is --max-model-len, --model_id (or the hf:// storageUri) the model, and the rest goes
to vLLM's parser.

A runtime that wraps the server in a shell script (`/bin/bash -c SCRIPT -- ARGS`: KServe's
docs/samples/fluid/kserve-huggingfaceserver.yaml warms the model's files up first, then runs
`python3 -m huggingfaceserver "$@"`) is read at the script's `-m huggingfaceserver` line, "$@" being the words
after the script (container_command.py). The rest of the script is not run here. A wrapper with no such line
that ttftsim can follow is an input error naming the runtime's file and field.
"""

from __future__ import annotations

from typing import Any

from ttftsim.errors import InputError
from ttftsim.inputs.files import excerpt
from ttftsim.validate.container_command import container_words, container_words_are_shell, shell_script
from ttftsim.validate.shell_words import runs_vllm_word
from ttftsim.validate.vllm_args import SHELL_SEPARATORS

KSERVE_PORT = 8080  # the predictor's HTTP port (KServe constants.InferenceServiceDefaultHttpPort)
MODEL_DIR = "/mnt/models"  # where KServe's storage initializer puts the model (constants.DefaultModelLocalMountPath)
MODULE = "huggingfaceserver"


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# huggingfaceserver's own flags, taken out before vLLM's parser sees the rest
HF_VALUE_FLAGS = _words(
    """model_dir model_id model_revision max_length tensor_input_names backend task http_port grpc_port workers
    max_threads max_asyncio_workers enable_grpc enable_docs_url enable_latency_logging configure_logging
    log_config_file access_log_format event-loop timeout-keep-alive model_name predictor_host protocol
    predictor_protocol predictor_use_ssl predictor_request_timeout_seconds grpc_max_send_message_length
    grpc_max_receive_message_length predictor_request_retries"""
)
HF_SWITCHES = _words(
    """disable_lower_case disable_special_tokens return_token_type_ids return_offsets_mapping return_probabilities
    return_raw_logits disable_log_requests enable_predictor_health_check"""
)


def is_huggingface_server(container: dict[str, Any]) -> bool:
    words = [str(w) for w in container.get("command") or []]
    return MODULE in str(container.get("image", "")) or MODULE in words


def server_arguments(container: dict[str, Any], runtime: str, path: str) -> list[str] | None:
    """The arguments huggingfaceserver receives: the container's args, or under a shell wrapper the words after
    `-m huggingfaceserver` on the script's line that runs it; None when the container does not run it (a wrapper
    whose script runs vLLM itself is read as any container's). `runtime` and `path` (its container's, in the
    runtime's file) name where an unreadable wrapper is."""
    if not container_words_are_shell(container):
        return [str(a) for a in container.get("args") or []] if is_huggingface_server(container) else None
    field = _script_field(container, path)
    try:
        words = container_words(container)
    except ValueError as exc:  # shlex: an unbalanced quote
        raise InputError(runtime, field, f"cannot split the shell script as its shell would ({exc})") from None
    starts = [i + 1 for i in range(1, len(words)) if words[i] == MODULE and words[i - 1] == "-m"]
    if starts:
        rest = words[starts[0] :]
        ends = [i for i, word in enumerate(rest) if word in SHELL_SEPARATORS]
        return rest[: ends[0]] if ends else rest
    if any(runs_vllm_word(word) for word in words) or not is_huggingface_server(container):
        return None
    script = shell_script([str(w) for part in ("command", "args") for w in container.get(part) or []])
    message = (
        f"a shell-script wrapper ({excerpt(script)}) is not read: no `python -m huggingfaceserver` line in it; "
        "run the server from command and args, or validate the Deployment KServe renders"
    )
    raise InputError(runtime, field, message)


def _script_field(container: dict[str, Any], path: str) -> str:
    """Where the wrapper's script is written in the runtime's container (`spec.containers.0.args.1`)."""
    command = [str(w) for w in container.get("command") or []]
    words = command + [str(w) for w in container.get("args") or []]
    script = shell_script(words)
    index = words.index(script) if script in words else len(words) - 1
    part, item = ("command", index) if index < len(command) else ("args", index - len(command))
    return f"{path}.{part}.{item}"


def backend(args: list[str]) -> str:
    """huggingfaceserver's --backend (auto picks vLLM for the architectures vLLM supports)."""
    for index, word in enumerate(args):
        if word.startswith("--backend="):
            return word.split("=", 1)[1]
        if word == "--backend" and index + 1 < len(args):
            return args[index + 1]
    return "auto"


def huggingface_args(args: list[str], hf_id: str | None) -> list[str]:
    """`vllm serve MODEL ...` from huggingfaceserver's arguments: its own flags out, --max_length as
    --max-model-len (its alias), the model from --model_id, else the hf:// storageUri, and --port its --http_port
    (KServe's model server serves the HTTP API, default 8080; vLLM runs inside it)."""
    model, out, index, port = hf_id, [], 0, str(KSERVE_PORT)
    while index < len(args):
        word = args[index]
        flag, _, inline = word.removeprefix("--").partition("=")
        takes = not inline and "=" not in word
        value = inline if not takes else (args[index + 1] if index + 1 < len(args) else "")
        if word.startswith("--") and flag in HF_VALUE_FLAGS:
            if flag == "model_id":
                model = value
            elif flag == "max_length":
                out += ["--max-model-len", value]
            elif flag == "http_port":
                port = value
            index += 2 if takes else 1
            continue
        if word.startswith("--") and flag in HF_SWITCHES:
            index += 1
            continue
        out.append(word)
        index += 1
    return [model or MODEL_DIR, *out, "--port", port]  # /mnt/models: the deployment file's `model` names it
