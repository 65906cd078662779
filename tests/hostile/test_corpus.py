"""The hostile-input corpus (tests/hostile/cases.yaml, files in tests/hostile/cases/<id>/): each case run by
the CLI's entry point in this process (tests/hostile/corpus.py says why), asserting its exit code, no
traceback, one error line naming the file for exit 2, and its time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.hostile.corpus import CASES, load_index, prepare, problems, run

INDEX = load_index()


def test_the_corpus_is_large_and_each_case_has_a_reason_and_its_files() -> None:
    assert len(INDEX) >= 100
    assert len({case["id"] for case in INDEX}) == len(INDEX)
    for case in INDEX:
        assert case["why"].strip() and "\n" not in case["why"], case["id"]
        assert case["exit"] in (0, 1, 2), case["id"]
        assert (CASES / case["id"]).is_dir() or case.get("setup"), case["id"]
        assert case["exit"] != 2 or case.get("names"), case["id"]


@pytest.mark.parametrize("case", INDEX, ids=[case["id"] for case in INDEX])
def test_case(case: dict[str, Any], tmp_path: Path) -> None:
    folder = prepare(case, tmp_path)
    outcome = run(case, folder)
    assert not problems(case, outcome), (case["why"], problems(case, outcome))
