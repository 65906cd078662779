"""Checks on a vLLM container beyond what its flags set: --quantization against the checkpoint its model id names,
--kv-offloading-size at start in vLLM 0.15, and the vLLM version an upstream image's tag names against the
modelled one. Each adds findings (an error where vLLM exits at start); none changes an engine argument.

The checkpoint is judged by its id alone (its quantization suffix, the preset's repository), never downloaded; the
offloading start is read in the 0.15.1 wheel only; only vLLM's own images (vllm/vllm-openai, its -rocm and -cpu
builds) are read as vLLM versions, since other images that run vLLM tag their own releases.
"""

from __future__ import annotations

import re

from ttftsim.config.versions import version_defaults, version_table
from ttftsim.model.catalog import find_preset, preset_repository
from ttftsim.model.hf_ids import parse_model_id
from ttftsim.validate.vllm_args import ParsedCommand
from ttftsim.validate.vllm_invocation import CommandFinding, VllmCommand

IMAGE_VERSION = re.compile(r":v?(\d+\.\d+(?:\.\d+)?)(?:$|[^\d.])")

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


def check_quantization(parsed: ParsedCommand, command: VllmCommand, where: str) -> None:
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


def check_offloading_start(version: str, command: VllmCommand, where: str) -> None:
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


VLLM_IMAGES = (["vllm", "vllm-openai"], ["vllm", "vllm-openai-rocm"], ["vllm", "vllm-openai-cpu"])  # vLLM's own


def upstream_vllm_image(image: str) -> bool:
    """vLLM's own images (vllm/vllm-openai and its -rocm and -cpu builds, from any registry), whose tags are vLLM
    versions; other images that run vLLM tag their own releases (opea/vllm-gaudi:1.22.0 is Gaudi software 1.22,
    lmcache/vllm-openai:v0.3.9 LMCache 0.3.9)."""
    name = image.split("@")[0]
    repository = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
    return repository.split("/")[-2:] in VLLM_IMAGES


def check_image(image: str, version: str, command: VllmCommand, where: str) -> None:
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


def unread_image_version(image: str, version: str) -> str | None:
    """Why the vLLM version an image runs is not known here, when its name does not say it: an image other than
    vLLM's own tags its own releases (lmcache/vllm-openai, llm-d, Vertex's pytorch-vllm-serve), so the prediction
    follows the deployment file's version, which it did not set (None for vLLM's own images: check_image reads
    their tags)."""
    if not image or upstream_vllm_image(image):
        return None
    return (
        f"the image {image} is not vLLM's own (vllm/vllm-openai), so the vLLM it runs is not read from its tag; "
        f"flags, defaults and the prediction follow vLLM {version}, the default"
    )
