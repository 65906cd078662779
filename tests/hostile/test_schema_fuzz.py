"""Property tests of every input schema: documents generated from the JSON Schemas that `ttftsim schema --out`
writes (hypothesis-jsonschema), and valid examples mutated (a value of another type, out of bounds, not
finite, or deleted), each run through the command that reads it, in this process (tests/hostile/corpus.py).
Whatever the input: exit 0, 1 or 2, no traceback, exit 2 as one line naming the file, within the deadline.

Budget (CI runs it on 2 cores: under a minute on an idle machine): per schema, SCHEMA_EXAMPLES documents from
the schema (hypothesis-jsonschema re-canonicalises the schema on each draw, the slow part) and MUTATED_EXAMPLES
mutations, each under DEADLINE, no shrinking; the work limits are lowered (LIMITS) and the examples' traffic
shortened to 5 s, so that an input the program accepts simulates a few dozen requests.
A plan is checked as `ttftsim plan` checks it before searching (load_plan, check_plan): the search itself
is covered by tests/plan."""

from __future__ import annotations

import json
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from tests.hostile import jsonschema_compat
from tests.hostile.corpus import Outcome, problems, run
from ttftsim.docs import schemas
from ttftsim.errors import InputError

jsonschema_compat.install()
ROOT = Path(__file__).resolve().parents[2]
SCHEMA_EXAMPLES = 25
MUTATED_EXAMPLES = 60
DEADLINE = timedelta(seconds=10)
LIMITS = {
    "TTFTSIM_MAX_REQUESTS": "60",
    "TTFTSIM_MAX_TICKS": "5000",
    "TTFTSIM_MAX_PODS": "6",
    "TTFTSIM_MAX_PROMPTS": "200",
    "TTFTSIM_MAX_TURNS": "8",
    "TTFTSIM_MAX_TOKENS": "20000",
    "TTFTSIM_MAX_CANDIDATES": "4",
}
# Each input file: the valid example mutated, and the command that reads it (FILE: its path).
INPUTS: dict[str, tuple[str, list[str]]] = {
    "scenario": ("examples/llama31-8b-h100.yaml", ["simulate", "FILE", "--json"]),
    "deploy": ("examples/validate/deploy.yaml", ["validate", "FILE", "--json"]),
    "hardware": ("hwprofiles/h100-sxm5-80gb.yaml", ["memory", "--model", "Llama-3.1-8B", "--hardware", "FILE"]),
    "plan": ("examples/plans/quickstart.yaml", []),
}
FUZZ = settings(
    max_examples=MUTATED_EXAMPLES,
    deadline=DEADLINE,
    derandomize=True,  # the same examples on every run: CI is reproducible
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure is reported as found, in bounded time
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
ODD_VALUES = st.sampled_from(
    [None, "", "x" * 300, -1, 0, 10**18, 2**70, -(10**12), 1e308, float("nan"), float("inf"), [], {}, [1, 2], True]
)


def _check_plan(path: Path) -> Outcome:
    """What `ttftsim plan` refuses before its search: the schema, the loader, the limits, model and hardware."""
    from ttftsim.plan.run import check_plan, load_plan

    try:
        check_plan(load_plan(path), path)
    except InputError as exc:
        return Outcome(2, "", f"error: {exc.one_line()}\n", 0.0)
    return Outcome(0, "", "", 0.0)


def _run(name: str, document: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "k8s.yaml").write_text((ROOT / "examples/validate/k8s.yaml").read_text(encoding="utf-8"))
        path = folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
        command = [str(path) if word == "FILE" else word for word in INPUTS[name][1]]
        case = {"id": name, "run": command, "exit": 2, "names": path.name, "env": LIMITS}
        outcome = _check_plan(path) if name == "plan" else run(case, folder)
    assert outcome.code in (0, 1, 2), outcome
    expected = dict(case, exit=outcome.code)
    assert not problems(expected, outcome), (json.dumps(document)[:600], problems(expected, outcome))


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a document (mapping keys and list indices), the root excluded."""
    found: list[tuple[Any, ...]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    for key, child in items:
        found.append((*prefix, key))
        found += _paths(child, (*prefix, key))
    return found


def _mutate(document: Any, path: tuple[Any, ...], action: str, odd: Any) -> Any:
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    key, current = path[-1], parent[path[-1]]
    if action == "delete":
        del parent[key]
    elif action == "scale" and isinstance(current, int | float) and not isinstance(current, bool):
        parent[key] = current * odd if isinstance(odd, int | float) and not isinstance(odd, bool) else -current
    else:
        parent[key] = odd
    return document


@st.composite
def mutated(draw: st.DrawFn, name: str) -> Any:
    document = yaml.safe_load((ROOT / INPUTS[name][0]).read_text(encoding="utf-8"))
    for traffic in ("workload", "traffic"):
        if isinstance(document.get(traffic), dict) and "duration_s" in document[traffic]:
            document[traffic]["duration_s"] = 5  # what the program accepts simulates quickly
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(document)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "delete", "scale"]))
        document = _mutate(document, path, action, draw(ODD_VALUES))
    return document


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_documents_from_the_schema(name: str) -> None:
    @settings(FUZZ, max_examples=SCHEMA_EXAMPLES)
    @given(from_schema(schemas()[name]))
    def check(document: Any) -> None:
        _run(name, document)

    check()


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_mutated_examples(name: str) -> None:
    @FUZZ
    @given(mutated(name))
    def check(document: Any) -> None:
        _run(name, document)

    check()


def test_every_schema_is_fuzzed() -> None:
    assert set(INPUTS) == set(schemas())
