"""Find hardware profiles by name or path, or by what other tools call them: a Kubernetes node label's
value, an AIConfigurator system name.

Profiles live in the repository's `hwprofiles/` folder (a wheel carries a copy; or `$TTFTSIM_HWPROFILES`);
adding a GPU means adding a file there. Names match case-insensitively, and a unique prefix works (``H100-SXM5``);
a prefix that is a whole leading part of one name picks it among longer ones (``l4`` is L4-24GB, not L40S-48GB;
``h20`` is H20-96GB, not H200-SXM-141GB).
Label values and system names match exactly (case aside), and two profiles claiming the same one is an error.
"""

from __future__ import annotations

import difflib
import os
from functools import cache
from pathlib import Path

from ttftsim.config.hardware import HardwareProfile
from ttftsim.config.loading import load_file
from ttftsim.data_paths import data_folder
from ttftsim.errors import InputError


def profiles_dir() -> Path:
    override = os.environ.get("TTFTSIM_HWPROFILES")
    if override:
        return Path(override)
    return data_folder("hwprofiles")


def profile_paths() -> dict[str, Path]:
    """Profile file stem (lower case) to path."""
    folder = profiles_dir()
    if not folder.is_dir():
        raise InputError(str(folder), "", "hardware profile folder not found (set TTFTSIM_HWPROFILES)")
    return {path.stem.lower(): path for path in sorted(folder.glob("*.yaml"))}


@cache
def _load_path(path: Path) -> HardwareProfile:
    return load_file(HardwareProfile, path)


def all_profiles() -> list[HardwareProfile]:
    return [_load_path(path) for path in profile_paths().values()]


def load_hardware(ref: str, source: str = "hardware") -> HardwareProfile:
    """A profile by name (``H100-SXM5-80GB``, or a unique prefix such as ``h200``) or by YAML path."""
    if not ref.strip():
        raise InputError(source, "hardware", "no hardware named (empty)")
    path = Path(ref)
    if path.suffix in (".yaml", ".yml"):
        if not path.exists():  # the file that names it, and where the profile was looked for
            raise InputError(source, "hardware", f"no profile file {path.resolve()}")
        return _load_path(path.resolve())
    paths = profile_paths()
    key = ref.lower()
    if key in paths:
        return _load_path(paths[key])
    matches = [stem for stem in paths if stem.startswith(key)]
    if len(matches) > 1:  # a whole leading part wins over a longer name: l4 is L4-24GB, not L40S-48GB
        matches = [stem for stem in matches if stem.startswith(key + "-")] or matches
    if len(matches) == 1:
        return _load_path(paths[matches[0]])
    if matches:  # the profiles it could mean
        names = ", ".join(_load_path(paths[stem]).name for stem in matches)
        raise InputError(source, "hardware", f"ambiguous hardware {ref!r}: one of {names}")
    known = [_load_path(p).name for p in paths.values()]
    meant = _meant(ref, known)
    hint = f"did you mean {' or '.join(meant)}? " if meant else ""
    raise InputError(source, "hardware", f"unknown hardware {ref!r} ({hint}profiles: {', '.join(known)})")


def _meant(ref: str, names: list[str]) -> list[str]:
    """The profiles (at most three) whose name has a part starting with each part of ref (A100-40GB:
    A100-SXM4-40GB; h100_sxm: H100-SXM5-80GB), else the closest spelling, case and surrounding spaces aside."""
    parts = [part for part in ref.strip().lower().replace("_", "-").split("-") if part]
    holding = [
        name for name in names if all(any(own.startswith(part) for own in name.lower().split("-")) for part in parts)
    ]
    if parts and 0 < len(holding) <= 3:  # more than three is no guess
        return holding
    lowered = {name.lower(): name for name in names}
    return [lowered[m] for m in difflib.get_close_matches(ref.strip().lower(), list(lowered), n=1, cutoff=0.6)]


def node_label_keys() -> tuple[str, ...]:
    """The node label keys the profiles name a GPU by (nvidia.com/gpu.product, ...), in profile order."""
    return tuple(dict.fromkeys(key for profile in all_profiles() for key in profile.node_labels))


def hardware_for_label(value: str) -> str | None:
    """The profile whose node_labels list this value (under any key, case aside); None when none does."""
    return _claims(
        "node_labels", {p.name: [v for vs in p.node_labels.values() for v in vs] for p in all_profiles()}
    ).get(value.lower())


def hardware_for_system(system: str) -> str | None:
    """The profile of an AIConfigurator system name (h100_sxm, ...); None when no profile names it."""
    named = {p.name: [p.aiconfigurator_system] for p in all_profiles() if p.aiconfigurator_system}
    return _claims("aiconfigurator_system", named).get(system.strip().lower())


def _claims(field: str, names: dict[str, list[str]]) -> dict[str, str]:
    """Lower-cased name -> the profile that claims it; InputError when two profiles claim one."""
    owner: dict[str, str] = {}
    for profile, values in names.items():
        for value in values:
            other = owner.setdefault(value.lower(), profile)
            if other != profile:
                raise InputError(
                    str(profiles_dir()), field, f"{value!r} names two hardware profiles: {other} and {profile}"
                )
    return owner
