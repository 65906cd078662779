"""vLLM's own `vllm serve` argument list, per version, as data (ttftsim/validate/data/vllm_args_<x.y>.json,
written by benchmarks/vllm_args/extract.py from each version's parser: vllm/entrypoints/cli/serve.py
ServeSubcommand.subparser_init on vllm's FlexibleArgumentParser). Each flag keeps its option strings, the
destination vLLM stores it in, how many values it takes and of what kind; each list also names the VLLM_*
environment variables that version reads (vllm/envs.py environment_variables).

A modelled version with no list of its own is read with the nearest listed version below it (or the
oldest listed), and says so: a flag that list does not know is then not proof that vLLM refuses it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

DATA_PACKAGE = "ttftsim.validate.data"


@dataclass(frozen=True)
class VllmFlag:
    """One argparse action of `vllm serve`. `value` is none (a switch), int, float, json or str; `nargs` is
    argparse's (None: one value, "?": zero or one, "+": one or more, 0: none); a switch stores, per option
    string, the value in `switch_values` (--enable-x True; --no-enable-x, or --disable-x from 0.33, False)."""

    options: tuple[str, ...]
    dest: str
    nargs: int | str | None
    value: str
    choices: tuple[str, ...] | None
    switch_values: tuple[tuple[str, object], ...] = ()

    def stores(self, option: str) -> object:
        """What giving this switch option stores."""
        return dict(self.switch_values).get(option, True)

    def takes_value(self) -> bool:
        return self.nargs != 0


@dataclass(frozen=True)
class VllmArgList:
    """The argument list of one vLLM version. Invariant: every option string names exactly one flag."""

    version: str
    source: str
    allow_abbrev: bool
    flags: dict[str, VllmFlag]  # option string -> flag
    environment_variables: frozenset[str]

    def long_options(self) -> list[str]:
        return sorted(option for option in self.flags if option.startswith("--"))


@dataclass(frozen=True)
class ChosenList:
    """The list used for a version, and whether it is that version's own."""

    args: VllmArgList
    is_exact: bool

    def note(self, version: str) -> str:
        """Empty when the list is the version's own; else which version's list stood in."""
        if self.is_exact:
            return ""
        return f"ttftsim has no argument list for vLLM {version}; read with vLLM {self.args.version}'s"


def listed_versions() -> list[str]:
    """major.minor of every shipped list, oldest first."""
    names = [p.name for p in resources.files(DATA_PACKAGE).iterdir() if p.name.startswith("vllm_args_")]
    return sorted((n.removeprefix("vllm_args_").removesuffix(".json") for n in names), key=_minor)


def arg_list_for(version: str) -> ChosenList:
    """The list of this vLLM version (major.minor), or of the nearest listed version below it."""
    listed = listed_versions()
    wanted = _minor(version)
    below = [v for v in listed if _minor(v) <= wanted]
    chosen = below[-1] if below else listed[0]
    return ChosenList(_load(chosen), _minor(chosen) == wanted)


def _minor(version: str) -> tuple[int, int]:
    parts = version.strip().lstrip("v").split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return (0, 0)


@cache
def _load(minor: str) -> VllmArgList:
    text = (resources.files(DATA_PACKAGE) / f"vllm_args_{minor}.json").read_text(encoding="utf-8")
    data = json.loads(text)
    flags: dict[str, VllmFlag] = {}
    for entry in data["flags"]:
        choices = tuple(entry["choices"]) if entry["choices"] else None
        switches = tuple(sorted((entry.get("switch_values") or {}).items()))
        flag = VllmFlag(tuple(entry["options"]), entry["dest"], entry["nargs"], entry["value"], choices, switches)
        for option in flag.options:
            flags[option] = flag
    return VllmArgList(
        str(data["vllm_version"]),
        str(data["source"]),
        bool(data["allow_abbrev"]),
        flags,
        frozenset(data["environment_variables"]),
    )
