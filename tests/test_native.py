"""The mypyc-compiled engine modules: same numbers as plain Python, and never a stale build."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pandas as pd
import pytest

from ttftsim._native import (
    COMPILED,
    MANIFEST,
    PACKAGE,
    is_compiled,
    source_checksums,
    stale_modules,
    write_manifest,
)
from ttftsim.config.scenario import Scenario
from ttftsim.simulate import simulate

# Prefix caching, chunked prefill, priorities and a KV cache small enough to preempt: every engine path.
SCENARIO = {
    "model": "Llama-2-7b-hf",
    "hardware": "A100-SXM4-80GB",
    "engine": {"num_gpu_blocks_override": 300, "max_num_batched_tokens": 1024, "max_num_seqs": 64},
    "workload": {
        "type": "shared_prefix",
        "arrivals": {"type": "poisson", "rate": 12},
        "num_groups": 4,
        "num_prompts_per_group": 8,
        "system_prompt_len": 700,
        "question_len": 300,
        "output_len": 200,
        "duration_s": 20,
    },
    "seed": 5,
}

CHILD = """
import json, sys
from ttftsim._native import is_compiled
from ttftsim.config.scenario import Scenario
from ttftsim.simulate import simulate
assert not is_compiled(), "TTFTSIM_PURE_PYTHON=1 should load the engine from its sources"
simulate(Scenario.model_validate(json.loads(sys.argv[1]))).requests.to_pickle(sys.argv[2])
"""


def test_compiled_engine_gives_exactly_the_plain_python_numbers(tmp_path: Path) -> None:
    if not is_compiled():
        pytest.skip("ttftsim is installed as plain Python (TTFTSIM_PURE_PYTHON or no C compiler): nothing to compare")
    compiled = simulate(Scenario.model_validate(SCENARIO)).requests
    assert compiled["num_preemptions"].sum() > 0 and compiled["cached_tokens"].sum() > 0
    out = tmp_path / "plain.pkl"
    env = {**os.environ, "TTFTSIM_PURE_PYTHON": "1"}
    subprocess.run([sys.executable, "-c", CHILD, json.dumps(SCENARIO), str(out)], env=env, check=True)
    pd.testing.assert_frame_equal(compiled, pd.read_pickle(out), check_exact=True)


def test_a_source_edited_after_the_build_is_stale(tmp_path: Path) -> None:
    names = ("engine.engine", "engine.scheduler")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for name in names:
        (tmp_path / f"{name.replace('.', '/')}.py").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f"{name.replace('.', '/')}.py").write_text(f"# {name}\n")
    assert stale_modules(tmp_path, names) is None  # nothing compiled: plain Python, nothing to guard
    for name in names:
        (tmp_path / f"{name.replace('.', '/')}{suffix}").write_bytes(b"")
    assert stale_modules(tmp_path, names) == list(names)  # compiled, but no manifest says from what
    read_by_compiler = source_checksums(tmp_path, names)
    (tmp_path / "engine/engine.py").write_text("# engine.engine, edited while the build ran\n")
    write_manifest(tmp_path / MANIFEST, read_by_compiler)  # the build records what it compiled
    assert stale_modules(tmp_path, names) == ["engine.engine"]
    (tmp_path / "engine/engine.py").write_text("# engine.engine\n")
    assert stale_modules(tmp_path, names) == []
    os.utime(tmp_path / "engine/engine.py", (1.0, 1.0))  # times do not matter (installers rewrite them)
    assert stale_modules(tmp_path, names) == []
    (tmp_path / "engine/scheduler.py").write_text("# engine.scheduler, edited\n")
    assert stale_modules(tmp_path, names) == ["engine.scheduler"]
    (tmp_path / f"engine/engine{suffix}").unlink()  # a partial build counts as stale too
    assert stale_modules(tmp_path, names) == ["engine.engine", "engine.scheduler"]


def test_the_installed_build_is_current() -> None:
    """Whatever this checkout was installed as, the guard agrees with it: no stale compiled module runs."""
    stale = stale_modules(PACKAGE, COMPILED)
    assert is_compiled() == (stale == [] and not os.environ.get("TTFTSIM_PURE_PYTHON"))


def test_the_compiled_list_names_real_modules() -> None:
    package = Path(__file__).resolve().parents[1] / "ttftsim"
    for name in COMPILED:
        assert (package / f"{name.replace('.', '/')}.py").exists(), name


def test_coverage_omits_exactly_the_compiled_modules() -> None:
    """Coverage cannot trace compiled modules; pyproject.toml omits them and nothing else."""
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    omitted = pyproject["tool"]["coverage"]["run"]["omit"]
    assert omitted == [f"ttftsim/{name.replace('.', '/')}.py" for name in COMPILED]


def test_values_built_every_iteration_have_a_compiled_constructor() -> None:
    """A dataclass's generated __init__ runs as interpreted Python even in a compiled module (mypyc leaves the
    methods that @dataclass writes to the interpreter): 4.6 us for a BatchShape, a fifth of the engine's time
    when three such values were built per iteration. These stay plain classes with their own __init__."""
    if not is_compiled():
        pytest.skip("ttftsim is installed as plain Python (TTFTSIM_PURE_PYTHON or no C compiler): nothing compiled")
    from ttftsim.engine.decode_run import RunTimes
    from ttftsim.engine.step_plan import StepPlan
    from ttftsim.perf.batch import BatchShape

    for cls in (BatchShape, StepPlan, RunTimes):
        assert not isinstance(cls.__init__, types.FunctionType), f"{cls.__name__}.__init__ is interpreted"
