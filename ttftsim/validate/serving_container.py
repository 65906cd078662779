"""Which container of a workload's pod is the vLLM server, for `ttftsim validate` (manifests.py): one whose
command runs `vllm serve` or the OpenAI API-server module, else one that leaves the command to a vLLM image's
entrypoint; its command and args as Kubernetes passes them (lists of strings, one argument an item: refused
otherwise, naming the item), and the port it listens on. The words a container runs (its shell script's included)
are container_command.py's; what its command line sets, vllm_command.py's."""

from __future__ import annotations

import re
from typing import Any

from ttftsim.errors import InputError
from ttftsim.inputs.files import excerpt
from ttftsim.validate.container_command import container_words, container_words_are_shell
from ttftsim.validate.container_env import ConfigData
from ttftsim.validate.vllm_args import API_SERVER_MODULE, CLI_MODULE, vllm_arguments
from ttftsim.validate.vllm_checks import upstream_vllm_image

GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")  # the device plugins' extended resource names


def vllm_containers(
    source: str, pod_spec: dict[str, Any], stores: ConfigData
) -> list[tuple[int, dict[str, Any], list[str]]]:
    """The pod's vLLM server container (index, container, the words it runs): one whose command runs vLLM, else
    one that leaves the command to a vLLM image's entrypoint (see _runs_vllm). Several in one pod are an error
    naming them."""
    found = []
    for index, container in enumerate(pod_spec.get("containers") or []):
        _check_lists(source, index, container)
        try:
            words = container_words(container, stores)
        except ValueError as exc:  # shlex: an unbalanced quote
            name = container.get("name", index) if isinstance(container, dict) else index
            message = f"cannot split the command and args of container {name!r} as its shell would ({exc})"
            raise InputError(source, f"containers.{index}.command", message) from None
        if _runs_vllm(container, words):
            _check_one_argument_each(source, index, container)
            found.append((index, container, words))
        elif not container_words_are_shell(container):
            _check_no_command_line_in_one_item(source, index, container)
    if len(found) > 1:
        names = ", ".join(f"{c.get('name', i)} ({c.get('image', '')})" for i, c, _ in found)
        raise InputError(
            source,
            f"containers.{found[1][0]}",
            f"{len(found)} containers of one pod run a vLLM server ({names}); validate checks one per deploy file",
        )
    return found


def listening_port(words: list[str]) -> int | None:
    """The port a `vllm serve` (or API-server module) command line listens on: its last --port, else vLLM's 8000;
    None for an image's entrypoint (its wrapper may choose) or a port that is not a number."""
    if not _explicit_vllm(words):
        return None
    port: str | None = "8000"
    arguments = (vllm_arguments(words) or ([], True))[0]
    for index, word in enumerate(arguments):
        if word == "--port":
            port = arguments[index + 1] if index + 1 < len(arguments) else None
        elif word.startswith("--port="):
            port = word.split("=", 1)[1]
    return int(port) if port is not None and port.isdigit() else None


def _check_lists(source: str, index: int, container: dict[str, Any]) -> None:
    """command and args as Kubernetes takes them: lists of strings (the API server refuses a string)."""
    for part in ("command", "args"):
        value = container.get(part)
        if value is not None and not isinstance(value, list):
            raise InputError(
                source,
                f"containers.{index}.{part}",
                f"must be a list of strings, one argument each, got {type(value).__name__} (Kubernetes does not split "
                "a string)",
            )


FLAG_INSIDE = re.compile(r"\s--?[A-Za-z]")


def _check_one_argument_each(source: str, index: int, container: dict[str, Any]) -> None:
    """An item of a vLLM container's command line holding several flags (`"M --max-model-len 8192 -tp 2"`) reaches
    vLLM as one argument (no shell splits it): refused, naming the item. A shell wrapper's script is one word."""
    if container_words_are_shell(container):
        return
    for part in ("command", "args"):
        for item_index, item in enumerate(container.get(part) or []):
            text = str(item).strip()
            if not text.startswith(("{", "[")) and FLAG_INSIDE.search(text):
                raise InputError(
                    source,
                    f"containers.{index}.{part}.{item_index}",
                    f"{excerpt(text)} holds several words: Kubernetes passes it to vLLM as one argument; write one "
                    "flag or value per item",
                )


def _check_no_command_line_in_one_item(source: str, index: int, container: dict[str, Any]) -> None:
    """A whole `vllm serve ...` line in one item of command or args (no shell to split it): Kubernetes runs a
    program of that whole name, which does not exist. Refused naming the item, as when the args hold it."""
    for part in ("command", "args"):
        for item_index, item in enumerate(container.get(part) or []):
            text = str(item).strip()
            if _explicit_vllm(text.split()) and len(text.split()) > 1:
                raise InputError(
                    source,
                    f"containers.{index}.{part}.{item_index}",
                    f"{excerpt(text)} holds several words: Kubernetes runs it as one program name (no shell splits "
                    "it); write one word per item, or run it with [sh, -c, ...]",
                )


def _runs_vllm(container: dict[str, Any], words: list[str]) -> bool:
    """The container runs a vLLM server: its command runs `vllm serve` or the OpenAI API-server module; or it sets no
    command, so that its image's entrypoint runs with its args, and the image is vLLM's own or a GPU container's
    whose name holds vllm (vendor builds: RHOAI's vllm-cuda-rhel9). A sidecar or a router whose image name holds
    "vllm" (lmcache/vllm_router, a metrics exporter) requests no GPU and is not one."""
    if _explicit_vllm(words):
        return True
    return not container.get("command") and _entrypoint_image(container)


def runs_vllm_server(container: Any) -> bool:
    """Whether a container (of any pod) runs a vLLM server, as _runs_vllm decides; a command that cannot be split
    runs none."""
    if not isinstance(container, dict):
        return False
    try:
        return _runs_vllm(container, container_words(container))
    except ValueError:  # shlex: an unbalanced quote
        return False


def _explicit_vllm(words: list[str]) -> bool:
    """`vllm serve`, `python -m vllm.entrypoints.cli.main serve` (the `vllm` script's module) or the API server."""
    commands = ("vllm", CLI_MODULE)
    return (
        any(word == "serve" and i > 0 and words[i - 1].rsplit("/", 1)[-1] in commands for i, word in enumerate(words))
        or API_SERVER_MODULE in words
    )


def _entrypoint_image(container: dict[str, Any]) -> bool:
    """No program of its own, and an image whose entrypoint is vLLM's server (see _runs_vllm)."""
    image = str(container.get("image") or "")
    if upstream_vllm_image(image):
        return True
    limits = ((container.get("resources") or {}).get("limits")) or {}
    requests = ((container.get("resources") or {}).get("requests")) or {}
    return "vllm" in image.lower() and any(name in limits or name in requests for name in GPU_RESOURCES)
