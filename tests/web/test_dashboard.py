"""The dashboard end to end in headless Chromium (Playwright): it starts, each view renders its figures with
no console errors, running a scenario from the explorer updates the figures, a malformed result shows an
error in the page. Screenshots go to tests/web/screenshots/ (or $TTFTSIM_SCREENSHOTS). And the
self-contained HTML report."""

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
    plan = run("plan", str(ROOT / "examples/plans/quickstart.yaml"), "--out", str(root / "plan-quickstart"))
    assert plan.returncode == 0, plan.stderr
    (root / "accuracy-h100.json").write_text(json.dumps(ACCURACY))
    (root / "accuracy-broken.json").write_text('{"stages": [')
    broken = root / "sim-broken"
    broken.mkdir()
    (broken / "summary.json").write_text('{"ttft_s": ')
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
    assert {"sim-small", "sim-l40s", "sim-broken"} <= set(found.simulations)
    assert found.plans == ["plan-quickstart"] and "accuracy-h100.json" in found.accuracy


def test_report_is_one_self_contained_html_file(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = run("report", str(results), "-o", str(out))
    assert result.returncode == 0, result.stderr
    html = out.read_text()
    assert html.count("plotly.js v") >= 1 and '<script src="https://cdn' not in html  # embedded, no CDN
    assert html.count('class="plotly-graph-div"') >= 3 * 2 + 1 + 1  # 2 simulations x 3, the plan, the accuracy
    assert "Not shown" in html and "accuracy-broken.json" in html and "sim-broken" in html


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
    _pick(page, "explorer-result", "sim-small")
    page.wait_for_function(
        "document.querySelector('#explorer-summary').innerText.includes('200 requests')", timeout=30_000
    )
    assert _traces(page, "explorer-dist", 2) >= 2
    _shot(page, "explorer-saved")
    assert errors == []


def test_a_malformed_result_shows_an_error_in_the_page(server: str, browser: Any) -> None:
    page, errors = _page(browser, server)
    _pick(page, "explorer-result", "sim-broken")
    page.wait_for_function("document.querySelector('#explorer-error').innerText.includes('error')", timeout=30_000)
    assert "not readable JSON" in page.inner_text("#explorer-error")
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
    _shot(page, "plan")
    assert errors == []


def test_compare_and_accuracy_views(server: str, browser: Any) -> None:
    page, errors = _page(browser, server)
    page.click("text=Compare")
    _pick(page, "compare-a", "sim-small")
    _pick(page, "compare-b", "sim-l40s")
    page.wait_for_function("document.querySelectorAll('#compare-table tr').length > 3", timeout=30_000)
    assert _traces(page, "compare-cdf", 2) == 2
    _shot(page, "compare")
    page.click("text=Accuracy")
    _pick(page, "accuracy-result", "accuracy-h100.json")
    page.wait_for_function("document.querySelectorAll('#accuracy-table tr').length > 1", timeout=30_000)
    assert _traces(page, "accuracy-scatter", 4) == 4  # P50, P90, P99 and y = x
    _shot(page, "accuracy")
    _pick(page, "accuracy-result", "accuracy-broken.json")
    page.wait_for_function("document.querySelector('#accuracy-error').innerText.includes('error')", timeout=30_000)
    assert errors == []
