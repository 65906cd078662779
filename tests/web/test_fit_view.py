"""The dashboard's Fit view: ttftsim/accuracy_view.py on a real `ttftsim fit` output (tests/data/fit/, known
values), a calibration without its record, the files it must refuse on one line, the files it lists; and the
callback through Dash's HTTP endpoint (no browser; the browser test is in test_dashboard.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.web.test_dashboard import _dash, _update
from ttftsim.accuracy_view import (
    Estimate,
    FitView,
    RunMetric,
    error_of,
    error_rows,
    factor_rows,
    find_calibrations,
    load_fit_view,
    table_rows,
)
from ttftsim.results import ResultError

FIT = Path(__file__).resolve().parents[1] / "data" / "fit"
HAND_WRITTEN = {
    "format": "ttftsim-deployment-calibration",
    "version": 1,
    "hardware": "CPU-host",
    "factors": {"step_overhead_s": 0.002},
}
OUTPUTS = ["fit-figure.figure", "fit-factors.data", "fit-errors.data", "fit-table.data", "fit-note.children"]
OUTPUTS += ["fit-error.children"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    shutil.copytree(FIT, tmp_path / "fits")
    return tmp_path


def test_a_real_fit_per_run_and_metric_with_intervals(root: Path) -> None:
    view = load_fit_view(root, "fits/cpu-cluster.json")
    assert view.hardware == "CPU-host"
    assert view.note == (
        "fitted on 4 runs on tests/data/reports/cpu-server.yaml (CPU-host), 4 cross-validation folds; intervals 95%"
    )
    rows = table_rows(view)
    # four runs: the percentiles each report has, the median TPOT and the TTFT mean (the measured TPOT mean has
    # no open-loop prediction: left out); vllm bench's summary-only run reports no P90
    assert [(r["run"], r["metric"]) for r in rows][:6] == [
        ("poisson-2rps-detailed / 2 req/s", "TTFT P50"),
        ("poisson-2rps-detailed / 2 req/s", "TTFT P90"),
        ("poisson-2rps-detailed / 2 req/s", "TTFT P99"),
        ("poisson-2rps-detailed / 2 req/s", "TPOT P50"),
        ("poisson-2rps-detailed / 2 req/s", "TTFT mean"),
        ("concurrency-4-summary / c=4", "TTFT P50"),
    ]
    assert len(rows) == 5 + 4 + 5 + 5
    assert rows[0] == {
        "run": "poisson-2rps-detailed / 2 req/s",
        "metric": "TTFT P50",
        "measured": "39.9 [31.5, 80.0]",  # 30 requests: ranks 10..21 read outward from the reported percentiles
        "in_sample": "64.3 [57.7, 71.6]",
        "in_sample_error": "+61.0%",  # (64.3 - 39.9) / 39.9
        "held_out": "61.8 [55.8, 69.0]",
        "held_out_error": "+54.7%",
        "held_out_in": "fold 1",
        "unfitted": "17.2 [16.1, 20.4]",
        "unfitted_error": "-57.0%",
    }
    assert rows[4]["measured"] == "60.6"  # a reported mean: no interval of its own
    assert rows[3]["measured"] == "10.4" and rows[3]["in_sample"] == "7.6 [7.6, 7.7]"  # TPOT: predicted side only
    assert rows[5]["measured"] == "68.0 [?, 347.8]"  # 24 requests, min/median/P99 reported: unbounded below
    assert factor_rows(view) == [
        {"factor": "gemm_efficiency_scale", "value": "0.391", "range": "0.304 .. 0.474", "fitted": "yes"},
        {"factor": "attention_efficiency_scale", "value": "1.000", "range": "-", "fitted": "no (neutral)"},
        {"factor": "step_overhead_s", "value": "+0.00 ms", "range": "-", "fitted": "no (neutral)"},
        {"factor": "api_server_cost_scale", "value": "10.870", "range": "9.390 .. 12.788", "fitted": "yes"},
    ]
    assert error_rows(view)[0] == {
        "metric": "TTFT P50",
        "unfitted": "58.8%",
        "in_sample": "71.5%",
        "cross_validated": "77.0%",
    }


def test_a_calibration_without_its_record_shows_factors_and_says_why(root: Path) -> None:
    (root / "mine.json").write_text(json.dumps(HAND_WRITTEN))
    view = load_fit_view(root, "mine.json")
    assert view.runs == [] and view.errors == {}
    assert view.note.startswith("no per-run predictions: mine.runs.json is not beside it")
    assert factor_rows(view)[2] == {
        "factor": "step_overhead_s",
        "value": "+2.00 ms",
        "range": "-",
        "fitted": "no (neutral)",
    }


def _write(root: Path, name: str, text: str) -> str:
    (root / name).write_text(text)
    return name


@pytest.mark.parametrize(
    ("defect", "message"),
    [
        ("truncated", "cut.json: not valid JSON"),
        ("wrong type", "typed.json: factors.gemm_efficiency_scale: expected a number"),
        ("missing", "absent.json: not found (or not a file)"),
        ("outside", "../elsewhere.json: outside the results folder, refused"),
        ("record truncated", "fits/cpu-cluster.runs.json: not valid JSON"),
        ("record of another fit", "fits/cpu-cluster.runs.json: factors: not those of fits/cpu-cluster.json"),
        ("record field", "fits/cpu-cluster.runs.json: stages.0.fold: Input should be greater than or equal to 1"),
    ],
)
def test_a_file_that_cannot_be_shown_is_one_line_naming_file_and_field(root: Path, defect: str, message: str) -> None:
    good = json.dumps(HAND_WRITTEN)
    record = root / "fits" / "cpu-cluster.runs.json"
    relative = {
        "truncated": lambda: _write(root, "cut.json", good[:50]),
        "wrong type": lambda: _write(
            root, "typed.json", good.replace('"factors": {', '"factors": {"gemm_efficiency_scale": "fast", ')
        ),
        "missing": lambda: "absent.json",
        "outside": lambda: "../elsewhere.json",
        "record truncated": lambda: record.write_text(record.read_text()[:300]) and "fits/cpu-cluster.json",
        "record of another fit": lambda: (
            record.write_text(record.read_text().replace("10.870060836180153", "9.5")) and "fits/cpu-cluster.json"
        ),
        "record field": lambda: (
            record.write_text(record.read_text().replace('"fold": 1', '"fold": 0')) and "fits/cpu-cluster.json"
        ),
    }[defect]()
    with pytest.raises(ResultError) as caught:
        load_fit_view(root, relative)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_calibrations_are_found_by_their_format_inside_the_folder_only(
    root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    (root / "typed.json").write_text(json.dumps(HAND_WRITTEN | {"factors": {"gemm_efficiency_scale": "fast"}}))
    (root / ".staging").mkdir()
    (root / ".staging" / "hidden.json").write_text(json.dumps(HAND_WRITTEN))
    (root / "cut.json").write_text(json.dumps(HAND_WRITTEN)[:50])  # unreadable: typed in the view, not listed
    outside = tmp_path_factory.mktemp("elsewhere") / "theirs.json"
    outside.write_text(json.dumps(HAND_WRITTEN))
    (root / "linked.json").symlink_to(outside)
    assert find_calibrations(root) == ["fits/cpu-cluster.json", "typed.json"]  # the record is no calibration


def test_cells_say_overloaded_unbounded_and_missing() -> None:
    measured = Estimate(0.1, None, 0.3)
    row = RunMetric("run", "run", "ttft_p99", None, True, False, measured, Estimate(float("inf")), None, Estimate(0.05))
    view = FitView("c.json", "CPU-host", [], {}, [row], "")
    assert table_rows(view) == [
        {
            "run": "run",
            "metric": "TTFT P99 (overloaded: not fitted)",
            "measured": "100.0 [?, 300.0]",
            "in_sample": "overloaded",
            "in_sample_error": "-",
            "held_out": "-",
            "held_out_error": "-",
            "held_out_in": "-",
            "unfitted": "50.0",
            "unfitted_error": "-50.0%",
        }
    ]
    assert error_of(Estimate(0.12), Estimate(0.1)) == pytest.approx(0.2) and error_of(None, measured) is None


def test_a_client_bound_run_is_marked_as_not_fitted(root: Path) -> None:
    record = root / "fits" / "cpu-cluster.runs.json"
    data = json.loads(record.read_text())
    data["stages"][0]["measured_client_bound"] = True  # as fit_run writes a stage whose client read late
    record.write_text(json.dumps(data))
    rows = table_rows(load_fit_view(root, "fits/cpu-cluster.json"))
    marked = [r["metric"] for r in rows if r["metric"].endswith("(client-bound: not fitted)")]
    first = data["stages"][0]
    assert len(marked) == len([r for r in rows if r["run"].startswith(first["run"])]) > 0
    assert marked[0] == "TTFT P50 (client-bound: not fitted)"
    both = RunMetric("r", "r", "ttft_p50", None, True, True, Estimate(0.1), Estimate(0.1), None, Estimate(0.1))
    assert table_rows(FitView("c.json", "CPU-host", [], {}, [both], ""))[0]["metric"].endswith(
        "(overloaded: not fitted)"
    )


def test_the_callback_draws_a_fit_and_says_what_is_wrong_with_a_bad_file(root: Path) -> None:
    client = _dash(root)
    response = _update(client, OUTPUTS, {"fit-file.value": "fits/cpu-cluster.json"})
    assert response.status_code == 200
    answer = response.get_json()["response"]
    assert answer["fit-error"]["children"] == ""
    assert len(answer["fit-table"]["data"]) == 19 and answer["fit-table"]["data"][0]["held_out_in"] == "fold 1"
    traces = answer["fit-figure"]["figure"]["data"]
    assert len(traces) == 5 * 4  # TTFT P50, P90, P99, TPOT P50, TTFT mean x measured, in-sample, held out, unfitted
    assert [t["name"] for t in traces if t.get("showlegend")] == [
        "measured",
        "in-sample (fit on every run)",
        "held out (fold fit without the run)",
        "without the fit",
    ]
    first = traces[1]  # TTFT P50, in-sample: the run's 95% interval as asymmetric error bars (ms)
    assert first["y"][0] == pytest.approx(64.29, abs=0.01)
    assert first["error_y"]["array"][0] + first["y"][0] == pytest.approx(71.6, abs=0.05)
    (root / "cut.json").write_text(json.dumps(HAND_WRITTEN)[:50])
    for typed, message in (
        ("cut.json", "error: cut.json: not valid JSON"),
        ("/etc/passwd", "outside the results folder"),
    ):
        response = _update(client, OUTPUTS, {"fit-file.value": typed})
        assert response.status_code == 200
        error = response.get_json()["response"]["fit-error"]["children"]
        assert message in error and "\n" not in error and "Traceback" not in error


def test_a_fit_not_kept_shows_its_own_errors_beside_the_unfitted_ones(root: Path) -> None:
    """`ttftsim fit` printed the fit's in-sample and cross-validated errors; the view showed the neutral file's
    under those headings, equal to the unfitted ones. It shows the fit's, marked as not kept."""
    kept = json.loads((FIT / "cpu-cluster.json").read_text())
    unfitted = kept["errors"]["unfitted"]
    neutral = {key: value for key, value in kept.items() if key not in ("factors", "fitted", "intervals")}
    neutral["factors"] = {}
    neutral["errors"] = {"in_sample": unfitted, "cross_validated": unfitted, "unfitted": unfitted}
    neutral["not_applied"] = {
        "factors": kept["factors"],
        "fitted": kept["fitted"],
        "held_out_error": 0.5,
        "unfitted_error": 0.4,
        "standard_error": 0.1,
        "errors": kept["errors"],
    }
    (root / "neutral.json").write_text(json.dumps(neutral))
    rows = error_rows(load_fit_view(root, "neutral.json"))
    assert rows[0] == {
        "metric": "TTFT P50",
        "unfitted": f"{unfitted['ttft_p50']:.1%}",
        "in_sample": f"{kept['errors']['in_sample']['ttft_p50']:.1%} (fit not kept)",
        "cross_validated": f"{kept['errors']['cross_validated']['ttft_p50']:.1%} (fit not kept)",
    }
