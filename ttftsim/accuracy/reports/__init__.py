"""Readers that turn a team's benchmark outputs into ground-truth cases for `ttftsim accuracy REPORT`: the
workload as the client sent it (lengths, rate or concurrency, send times where logged) and what it measured.

Formats (detect.py tells them apart by content): `vllm bench serve --save-result` JSON (vllm_bench.py),
GuideLLM's benchmark JSON (guidellm.py), inference-perf's report folder (inference_perf.py), aiperf's
summary and records and genai-perf's summary (aiperf.py),
a vLLM /metrics snapshot or two, and a Prometheus range query (prometheus.py). A report says what was sent
and measured, not on what: the deployment (model, hardware, engine) comes from a scenario file
(cases.py). Nothing here is fitted to the measurements."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ttftsim.accuracy.ground_truth import Case, read_ground_truth
from ttftsim.accuracy.reports.cases import load_deployment, to_case
from ttftsim.accuracy.reports.detect import read_report
from ttftsim.errors import InputError
from ttftsim.perf.memory import DoesNotFitError
from ttftsim.replica import build_replica


@contextmanager
def measured_cases(
    path: Path, deployment: Path | None = None, before: Path | None = None
) -> Iterator[tuple[list[Case], Path]]:
    """The file's cases and the folder their scenarios' relative paths start from, while the workload files
    written for them exist (a temporary folder, removed on exit)."""
    report = read_report(path, before)
    if report.format == "legacy":
        if deployment is not None:
            raise InputError(
                "--deployment", "", f"is for benchmark reports: a measured-run file ({path}) names its own deployment"
            )
        yield read_ground_truth(path), Path()
        return
    if deployment is None:
        raise InputError(
            str(path), "", f"a {report.format} report says what was sent and measured, not on what: give "
            "--deployment SCENARIO.yaml (model, hardware, engine; docs/accuracy.md)",
        )  # fmt: skip
    spec = load_deployment(deployment)
    with tempfile.TemporaryDirectory(prefix="ttftsim-report-") as folder:
        cases = [to_case(run, spec, Path(folder), i) for i, run in enumerate(report.runs)]
        _check_deployment(cases, spec.source, spec.base, names_model="model" in spec.spec)
        yield cases, spec.base


def _check_deployment(cases: list[Case], source: str, base: Path, names_model: bool) -> None:
    """What the deployment file sets wrong (an unknown hardware profile or model, a model that does not fit,
    an engine argument its version refuses) is one error naming that file, as `simulate` gives it, not a
    skipped run: the first run that can be simulated is built once on it. Where the model comes from the
    report (names_model False), a model that is unknown or does not fit stays that run's skip."""
    case = next((case for case in cases if case.skip_reason is None), None)
    if case is None:
        return
    try:
        build_replica(case.scenario, base, source)
    except DoesNotFitError as exc:
        if names_model:
            raise InputError(source, "model, hardware, engine", f"does not fit: {exc}") from None
    except InputError as exc:
        if names_model or exc.field != "model":
            raise
