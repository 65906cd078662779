"""The dashboard end to end in headless Chromium (Playwright): it starts, each view renders its figures with
no console errors, running a scenario from the explorer updates the figures, a malformed result shows an
error in the page, an incomplete result is listed as such and cannot be picked. Screenshots go to
tests/web/screenshots/ (or $TTFTSIM_SCREENSHOTS). The boundary through Dash's HTTP endpoint (Flask's test
client, no browser): links out of the folder, paths in the explorer's form, malformed results are answered
in the page, never with an HTTP 500. And the self-contained HTML report."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli import run
from ttftsim.result_folder import MARKER, staged
from ttftsim.results import ResultError, discover, inside, load_simulation

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = Path(os.environ.get("TTFTSIM_SCREENSHOTS", Path(__file__).parent / "screenshots"))

SMALL = """name: small
model: Llama-3.1-8B
hardware: H100-SXM5-80GB
workload:
  type: synthetic
  arrivals: {type: poisson, rate: 6}
  prompt_tokens: {type: lognormal, mean: 800, std: 500, high: 4000}
  output_tokens: {type: lognormal, mean: 100, std: 60, high: 400}
  num_requests: 200
slo: {ttft_p99_s: 0.5}
"""
ACCURACY = {
    "stages": [
        {
            "case": "h100",
            "stage": f"{rate} req/s",
            "measured": {"ttft_p50": 0.03 * rate, "ttft_p90": 0.04 * rate, "ttft_p99": 0.06 * rate},
            "predicted": {"ttft_p50": 0.031 * rate, "ttft_p90": 0.041 * rate, "ttft_p99": 0.058 * rate},
        }
        for rate in (1, 2, 4)
    ],
    "summary": {"metrics": {"ttft_p50": {"median_ape": 0.03, "p90_ape": 0.03, "max_ape": 0.03, "stages": 3}}},
    "skipped": [],
}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("results")
    scenario = root / "small.yaml"
    scenario.write_text(SMALL)
    assert run("simulate", str(scenario), "--out", str(root / "sim-small")).returncode == 0
    slower = root / "slower.yaml"
    slower.write_text(SMALL.replace("hardware: H100-SXM5-80GB", "hardware: L40S-48GB"))
    run("simulate", str(slower), "--out", str(root / "sim-l40s"))  # may miss the SLO (exit 1): results written
    busier = root / "busier.yaml"
    busier.write_text(SMALL.replace("rate: 6}", "rate: 9}").replace("name: small", "name: busier"))
    assert run("simulate", str(busier), "--out", str(root / "sim-busier")).returncode == 0
    plan = run("plan", str(ROOT / "examples/plans/quickstart.yaml"), "--out", str(root / "plan-quickstart"))
    assert plan.returncode == 0, plan.stderr
    quickstart = json.loads((root / "plan-quickstart" / "plan.json").read_text())
    pruned = next(r for r in quickstart["ranked"] if r["status"] == "pruned" and "L40S" in r["label"])
    quickstart["best_per_gpu"]["L40S-48GB"] = pruned  # as a plan whose every L40S candidate was pruned
    quickstart["plan"] = "pruned"
    with staged(root / "plan-pruned", "plan") as folder:
        (folder / "plan.json").write_text(json.dumps(quickstart))
    (root / "accuracy-h100.json").write_text(json.dumps(ACCURACY))
    (root / "accuracy-broken.json").write_text('{"stages": [')
    with staged(root / "sim-broken", "simulation") as broken:  # complete, and malformed
        (broken / "summary.json").write_text('{"ttft_s": ')
    shutil.copytree(ROOT / "tests" / "data" / "fit", root / "fits")  # a real ttftsim fit (test_fit_view.py)
    (root / "fits" / "cut-calibration.json").write_text('{"format": "ttftsim-deployment-calibration", "vers')
    shutil.copytree(root / "sim-small", root / "sim-interrupted")
    (root / "sim-interrupted" / MARKER).unlink()  # as a write interrupted while its files moved leaves it
    return root


def test_paths_outside_the_results_folder_are_refused(results: Path, tmp_path: Path) -> None:
    with pytest.raises(ResultError, match="outside the results folder"):
        inside(results, "../../etc")
    with pytest.raises(ResultError, match="outside the results folder"):
        load_simulation(results, "/etc")
    (results / "escape").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(ResultError, match="outside"):
        inside(results, "escape")
    found = discover(results)
    assert {"sim-small", "sim-l40s", "sim-busier", "sim-broken"} <= set(found.simulations)
    assert [i.folder for i in found.incomplete] == ["sim-interrupted"]
    assert found.plans == ["plan-pruned", "plan-quickstart"] and "accuracy-h100.json" in found.accuracy


def test_report_is_one_self_contained_html_file(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = run("report", str(results), "-o", str(out))
    assert result.returncode == 0, result.stderr
    html = out.read_text()
    assert html.count("plotly.js v") >= 1 and '<script src="https://cdn' not in html  # embedded, no CDN
    assert html.count('class="plotly-graph-div"') == 4 * 3 + 2 + 1  # 3 simulations x 4, 2 plans, the accuracy
    assert "Not shown" in html and "accuracy-broken.json" in html and "sim-broken" in html
    assert "sim-interrupted: incomplete" in html
    small = html[html.index("<h2>Simulation: small</h2>") :]  # the figures simulate printed, above the charts
    text = small[: small.index("plotly-graph-div")]
    assert "<pre>small: Llama-3.1-8B on 1 x L40S-48GB (vLLM 0.15.1), " in text  # sim-l40s comes first
    assert "metric (ms)" in text and "TTFT" in text and "SLO TTFT P99 &lt;= " in text
    plan = html[html.index("<h2>Plan: quickstart</h2>") :]  # the answer, then the table, the figure, how to deploy
    assert plan.split("\n")[1].startswith("<p><b>1 x H100-SXM5-80GB TP1, least_outstanding ($3.00/h): ")
    for text in (
        "<h3>Best per GPU type</h3><ul><li>H100-SXM5-80GB: 1 x H100",
        "<li>L40S-48GB: 8 x L40S-48GB TP1",
        "<th>P99 TTFT (ms)</th>",
        "<th>mean TPOT (ms)</th>",
    ):
        assert text in plan
    assert "<h3>Out of the running</h3>" not in plan  # every GPU type has a candidate in the running
    greyed = "<h3>Out of the running</h3><ul style='color:#888'><li>L40S-48GB: L40S-48GB TP2, least_outstanding"
    assert greyed in html  # the plan whose L40S best was pruned
    assert "cannot beat $3.00/h (at best $7.20/h)" in plan  # a pruned candidate, with its bound
    readme, manifests = (
        plan.index("<h3>How to deploy it (README.md)</h3>"),
        plan.index("<h3>Manifests (manifests.yaml)"),
    )
    assert plan.index("plotly-graph-div") < readme < plan.index("## Apply, in this order") < manifests
    assert "kind: Deployment" in plan[manifests:]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server(results: Path) -> Iterator[str]:
    pytest.importorskip("dash", reason="the dashboard needs Dash (pip install 'ttftsim[web]')")
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "ttftsim", "dashboard", str(results), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            time.sleep(0.3)
    else:
        process.kill()
        pytest.fail(f"the dashboard did not start: {process.stdout.read() if process.stdout else ''}")
    yield url
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian package chromium)")
    playwright = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    with playwright.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield instance
        instance.close()


def _page(browser: Any, url: str) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    page.wait_for_selector("#explorer-run")
    return page, errors


def _traces(page: Any, graph: str, at_least: int = 1) -> int:
    """Traces drawn in a graph, once it has at least `at_least` (plotly renders after Dash updates)."""
    script = f"(document.querySelector('#{graph} .js-plotly-plot') || {{}}).data?.length || 0"
    if at_least:
        with contextlib.suppress(Exception):  # on timeout, report what is there: the assertion shows the count
            page.wait_for_function(f"{script} >= {at_least}", timeout=15_000)
    return int(page.evaluate(script))


def _axis_titles(page: Any, graph: str) -> list[str]:
    """The titles of a graph's axes as drawn (text of class xtitle, x2title, ...): x axes, then y axes."""
    page.wait_for_selector(f"#{graph} .xtitle")
    texts = f"[...document.querySelectorAll('#{graph} text')]"
    titles = [
        page.evaluate(
            f"{texts}.filter(e => /^{axis}[0-9]*title$/.test(e.getAttribute('class'))).map(e => e.textContent)"
        )
        for axis in "xy"
    ]
    return [str(t) for t in titles[0] + titles[1]]


def _trace_names(page: Any, graph: str) -> list[str]:
    return [str(n) for n in page.evaluate(f"document.querySelector('#{graph} .js-plotly-plot').data.map(t => t.name)")]


def _pick(page: Any, dropdown: str, option: str) -> None:
    page.click(f"#{dropdown}")
    page.get_by_role("option", name=option, exact=True).click()


def _shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_explorer_runs_a_scenario_and_shows_a_saved_one(server: str, browser: Any) -> None:
    page, errors = _page(browser, server)
    assert _traces(page, "explorer-dist", at_least=0) == 0
    page.fill("#explorer-requests", "300")
    page.click("#explorer-run")
    page.wait_for_function(
        "document.querySelector('#explorer-summary').innerText.includes('300 requests')", timeout=60_000
    )
    assert _traces(page, "explorer-dist", 2) >= 2 and _traces(page, "explorer-breakdown") == 1
    assert _traces(page, "explorer-series", 4) >= 4
    _shot(page, "explorer-run")
    summary = page.locator("#explorer-summary")  # wraps in its column: it ran off the page's edge at 1400 px
    assert summary.evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"
    assert summary.evaluate("e => e.scrollWidth <= e.clientWidth")
    assert _axis_titles(page, "explorer-tpot") == ["TPOT (ms per token)"] * 2 + ["requests", "fraction of requests"]
    _pick(page, "explorer-result", "sim-l40s")
    page.wait_for_function(
        "document.querySelector('#explorer-summary').innerText.includes('200 requests')", timeout=30_000
    )
    assert _traces(page, "explorer-dist", 2) >= 2 and _traces(page, "explorer-tpot", 2) >= 2
    assert "TPOT mean" in page.inner_text("#explorer-summary")
    page.wait_for_function("document.querySelector('#explorer-loaded').innerText.includes('sim-l40s')")
    assert page.inner_text("#explorer-loaded").startswith(
        "Form filled from sim-l40s (scenario small); traffic measured"
    )
    # the form holds the saved run's settings (SMALL on an L40S: TP 1, vLLM's defaults for its 48 GB as resolved)
    assert page.inner_text("#explorer-hardware") == "L40S-48GB"
    assert page.input_value("#explorer-requests") == "200" and page.input_value("#explorer-tp") == "1"
    assert page.input_value("#explorer-seqs") == "256" and page.input_value("#explorer-batch") == "2048"  # under 70 GiB
    assert page.input_value("#explorer-slo") == "500" and 5.0 < float(page.input_value("#explorer-rate")) < 7.0
    _shot(page, "explorer-saved")
    assert errors == []


def test_a_malformed_result_shows_an_error_in_the_page(server: str, browser: Any) -> None:
    page, errors = _page(browser, server)
    _pick(page, "explorer-result", "sim-broken")
    page.wait_for_function("document.querySelector('#explorer-error').innerText.includes('error')", timeout=30_000)
    assert "summary.json: not valid JSON" in page.inner_text("#explorer-error")  # the loader's one line
    page.fill("#explorer-tp", "3")  # does not divide the heads: said in the page, the app keeps working
    page.click("#explorer-run")
    page.wait_for_function(
        "document.querySelector('#explorer-error').innerText.includes('attention heads')", timeout=30_000
    )
    _shot(page, "explorer-errors")
    assert errors == []


def test_plan_view_shows_candidates_the_front_and_manifests(server: str, browser: Any) -> None:
    page, errors = _page(browser, server)
    page.click("text=Plan")
    _pick(page, "plan-result", "plan-quickstart")
    page.wait_for_function(
        "document.querySelector('#plan-manifests').innerText.includes('kind: Deployment')", timeout=30_000
    )
    assert _traces(page, "plan-scatter", 2) >= 2
    assert page.locator("#plan-table tr").count() > 5
    recommendation = page.inner_text("#plan-recommendation")  # the answer first, in words, with its reason
    assert recommendation.startswith("1 x H100-SXM5-80GB TP1, least_outstanding ($3.00/h): ")
    assert "is the limit, at " in recommendation and "P99 TTFT " in recommendation
    gpus = page.locator("#plan-gpus li").all_inner_texts()
    assert [g.split(":")[0] for g in gpus] == ["H100-SXM5-80GB", "A100-SXM4-80GB", "L40S-48GB"]
    headers = page.locator("#plan-table th").all_inner_texts()
    for header in ("cost ($/h)", "P99 TTFT (ms)", "mean TPOT (ms)", "limit (binding SLO)", "why out"):
        assert header in headers, headers
    pruned = page.locator("#plan-table tr", has_text="pruned").first  # out of the running: greyed
    assert pruned.locator("td").first.evaluate("e => getComputedStyle(e).color") == "rgb(138, 138, 138)"
    assert "cannot beat $3.00/h" in pruned.inner_text()
    assert _axis_titles(page, "plan-scatter") == [
        "cost ($/h)",
        "cost ($/h)",
        "P99 TTFT (ms)",
        "mean TPOT (ms per token)",
    ]
    assert "Pareto front (cost, P99 TTFT)" in _trace_names(page, "plan-scatter")
    assert "Apply, in this order" in page.inner_text("#plan-readme")
    _shot(page, "plan")
    _pick(page, "plan-result", "plan-pruned")
    page.wait_for_function("document.querySelector('#plan-gpus li.out') !== null", timeout=30_000)
    out = page.locator("#plan-gpus li.out")
    assert out.inner_text().startswith("L40S-48GB: L40S-48GB TP2, least_outstanding: pruned: cannot beat $3.00/h")
    assert out.evaluate("e => getComputedStyle(e).color") == "rgb(138, 138, 138)"
    assert (
        page.inner_text("#plan-manifests")
        == "(no manifests.yaml in this plan folder: a plan with no winner writes none)"
    )
    _shot(page, "plan-pruned")
    assert errors == []


def test_compare_and_accuracy_views(server: str, browser: Any) -> None:
    page, errors = _page(browser, server)
    page.click("text=Compare")
    _pick(page, "compare-a", "sim-small")
    _pick(page, "compare-b", "sim-l40s")
    page.wait_for_function("document.querySelectorAll('#compare-table tr').length > 3", timeout=30_000)
    assert _traces(page, "compare-cdf", 4) == 4  # TTFT and TPOT, A and B
    assert page.inner_text("#compare-warning") == ""  # the same requests on another GPU: a fair comparison
    _pick(page, "compare-b", "sim-busier")
    page.wait_for_function("document.querySelector('#compare-warning').innerText.includes('not fed the same')")
    warning = page.inner_text("#compare-warning")
    assert "A 200 requests at " in warning and "; B 200 requests at " in warning
    table = page.locator("#compare-table").inner_text()
    assert "TPOT P99 (ms)" in table and "TTFT P99.9 (ms)" in table  # as the CLI names it (was P999)
    _shot(page, "compare")
    page.click("text=Accuracy")
    _pick(page, "accuracy-result", "accuracy-h100.json")
    page.wait_for_function("document.querySelectorAll('#accuracy-table tr').length > 1", timeout=30_000)
    assert _traces(page, "accuracy-scatter", 4) == 4  # P50, P90, P99 and y = x
    table = page.locator("#accuracy-table").inner_text()
    assert "median APE" in table and "3.0%" in table and "median_ape" not in table  # as the CLI: was 0.03
    _shot(page, "accuracy")
    _pick(page, "accuracy-result", "accuracy-broken.json")
    page.wait_for_function("document.querySelector('#accuracy-error').innerText.includes('error')", timeout=30_000)
    assert errors == []


def test_fit_view_draws_a_calibration_per_run_and_says_what_is_wrong_with_a_bad_one(server: str, browser: Any) -> None:
    page, errors = _page(browser, server)
    page.click("text=Fit")
    page.wait_for_function("document.querySelectorAll('#fit-files option').length > 0", timeout=15_000)
    assert page.evaluate("[...document.querySelectorAll('#fit-files option')].map(o => o.value)") == [
        "fits/cpu-cluster.json"
    ]
    page.fill("#fit-file", "fits/cpu-cluster.json")
    page.press("#fit-file", "Enter")
    page.wait_for_function("document.querySelectorAll('#fit-table tr').length > 19", timeout=30_000)
    assert _traces(page, "fit-figure", 20) == 20  # 5 metrics x measured, in-sample, held out, without the fit
    assert page.inner_text("#fit-note").startswith("fitted on 4 runs on tests/data/reports/cpu-server.yaml")
    assert "api_server_cost_scale\t10.870\t9.390 .. 12.788\tyes" in page.inner_text("#fit-factors")
    first = page.locator("#fit-table tr").nth(1).all_inner_texts()[0]
    assert "39.9 [31.5, 80.0]" in first and "fold 1" in first
    assert page.inner_text("#fit-error") == ""
    _shot(page, "fit")
    page.fill("#fit-file", "fits/cut-calibration.json")
    page.press("#fit-file", "Enter")
    page.wait_for_function("document.querySelector('#fit-error').innerText.includes('error')", timeout=30_000)
    assert page.inner_text("#fit-error").startswith("error: fits/cut-calibration.json: not valid JSON")
    assert page.locator("#fit-table tr").count() <= 1  # the rows of the previous file are gone
    assert errors == []


def test_an_incomplete_result_is_listed_and_cannot_be_picked(server: str, browser: Any) -> None:
    page, errors = _page(browser, server)
    page.wait_for_function(
        "document.querySelector('#incomplete').innerText.includes('sim-interrupted')", timeout=30_000
    )
    assert "1 incomplete result, not shown" in page.inner_text("#incomplete")
    assert f"no {MARKER}" in page.inner_text("#incomplete")
    page.click("#explorer-result")
    option = page.get_by_role("option", name="sim-interrupted (incomplete)", exact=True)
    option.wait_for(timeout=15_000)
    _shot(page, "incomplete")
    option.click(force=True)  # disabled: nothing is loaded
    page.keyboard.press("Escape")
    assert page.inner_text("#explorer-summary") == "" and _traces(page, "explorer-dist", at_least=0) == 0
    assert errors == []


def _dash(root: Path) -> Any:
    pytest.importorskip("dash", reason="the dashboard needs Dash (pip install 'ttftsim[web]')")
    from ttftsim.cli.outputs import web_app as _web_app

    return _web_app().create_app(root).server.test_client()


def _update(
    client: Any, outputs: list[str], inputs: dict[str, Any], state: dict[str, Any] | None = None, changed: int = 0
) -> Any:
    """POST one callback to Dash's endpoint as the page does (inputs and state in the callback's order, the
    changed input by index); the response, whatever its status."""
    pairs = [output.rsplit(".", 1) for output in outputs]
    body = {
        "output": ".." + "...".join(outputs) + "..",
        "outputs": [{"id": i, "property": p} for i, p in pairs],
        "inputs": [{"id": k.rsplit(".", 1)[0], "property": k.rsplit(".", 1)[1], "value": v} for k, v in inputs.items()],
        "state": [
            {"id": k.rsplit(".", 1)[0], "property": k.rsplit(".", 1)[1], "value": v} for k, v in (state or {}).items()
        ],
        "changedPropIds": [list(inputs)[changed]],
    }
    return client.post("/_dash-update-component", json=body)


EXPLORER = ["explorer-dist.figure", "explorer-tpot.figure", "explorer-breakdown.figure", "explorer-series.figure"]
EXPLORER += ["explorer-summary.children", "explorer-error.children"]


def _explorer_form(model: str, hardware: str) -> dict[str, Any]:
    values = (model, hardware, 1, None, None, ["chunked"], 4, 200, 20, 50, 500)
    names = ("model", "hardware", "tp", "seqs", "batch", "flags", "rate", "prompt", "output", "requests", "slo")
    return {f"explorer-{name}.value": value for name, value in zip(names, values, strict=True)}


def _error_of(response: Any, view: str) -> str:
    assert response.status_code == 200, response.data[:500]
    return str(response.get_json()["response"][f"{view}-error"]["children"])


def test_the_explorer_runs_only_presets_or_files_inside_the_results_folder(tmp_path: Path) -> None:
    root, outside = tmp_path / "results", tmp_path / "elsewhere"
    root.mkdir()
    outside.mkdir()
    model = ROOT / "ttftsim" / "model" / "presets" / "Llama-3.1-8B.json"
    shutil.copy(model, outside / "config.json")
    client = _dash(root)
    run_inputs = {"explorer-run.n_clicks": 1, "explorer-result.value": None}
    for path in (str(outside / "config.json"), "../elsewhere/config.json", "/etc/passwd"):
        response = _update(client, EXPLORER, run_inputs, _explorer_form(path, "H100-SXM5-80GB"))
        assert "outside the results folder, refused" in _error_of(response, "explorer"), path
    response = _update(client, EXPLORER, run_inputs, _explorer_form("Llama-3.1-8B", "/etc/hostname"))
    assert "GPU /etc/hostname: outside the results folder" in _error_of(response, "explorer")
    (root / "models").mkdir()
    (root / "models" / "config.json").symlink_to(outside / "config.json")  # a link out: refused too
    response = _update(client, EXPLORER, run_inputs, _explorer_form("models/config.json", "H100-SXM5-80GB"))
    assert "outside the results folder" in _error_of(response, "explorer")
    shutil.copy(model, root / "models" / "mine.json")  # a config.json inside the folder runs
    response = _update(client, EXPLORER, run_inputs, _explorer_form("models/mine.json", "H100-SXM5-80GB"))
    assert _error_of(response, "explorer") == ""
    assert "50 requests" in response.get_json()["response"]["explorer-summary"]["children"]


def test_malformed_and_escaping_results_answer_in_the_page_never_500(
    results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "results"
    shutil.copytree(results / "sim-small", root / "sim-small")
    with staged(root / "sim-shape", "simulation") as folder:  # readable JSON of the wrong shape
        for name in ("requests.parquet", "timeseries.csv"):
            shutil.copy(root / "sim-small" / name, folder / name)
        (folder / "summary.json").write_text('{"ttft_s": 7, "requests": [], "ttft_breakdown_mean_s": {}}')
    with staged(root / "plan-shape", "plan") as folder:
        (folder / "plan.json").write_text('{"ranked": "all of them"}')
    (root / "accuracy-shape.json").write_text('{"stages": [{"measured": []}], "summary": {}}')
    shutil.copytree(root / "sim-small", tmp_path / "outside")
    (root / "sim-linked").symlink_to(tmp_path / "outside", target_is_directory=True)
    client = _dash(root)
    form = _explorer_form("Llama-3.1-8B", "H100-SXM5-80GB")
    pick = {"explorer-run.n_clicks": 0, "explorer-result.value": "sim-shape"}
    error = _error_of(_update(client, EXPLORER, pick, form, changed=1), "explorer")
    assert "sim-shape/summary.json: ttft_s: expected an object, got int" in error
    pick["explorer-result.value"] = "sim-linked"
    error = _error_of(_update(client, EXPLORER, pick, form, changed=1), "explorer")
    assert "outside the results folder, refused" in error
    plan = ["plan-scatter.figure", "plan-table.data", "plan-table.columns", "plan-manifests.children"]
    plan += ["plan-summary.children", "plan-error.children", "plan-recommendation.children", "plan-gpus.children"]
    plan += ["plan-readme.children"]
    response = _update(client, plan, {"plan-result.value": "plan-shape"})
    assert "ranked: expected a list of objects" in _error_of(response, "plan")
    accuracy = ["accuracy-scatter.figure", "accuracy-table.data", "accuracy-table.columns", "accuracy-error.children"]
    response = _update(client, accuracy, {"accuracy-result.value": "accuracy-shape.json"})
    assert "stages.0.case: expected text, got null" in _error_of(response, "accuracy")
    compare = ["compare-cdf.figure", "compare-table.data", "compare-table.columns", "compare-warning.children"]
    compare += ["compare-error.children"]
    response = _update(client, compare, {"compare-a.value": "sim-small", "compare-b.value": "sim-shape"})
    assert "sim-shape/summary.json" in _error_of(response, "compare")
    from ttftsim import figures

    def broken(*_: Any) -> Any:
        raise RuntimeError("a figure that fails")

    monkeypatch.setattr(figures, "ttft_distribution", broken)  # anything the checks let through
    pick["explorer-result.value"] = "sim-small"
    error = _error_of(_update(client, EXPLORER, pick, form, changed=1), "explorer")
    assert error == "error: sim-small could not be shown (RuntimeError: a figure that fails)"
