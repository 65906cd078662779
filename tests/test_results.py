"""Reading a results folder (ttftsim/results.py): only complete results are shown, incomplete ones are listed
with the reason, no file is read through a link that leaves the folder, hidden staging folders are skipped,
and a malformed result is a ResultError naming the file and the field."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.test_result_folder import summary, write_simulation
from ttftsim.result_folder import MARKER, staged
from ttftsim.results import ResultError, discover, load_accuracy, load_plan, load_simulation, write_report


def test_a_folder_without_its_marker_is_listed_incomplete_and_not_opened(tmp_path: Path) -> None:
    write_simulation(tmp_path / "done")
    write_simulation(tmp_path / "cut")
    (tmp_path / "cut" / MARKER).unlink()
    found = discover(tmp_path)
    assert found.simulations == ["done"]
    assert [(i.folder, i.kind) for i in found.incomplete] == [("cut", "simulation")]
    assert f"no {MARKER}" in found.incomplete[0].reason
    with pytest.raises(ResultError, match="cut: incomplete"):
        load_simulation(tmp_path, "cut")


def test_a_file_changed_after_the_marker_makes_the_folder_incomplete(tmp_path: Path) -> None:
    write_simulation(tmp_path / "sim")
    (tmp_path / "sim" / "timeseries.csv").write_text("window_start_s\n0\n")  # an older writer, in place
    found = discover(tmp_path)
    assert found.simulations == [] and "timeseries.csv changed" in found.incomplete[0].reason


def test_staging_folders_of_a_write_in_progress_are_skipped(tmp_path: Path) -> None:
    write_simulation(tmp_path / "sim")
    shutil.copytree(tmp_path / "sim", tmp_path / ".sim.partial-1234")  # marker and all: still not listed
    found = discover(tmp_path)
    assert found.simulations == ["sim"] and found.incomplete == []


def test_a_link_out_of_the_results_folder_is_not_followed(tmp_path: Path) -> None:
    root, outside = tmp_path / "results", tmp_path / "elsewhere"
    write_simulation(root / "sim")
    write_simulation(outside / "sim")
    secret = root / "sim" / "requests.parquet"
    secret.unlink()
    secret.symlink_to(outside / "sim" / "requests.parquet")  # same size as the one the marker records
    with pytest.raises(ResultError, match=r"sim/requests.parquet: outside the results folder"):
        load_simulation(root, "sim")
    found = discover(root)
    assert found.simulations == [] and "outside the results folder" in found.incomplete[0].reason
    (root / "linked").symlink_to(outside / "sim", target_is_directory=True)
    assert discover(root).simulations == []
    with pytest.raises(ResultError, match="outside"):
        load_simulation(root, "linked")
    with pytest.raises(ResultError, match="outside"):
        load_accuracy(root, "../elsewhere/sim/summary.json")


def _malformed(tmp_path: Path, change: dict[str, Any]) -> Path:
    write_simulation(tmp_path / "sim")
    with staged(tmp_path / "sim", "simulation") as folder:  # complete, by the marker, and malformed
        for name in ("requests.parquet", "timeseries.csv"):
            shutil.copy(tmp_path / "sim" / name, folder / name)
        (folder / "summary.json").write_text(json.dumps({**summary(), **change}))
    return tmp_path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ttft_s": [1, 2]}, "ttft_s: expected an object, got a list"),
        ({"ttft_s": {"p50": "fast", "p90": 1, "p99": 1, "p999": 1}}, "ttft_s.p50: expected a number, got text"),
        ({"ttft_s": {"p50": 0.1}}, "ttft_s.p90: missing"),
        ({"requests": {"arrived": None, "finished": 1}}, "requests.arrived: expected a number, got null"),
        (
            {"ttft_breakdown_mean_s": {"queue_s": True}},
            "ttft_breakdown_mean_s.queue_s: expected a number, got true/false",
        ),
        ({"slo": {"ttft_p99_s": "0.5"}}, "slo.ttft_p99_s: expected a number, got text"),
        ({"config": "x"}, "config: expected an object, got text"),
    ],
)
def test_a_malformed_summary_is_one_message_naming_the_field(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    root = _malformed(tmp_path, change)
    with pytest.raises(ResultError) as raised:
        load_simulation(root, "sim")
    assert str(raised.value) == f"sim/summary.json: {message}"


def test_malformed_plans_and_accuracy_reports_name_the_field(tmp_path: Path) -> None:
    with staged(tmp_path / "plan", "plan") as folder:
        (folder / "plan.json").write_text(json.dumps({"ranked": [{"label": "a", "status": 3}]}))
    with pytest.raises(ResultError, match=r"plan/plan.json: ranked.0.status: expected text, got int"):
        load_plan(tmp_path, "plan")
    with staged(tmp_path / "tpot", "plan") as folder:  # a field the plan page draws: a number or nothing
        (folder / "plan.json").write_text(json.dumps({"ranked": [{"label": "a", "status": "ok", "tpot_p99_s": "9"}]}))
    with pytest.raises(ResultError, match=r"tpot/plan.json: ranked.0.tpot_p99_s: expected a number, got text"):
        load_plan(tmp_path, "tpot")
    with staged(tmp_path / "best", "plan") as folder:
        (folder / "plan.json").write_text(json.dumps({"ranked": [], "best_per_gpu": {"L40S": {"label": "a"}}}))
    with pytest.raises(ResultError, match=r"best/plan.json: best_per_gpu.L40S.status: expected text, got null"):
        load_plan(tmp_path, "best")
    (tmp_path / "accuracy.json").write_text(json.dumps({"stages": [{"case": "h100", "stage": 1, "measured": 3}]}))
    with pytest.raises(ResultError, match=r"stages.0.measured: expected an object, got int"):
        load_accuracy(tmp_path, "accuracy.json")


def test_the_report_lists_incomplete_results_and_replaces_its_file_whole(tmp_path: Path) -> None:
    root = tmp_path / "results"
    write_simulation(root / "done")
    write_simulation(root / "cut")
    (root / "cut" / MARKER).unlink()
    out = tmp_path / "report.html"
    out.write_text("an older report")
    problems = write_report(root, out)
    assert problems == [
        f"cut: incomplete: no {MARKER} (interrupted while writing, or written before ttftsim marked results complete)"
    ]
    html = out.read_text()
    assert "Simulation: tiny" in html and "Not shown" in html and "cut: incomplete" in html
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "results"]  # no partial file left


def test_hostile_json_is_an_error_not_a_crash_or_a_hang(tmp_path: Path) -> None:
    (tmp_path / "accuracy-deep.json").write_text("[" * 100_000)  # the JSON decoder's recursion limit
    os.mkfifo(tmp_path / "accuracy-pipe.json")  # reading it would block: never opened
    write_simulation(tmp_path / "sim")
    (tmp_path / "sim" / MARKER).write_text("{" * 100_000)
    found = discover(tmp_path)
    assert found.accuracy == ["accuracy-deep.json"] and found.simulations == []
    assert f"{MARKER} unreadable" in found.incomplete[0].reason
    with pytest.raises(ResultError, match=r"accuracy-deep\.json: not valid JSON: nested too deeply"):
        load_accuracy(tmp_path, "accuracy-deep.json")
    with pytest.raises(ResultError, match=r"accuracy-pipe\.json: not found"):
        load_accuracy(tmp_path, "accuracy-pipe.json")


def test_a_report_of_an_empty_folder_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    from tests.test_cli import _assert_one_line_error, run

    (tmp_path / "empty").mkdir()
    out = tmp_path / "r.html"
    _assert_one_line_error(run("report", str(tmp_path / "empty"), "-o", str(out)), "no results in this folder")
    assert not out.exists()
