"""What a vLLM container will run, for `ttftsim validate`: its command line read as that vLLM version parses it
(vllm_args.py), turned into ttftsim's engine arguments (vllm_flags.py), checked against the checkpoint, the start
and the image (vllm_checks.py), and its VLLM_* environment checked against the variables that version reads
(vllm/envs.py: vllm_env.py); beside --kv-transfer-config, LMCache's LMCACHE_* settings (lmcache_env.py).

Every flag and variable ends in one of four places: modelled (an engine argument), of no effect on what
ttftsim predicts (ports, names, logging: silent), read by vLLM but not modelled (a warning naming it), or
refused by vLLM (an error: the server exits at start). When ttftsim has no argument list for the exact
version, an unknown flag is a warning, since the nearest list cannot prove that version refuses it. A value that
is still an unexpanded variable is an input error for a modelled flag, a warning for any other; but a `$(NAME)`
the container's env does not define, outside a shell, reaches vLLM as written, and one vLLM refuses is an error.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from ttftsim.errors import InputError
from ttftsim.validate.lmcache_env import lmcache_environment
from ttftsim.validate.vllm_arg_list import ChosenList, arg_list_for
from ttftsim.validate.vllm_args import ParsedCommand, Refusal, parse_command, vllm_arguments
from ttftsim.validate.vllm_checks import check_image, check_offloading_start, check_quantization
from ttftsim.validate.vllm_env import check_environment
from ttftsim.validate.vllm_flags import MODELLED, interpret
from ttftsim.validate.vllm_invocation import CommandFinding, VllmCommand, note_not_modelled

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


def passed_as_written(text: str, undefined: frozenset[str]) -> str | None:
    """The name of the first `$(NAME)` in the text that is among `undefined` (references the container's env does not
    define, in a command line no shell runs: Kubernetes passes them as written); None when it holds none."""
    return next((m.group(1) for m in _UNEXPANDED.finditer(text) if m.group(1) in undefined), None)


def read_vllm_container(
    words: list[str],
    env: list[Any],
    version: str,
    where: str,
    source: str,
    image: str = "",
    values: dict[str, str] | None = None,
    undefined: frozenset[str] = frozenset(),
) -> VllmCommand:
    """The model, engine arguments, pipeline-parallel size and findings of a vLLM container's command line
    (`words`: command + args, shell already split) and `env` (the container's env list), for vLLM `version`.
    A flag vLLM does not know is an error finding; a value it cannot read is an InputError naming the flag
    (there is no value to predict with), or an error finding where it is a `$(NAME)` in `undefined` (vLLM gets
    it as written and refuses it)."""
    chosen = arg_list_for(version)
    split = vllm_arguments(words)
    arguments, positional = split if split is not None else ([], True)
    parsed = parse_command(arguments, chosen, positional)
    command = VllmCommand(parsed.model, {}, 1)
    if parsed.model and (name := passed_as_written(parsed.model, undefined)):
        raise InputError(
            source,
            "model",
            f"$({name}) is not defined in the container's env, so Kubernetes passes it to vLLM as written (no shell "
            f"runs here) and vLLM exits at start, finding no model of that name; define {name} in env, or write the "
            "model",
        )
    if parsed.model and (unknown := unknown_variable(parsed.model)):
        raise InputError(source, "model", unknown)
    _note_refusals(parsed, chosen, command, version, where, source, undefined)
    interpret(parsed, command, where, version)
    check_quantization(parsed, command, where)
    check_offloading_start(version, command, where)
    check_image(image, version, command, where)
    known = chosen.args.environment_variables
    check_environment(env, parsed, command, known, version, where)
    allow_long = (values if values is not None else {}).get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "")
    if "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in known and allow_long.strip().lower() in ("1", "true"):  # vllm/envs.py
        command.engine["allow_long_max_model_len"] = True
    if "kv_transfer_config" in command.engine:
        _lmcache_settings(env, command, where)
        if command.engine.get("enable_prefix_caching") is False:
            _without_lmcache(command, where)
    return command


def _note_refusals(
    parsed: ParsedCommand,
    chosen: ChosenList,
    command: VllmCommand,
    version: str,
    where: str,
    source: str,
    undefined: frozenset[str],
) -> None:
    """What vLLM `version` refuses in the command line: an unknown flag is a finding (an error where the argument
    list is that version's own, else a warning); a value it cannot read is an InputError, or a warning for a flag
    the prediction does not depend on whose value is still an unexpanded variable, or an error where that is a
    `$(NAME)` in `undefined` (vLLM gets it as written)."""
    note = f" ({chosen.note(version)})" if not chosen.is_exact else ""
    for refusal in parsed.refusals:
        name = passed_as_written(refusal.message, undefined) if refusal.kind == "value" else None
        if name is not None:
            command.findings.append(_refused_as_written(refusal, name, version, source))
            continue
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


def _refused_as_written(refusal: Refusal, name: str, version: str, source: str) -> CommandFinding:
    """A value vLLM refuses because it is a `$(NAME)` the container's env does not define, passed as written."""
    return CommandFinding(
        "error",
        f"{source}: {refusal.option}: $({name}) is not defined in the container's env, so Kubernetes passes it to "
        f"vLLM as written (no shell runs here) and vLLM {version} refuses it and exits at start: {refusal.message}",
        f"define {name} in the container's env, or write the value",
    )


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
        note_not_modelled(command, name)
    if config_file:
        command.findings.append(
            CommandFinding(
                "warning",
                f"{where}: LMCACHE_CONFIG_FILE {config_file}: LMCache reads its settings from this file in the "
                "container; ttftsim cannot see it and predicts with the LMCACHE_* variables and LMCache's defaults",
                "set the tiers with LMCACHE_* variables (LMCACHE_MAX_LOCAL_CPU_SIZE, LMCACHE_LOCAL_DISK, ...)",
            )
        )
