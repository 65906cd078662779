"""Crash-safe result folders (ttftsim/result_folder.py): a write interrupted over an older result leaves it
intact, or the folder without its marker (never a mixed folder that reads as complete); no staging folder is
left behind; a bad --out or report target is a one-line error with exit 2; Ctrl-C is one line and exit 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.test_cli import _assert_one_line_error, run
from ttftsim import result_folder
from ttftsim.errors import InputError
from ttftsim.metrics.export import write_results
from ttftsim.result_folder import MARKER, check_target, parse_marker, staged
from ttftsim.results import ResultError, discover, load_simulation

SCENARIO = Path(__file__).resolve().parents[1] / "examples" / "llama31-8b-h100.yaml"
PLAN = Path(__file__).resolve().parents[1] / "examples" / "plans" / "quickstart.yaml"
NAMES = ("requests.parquet", "requests.csv", "steps.parquet", "timeseries.csv", "summary.json", "metrics.prom")


def summary(p50: float = 0.1) -> dict[str, Any]:
    return {
        "ttft_s": {"p50": p50, "p90": 0.2, "p99": 0.3, "p999": 0.4},
        "requests": {"arrived": 3, "finished": 3},
        "ttft_breakdown_mean_s": {"queue_s": 0.01, "prefill_s": 0.05},
        "slo": {"ttft_p99_s": 0.5},
        "config": {"scenario": "tiny"},
    }


def write_simulation(out: Path, p50: float = 0.1, series: Any = None) -> list[Path]:
    """A tiny simulation result through the real writer (series: a stand-in frame, to fail mid-write)."""
    requests = pd.DataFrame({"ttft_s": [p50, 0.2, 0.3]})
    frame = pd.DataFrame({"window_start_s": [0.0, 1.0], "arrival_rate": [1.0, 2.0]}) if series is None else series
    steps = pd.DataFrame({"step": [0, 1]})
    return write_results(out, requests, steps, frame, summary(p50), "# prom\n")


class Interrupted:
    """A time series frame whose CSV export is interrupted (Ctrl-C while the third file is being written)."""

    def to_csv(self, path: Path, **_: Any) -> None:
        Path(path).write_text("window_start_s\n0.0\n")  # half written
        raise KeyboardInterrupt


def snapshot(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_a_new_result_appears_complete_in_one_rename(tmp_path: Path) -> None:
    written = write_simulation(tmp_path / "sim")
    assert written == [tmp_path / "sim" / name for name in NAMES]
    marker = parse_marker((tmp_path / "sim" / MARKER).read_text())
    assert marker.kind == "simulation" and set(marker.files) == set(NAMES)
    assert marker.files["summary.json"] == (tmp_path / "sim" / "summary.json").stat().st_size
    assert [p.name for p in tmp_path.iterdir()] == ["sim"]  # no staging folder left
    umask = os.umask(0o022)
    os.umask(umask)
    assert (tmp_path / "sim").stat().st_mode & 0o777 == 0o777 & ~umask  # as mkdir makes it (not mkdtemp's 0700)


def test_interrupted_write_over_an_old_result_leaves_it_intact(tmp_path: Path) -> None:
    out = tmp_path / "sim"
    write_simulation(out, p50=0.1)
    before = snapshot(out)
    with pytest.raises(KeyboardInterrupt):
        write_simulation(out, p50=0.9, series=Interrupted())
    assert snapshot(out) == before  # the old result, byte for byte, marker included
    assert [p.name for p in tmp_path.iterdir()] == ["sim"]  # the staging folder is gone
    assert discover(tmp_path).simulations == ["sim"]
    assert load_simulation(tmp_path, "sim").summary["ttft_s"]["p50"] == 0.1


def test_interrupted_while_the_files_move_leaves_a_folder_marked_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "sim"
    write_simulation(out, p50=0.1)
    real = os.replace
    moved: list[str] = []

    def replace_then_fail(source: Any, target: Any) -> None:
        if len(moved) == 2:
            raise KeyboardInterrupt
        moved.append(Path(target).name)
        real(source, target)

    monkeypatch.setattr(result_folder.os, "replace", replace_then_fail)
    with pytest.raises(KeyboardInterrupt):
        write_simulation(out, p50=0.9)
    monkeypatch.undo()
    assert not (out / MARKER).exists()  # two new files beside four old ones: and said so
    found = discover(tmp_path)
    assert found.simulations == [] and [i.folder for i in found.incomplete] == ["sim"]
    with pytest.raises(ResultError, match="incomplete"):
        load_simulation(tmp_path, "sim")
    write_simulation(out, p50=0.9)  # the next write makes it whole again
    assert discover(tmp_path).simulations == ["sim"]


def test_a_rewrite_keeps_other_files_and_drops_the_old_result_s_extra_files(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    with staged(out, "plan") as folder:
        (folder / "plan.json").write_text("{}")
        (folder / "manifests.yaml").write_text("kind: Deployment\n")
    (out / "checkpoint.sqlite").write_bytes(b"kept")
    with staged(out, "plan") as folder:  # now without a winner: no manifests
        (folder / "plan.json").write_text('{"winner": null}')
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.sqlite", MARKER, "plan.json"]
    assert parse_marker((out / MARKER).read_text()).files == {"plan.json": 16}


def test_a_marker_names_only_plain_files() -> None:
    for bad in ("../x", "/etc/passwd", "a/b", ".."):
        with pytest.raises(ValueError, match="plain file name"):
            parse_marker(json.dumps({"kind": "plan", "files": {bad: 1}}))
    with pytest.raises(ValueError, match="byte count"):
        parse_marker(json.dumps({"kind": "plan", "files": {"plan.json": "big"}}))


def test_a_target_that_cannot_be_a_folder_is_refused_before_any_work(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(InputError, match="exists and is not a folder"):
        check_target(afile, "simulation")
    with pytest.raises(InputError, match="afile is not a folder"):
        check_target(afile / "sub", "simulation")
    check_target(tmp_path / "new" / "deeper", "simulation")  # created when written


def test_a_complete_result_of_another_kind_is_refused_before_any_work(tmp_path: Path) -> None:
    """A simulation's --out over a plan's folder would remove plan.json and the manifests (its files replace the
    older result's): refused, exit 2, the plan left whole; the same kind is replaced as before."""
    folder = tmp_path / "plan-quick"
    with staged(folder, "plan") as stage:
        (stage / "plan.json").write_text("{}")
        (stage / "manifests.yaml").write_text("")
    (folder / "NOTES.txt").write_text("mine")
    result = run("simulate", str(SCENARIO), "--out", str(folder))
    _assert_one_line_error(result, str(folder), "holds a plan result; writing a simulation there would remove")
    assert sorted(p.name for p in folder.iterdir()) == ["NOTES.txt", MARKER, "manifests.yaml", "plan.json"]
    write_results(tmp_path / "sim", pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), summary(), "")
    with pytest.raises(InputError, match="holds a simulation result; writing a plan there"):
        check_target(tmp_path / "sim", "plan")
    check_target(folder, "plan")  # a plan over a plan: its files replaced, as before


def test_bad_out_and_report_targets_are_one_line_errors(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    _assert_one_line_error(run("simulate", str(SCENARIO), "--out", str(afile)), str(afile), "not a folder")
    _assert_one_line_error(run("plan", str(PLAN), "--out", str(afile)), str(afile), "not a folder")
    report = tmp_path / "missing" / "r.html"
    _assert_one_line_error(run("report", str(tmp_path), "-o", str(report)), str(report), "does not exist")
    _assert_one_line_error(run("report", str(tmp_path), "-o", str(tmp_path)), str(tmp_path), "is a folder")


@pytest.mark.parametrize(("stop", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_while_writing_is_one_line_and_exit_128_plus_the_signal(
    tmp_path: Path, stop: signal.Signals, code: int
) -> None:
    """Ctrl-C, or SIGTERM (a pod deleted, a CI job cancelled: a cold trial saw a plan die at once, exit 143 with no
    word), ends the run in order: one line, the old result intact or marked incomplete, exit 128 + the signal."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO.read_text())
    out = tmp_path / "sim"
    write_simulation(out, p50=0.1)
    before = snapshot(out)
    command = [sys.executable, "-m", "ttftsim", "simulate", str(scenario), "--out", str(out)]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while child.poll() is None and time.monotonic() < deadline:
        if any(p.name.startswith(f".sim{result_folder.STAGING}") for p in tmp_path.iterdir()):
            child.send_signal(stop)  # the run is over and its files are being written
            break
        time.sleep(0.002)
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == code, stderr
    assert len(stderr.strip().splitlines()) == 1 and stderr.startswith("interrupted:"), stderr
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    if (out / MARKER).exists():  # interrupted before the files moved: the old result, as it was
        assert snapshot(out) == before
    else:  # interrupted while they moved: said to be incomplete
        assert [i.folder for i in discover(tmp_path).incomplete] == ["sim"]
