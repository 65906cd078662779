"""`ttftsim plan` as a user meets it: the quickstart's recommendation holds on its own, results do not
depend on workers (the same JSON), kill -9 then --resume recomputes nothing finished (the task counts are
in run.json, not in the result), bad plans are one-line errors."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from tests.test_cli import _assert_one_line_error, run
from ttftsim.plan import evaluate
from ttftsim.plan.evaluate import Candidate
from ttftsim.plan.run import load_plan
from ttftsim.plan.store import Store

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "plans" / "quickstart.yaml"


def _plan(out: Path, *extra: str, path: Path = QUICKSTART) -> tuple[int, dict[str, object]]:
    result = run("plan", str(path), "--out", str(out), "--json", *extra)
    assert result.returncode in (0, 1) and result.stdout.startswith("{"), result.stderr
    return result.returncode, json.loads(result.stdout)


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    out = tmp_path_factory.mktemp("quickstart")
    code, result = _plan(out, "--workers", "2")
    assert code == 0
    return out, result


def test_quickstart_recommendation_meets_the_slo_when_simulated_on_its_own(
    quickstart: tuple[Path, dict[str, object]],
) -> None:
    out, result = quickstart
    winner = result["winner"]
    assert isinstance(winner, dict) and winner["status"] == "confirmed"
    plan = load_plan(QUICKSTART)
    cand = Candidate(**winner["candidate"])
    from ttftsim.simulate import simulate

    # a fresh cluster simulation of the recommended deployment, with a seed the plan never used
    other_seed = plan.model_copy(update={"seed": plan.seed + 100})
    scenario = evaluate.cluster_scenario(other_seed, cand, int(winner["replicas"]))
    figures = evaluate.slo_figures(simulate(scenario, QUICKSTART.parent).requests)
    assert figures.meets(plan.slo)
    manifests = (out / "manifests.yaml").read_text()
    assert "nvidia.com/gpu" in manifests and "HorizontalPodAutoscaler" in manifests
    assert (out / "vllm-args.txt").read_text().startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct")
    # the manifests it writes pass `ttftsim validate` under the plan's traffic, without warnings on them
    traffic = QUICKSTART.read_text().split("workload:\n", 1)[1].split("slo:", 1)[0] + "  num_requests: 1000\n"
    deploy = out / "deploy.yaml"
    deploy.write_text(f"name: quickstart\nmanifests: [manifests.yaml]\ntraffic:\n{traffic}slo: {{ttft_p99_s: 0.5}}\n")
    checked = run("validate", str(deploy), "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    findings = json.loads(checked.stdout)["findings"]
    assert not [f for f in findings if f["severity"] != "info" and f["check"] != "kv-capacity"], findings


def test_same_result_with_one_worker(quickstart: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    _, parallel = quickstart
    code, serial = _plan(tmp_path, "--workers", "1")
    assert code == 0
    assert serial == parallel


def test_kill_9_then_resume_gives_the_same_result_without_recomputing(
    quickstart: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    _, fresh = quickstart
    out = tmp_path / "run"
    command = [sys.executable, "-m", "ttftsim", "plan", str(QUICKSTART), "--out", str(out), "--workers", "1", "--json"]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db, stored = out / "checkpoint.sqlite", 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.2)
        if db.exists():
            try:
                stored = sqlite3.connect(db).execute("SELECT COUNT(*) FROM results").fetchone()[0]
            except sqlite3.Error:
                continue
            if stored >= 8:
                break
    assert child.poll() is None, "the plan finished before it could be killed"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    stored = sqlite3.connect(db).execute("SELECT COUNT(*) FROM results").fetchone()[0]
    assert stored >= 8
    code, resumed = _plan(out, "--workers", "1", "--resume")
    assert code == 0
    assert resumed == fresh
    tasks = json.loads((out / "run.json").read_text())["tasks"]
    assert tasks["from_checkpoint"] == stored  # every finished task reused
    fresh_tasks = json.loads((quickstart[0] / "run.json").read_text())["tasks"]
    assert tasks["computed"] + tasks["from_checkpoint"] == fresh_tasks["computed"]


def test_resume_refuses_a_checkpoint_of_another_plan(
    quickstart: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    out, _ = quickstart
    other = tmp_path / "other.yaml"
    other.write_text(QUICKSTART.read_text().replace("seed: 1", "seed: 2"))
    _assert_one_line_error(run("plan", str(other), "--out", str(out), "--resume"), "different plan")


@pytest.mark.parametrize(
    ("kind", "value", "said"),
    [
        ("bound", '{"feasible": true}', "saturated_rate: Field required"),
        ("bound", '{"feasible": true, "saturated_rate": "abc", "kv_blocks": 1, "weight_bytes": 1}', "saturated_rate"),
        ("bound", '{"feasible": true, "saturated_rate": -5.0, "kv_blocks": 1, "weight_bytes": 1}', "not a positive"),
        ("capacity", '{"feasible": true, "max_rate": NaN, "probes": [], "binding": "", "nearest": ""}', "max_rate"),
        ("predict", '{"ttft_p99_s": 1}', "not the figures a predict task returns"),
    ],
)
def test_resume_refuses_a_stored_result_of_the_wrong_shape(
    quickstart: tuple[Path, dict[str, object]], tmp_path: Path, kind: str, value: str, said: str
) -> None:
    """A result edited, damaged or written in another shape is one line naming the checkpoint and the task."""
    out, _ = quickstart
    copy = tmp_path / "out"
    copy.mkdir()
    (copy / "checkpoint.sqlite").write_bytes((out / "checkpoint.sqlite").read_bytes())
    with sqlite3.connect(copy / "checkpoint.sqlite") as db:
        (key,) = db.execute("SELECT key FROM results WHERE key LIKE ? ORDER BY key LIMIT 1", (f"{kind}|%",)).fetchone()
        db.execute("UPDATE results SET value = ? WHERE key = ?", (value, key))
    result = run("plan", str(QUICKSTART), "--out", str(copy), "--resume")
    _assert_one_line_error(result, "drop --resume")
    assert f"checkpoint.sqlite: {kind}|" in result.stderr and said in result.stderr, result.stderr


def test_no_feasible_candidate_exits_1_and_says_what_came_closest(tmp_path: Path) -> None:
    plan = tmp_path / "hard.yaml"
    plan.write_text(
        QUICKSTART.read_text()
        .replace("ttft_p99_s: 0.5", "ttft_p99_s: 0.005")
        .replace("[H100-SXM5-80GB, A100-SXM4-80GB, L40S-48GB]", "[L40S-48GB]")
    )
    result = run("plan", str(plan), "--out", str(tmp_path / "out"))
    assert result.returncode == 1, result.stderr
    assert "no candidate meets the SLOs" in result.stdout and "Closest: L40S-48GB" in result.stdout
    assert "misses the SLO even at low load" in result.stdout


BAD_PLANS = [
    (("model: Llama-3.1-8B", "model: GPT-9"), "model"),
    (("ttft_p99_s: 0.5", "ttft_p99_s: -1"), "slo.ttft_p99_s"),
    (("slo:", "slo:\n  ttft_p98_s: 1"), "slo.ttft_p98_s"),
    (("hardware: [H100-SXM5-80GB, A100-SXM4-80GB, L40S-48GB]", "hardware: []"), "search.hardware"),
    (("tensor_parallel_size: [1, 2]", "tensor_parallel_size: [0]"), "search"),
    (("tensor_parallel_size: [1, 2]", "tensor_parallel_size: two"), "search.tensor_parallel_size"),
    (("max_num_seqs: [null, 64]", "max_num_seqs: [-4]"), "search.max_num_seqs.0"),
    (("type: poisson, rate: 20", "type: poisson, rate: 0"), "workload.arrivals.rate"),
    (("type: poisson, rate: 20", "type: closed_loop, clients: 4"), "workload"),
    (("probe_requests: 600", "probe_requests: 5"), "probe_requests"),
    (("confirm_top: 2", "confirm_top: 0"), "confirm_top"),
    (("seed: 1", "seed: 1\nheadroom: 1.5"), "headroom"),
    (("seed: 1", "seed: 1\nbudget: 100"), "budget"),
    (('vllm_version: "0.15.1"', 'vllm_version: "0.1.0"'), "engine.vllm_version"),
    (("max_model_len: 8192", "max_model_len: 999999"), "engine.max_model_len: max_model_len 999999 exceeds"),
    (("ttft_p99_s: 0.5", "ttft_p99_s: 0.5\n  per_priority: {3: {ttft_p99_s: 1}}"), "slo.per_priority.3"),
    # the search's own value (its default [None]: vLLM's) would silently replace these
    (
        ("max_model_len: 8192", "max_model_len: 8192\n  max_num_seqs: 32"),
        "engine.max_num_seqs: a plan's search sets it",
    ),
    (("max_model_len: 8192", "max_model_len: 8192\n  enable_prefix_caching: false"), "engine.enable_prefix_caching"),
    (("ttft_p99_s: 0.5", "ttft_p99_s: 0.5\n  ttft_s: 0.3"), "judges them only with goodput_share"),
    (("ttft_p99_s: 0.5", "goodput_share: 0.99"), "needs a per-request target"),
    (("seed: 1", "seed: 1\navailability: {zones: 100}"), "availability.zones"),
    (("seed: 1", "seed: 1\navailability: {min_replicas: 80}"), "at least 80 replicas (min_replicas, zones)"),
    (("seed: 1", "seed: 1\navailability: {redundancy: n_plus_2}"), "availability.redundancy"),
]


@pytest.mark.parametrize(("edit", "field"), BAD_PLANS)
def test_bad_plan_is_one_line_naming_file_and_field(tmp_path: Path, edit: tuple[str, str], field: str) -> None:
    plan = tmp_path / "bad.yaml"
    text = QUICKSTART.read_text()
    assert edit[0] in text
    plan.write_text(text.replace(*edit, 1))
    _assert_one_line_error(run("plan", str(plan), "--out", str(tmp_path / "out")), str(plan), field)


def test_unknown_hardware_and_backend_are_input_errors(tmp_path: Path) -> None:
    plan = tmp_path / "bad.yaml"
    plan.write_text(QUICKSTART.read_text().replace("L40S-48GB]", "TPU-v9]"))
    _assert_one_line_error(run("plan", str(plan), "--out", str(tmp_path / "o")), str(plan), "search.hardware")
    _assert_one_line_error(run("plan", str(QUICKSTART), "--backend", "slurm"), "--backend")
    _assert_one_line_error(run("plan", str(tmp_path / "missing.yaml")), "file not found")


def test_ray_backend_gives_the_same_result(quickstart: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="the Ray backend needs ray (pip install 'ttftsim[dist]')")
    _, local = quickstart
    args = ("plan", str(QUICKSTART), "--out", str(tmp_path), "--json", "--backend", "ray", "--workers", "2")
    first = run(*args)
    if first.returncode == 2:  # Ray itself failed (a loaded machine): our line last (Ray's own logs may precede it)
        assert "Traceback" not in first.stderr
        last = first.stderr.strip().splitlines()[-1]
        assert last.startswith("error: --backend ray: Ray ") and "(finished tasks are kept)" in last, first.stderr
        first = run(*args, "--resume")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == local


def test_a_trace_is_planned_at_its_own_rate_keeping_its_shape(shared: Path, tmp_path: Path) -> None:
    trace = shared / "data/traces/azure2023/AzureLLMInferenceTrace_code.csv"
    plan = tmp_path / "trace.yaml"
    plan.write_text(
        "name: azure-code\nmodel: Llama-3.1-8B\nengine: {max_model_len: 8192}\n"
        f"workload: {{type: trace, format: azure, path: {trace}, num_requests: 2000}}\n"
        "slo: {ttft_p99_s: 1.0}\nsearch: {hardware: [H100-SXM5-80GB, L40S-48GB]}\n"
        "probe_requests: 400\nconfirm_s: 60\n"
    )
    code, result = _plan(tmp_path / "out", path=plan)
    assert code == 0
    from ttftsim.config.workload import TraceWorkload

    spec = load_plan(plan).workload
    assert isinstance(spec, TraceWorkload)
    assert result["target_rate"] == pytest.approx(evaluate.trace_rate(spec.model_dump_json(), str(tmp_path)))
    ranked = {row["label"]: row for row in result["ranked"]}  # type: ignore[union-attr]
    assert ranked["L40S-48GB TP1, least_outstanding"]["status"] == "infeasible"  # 7k-token prompts on an L40S
    assert result["winner"]["candidate"]["hardware"] == "H100-SXM5-80GB"  # type: ignore[index]


CONVERSATIONS = """name: chat-sessions
model: Llama-3.1-8B
engine: {max_model_len: 16384}
workload:
  type: conversation
  arrivals: {type: poisson, rate: 2}
  turns: {type: uniform, low: 2, high: 5}
  system_prompt_tokens: 500
  user_tokens: {type: lognormal, mean: 200, std: 100, high: 1000}
  output_tokens: {type: lognormal, mean: 200, std: 100, high: 800}
  think_time_s: 5
  num_requests: 200
slo: {ttft_p99_s: 0.5}
search:
  hardware: [H100-SXM5-80GB, L40S-48GB]
  router: [least_outstanding, session_affinity]
probe_requests: 150
confirm_s: 60
"""


def test_conversation_traffic_is_planned_in_sessions_per_second(tmp_path: Path) -> None:
    plan = tmp_path / "sessions.yaml"
    plan.write_text(CONVERSATIONS)
    code, result = _plan(tmp_path / "out", "--workers", "2", path=plan)
    assert code == 0
    ranked = result["ranked"]
    assert isinstance(ranked, list)
    # capacity is in sessions/s: a session is 2-4 requests, so it stays well below the requests/s an H100 serves
    h100 = next(r for r in ranked if r["label"] == "H100-SXM5-80GB TP1, least_outstanding")
    assert h100["saturated_rate"] < 20 and h100["max_rate"] <= h100["saturated_rate"]


def test_input_errors_survive_a_worker_process() -> None:
    import pickle

    from ttftsim.errors import InputError

    error = pickle.loads(pickle.dumps(InputError("plan.yaml", "search.hardware.0", "unknown hardware")))
    assert isinstance(error, InputError) and error.one_line() == "plan.yaml: search.hardware.0: unknown hardware"
    from ttftsim.workload.budget import WorkLimitError

    limit = WorkLimitError("workload", "", "sent more than 20 requests")
    again = type(limit)(*limit.args)  # as SimPy re-raises what a process raised (a closed-loop client's limit)
    assert isinstance(again, WorkLimitError) and str(again) == str(limit) == "workload: sent more than 20 requests"


def test_output_tokens_are_counted_per_unit_of_the_planned_rate() -> None:
    """$ per million tokens: a conversation plan's rate is sessions/s, so tokens count per session (all its
    served turns); open-loop requests count one each; unserved requests are left out."""
    import pandas as pd

    rows = {
        "status": ["finished"] * 7 + ["rejected"],
        "session_id": [0, 0, 0, 1, 1, 1, -1, 2],
        "generated_tokens": [100, 100, 100, 50, 50, 50, 30, 0],
    }
    figures = evaluate.slo_figures(pd.DataFrame(rows).assign(ttft_s=0.1, tpot_s=0.01, e2e_s=1.0))
    assert figures.output_tokens_per_unit == pytest.approx((300 + 150 + 30) / 3)


def test_n_plus_1_adds_a_replica_and_its_confirming_run_loses_a_pod(tmp_path: Path) -> None:
    """The quickstart on H100 TP1 alone: one replica carries the 20 req/s peak (as without availability);
    N+1 runs two, and the confirming cluster run, which loses one of them 30 s in (its requests retried, the
    replacement cold-starting), still meets P99 TTFT <= 500 ms."""
    from ttftsim.plan.run import run_plan

    plan = tmp_path / "spare.yaml"
    text = QUICKSTART.read_text().replace("[H100-SXM5-80GB, A100-SXM4-80GB, L40S-48GB]", "[H100-SXM5-80GB]")
    text = text.replace("tensor_parallel_size: [1, 2]", "tensor_parallel_size: [1]")
    plan.write_text(
        text.replace("max_num_seqs: [null, 64]", "max_num_seqs: [null]") + "availability: {redundancy: n_plus_1}\n"
    )
    result = run_plan(plan, tmp_path / "out")
    win = result.winner
    assert win is not None and win.status == "confirmed"
    assert (win.needed, win.replicas, win.gpus, win.pods_lost) == (1, 2, 2, 1)
    assert win.cost_per_hour == pytest.approx(2 * evaluate.price_per_gpu_hour(load_plan(plan), "H100-SXM5-80GB"))
    assert win.ttft_p99_s <= 0.5


def test_a_task_returns_its_calibration_range_warnings_and_shows_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a kernel shape outside the calibrated range becomes a plan warning; a library's warning in a task is
    shown as it would be without the record, not reported as a finding about the candidate."""
    import warnings

    from ttftsim.errors import CalibrationRangeWarning
    from ttftsim.plan import runner

    def task(*_: object) -> dict[str, int]:
        warnings.warn("gemm/bf16: n=8 outside the calibrated range", CalibrationRangeWarning, stacklevel=1)
        warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=1)
        return {"value": 1}

    monkeypatch.setattr(runner, "_task", task)
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        value, messages = runner.run_task("{}", ".", "bound", {}, 0.0)
    assert (value, messages) == ({"value": 1}, ["gemm/bf16: n=8 outside the calibrated range"])


def test_a_run_without_resume_says_it_discards_an_interrupted_runs_checkpoint(tmp_path: Path) -> None:
    """The interrupted run's finished tasks were thrown away without a word (its folder has no completion
    marker); a completed run's checkpoint is replaced silently, as ever. Said when it is discarded: a plan refused
    by its checks keeps it."""
    checkpoint = tmp_path / "checkpoint.sqlite"
    Store(checkpoint, "digest", resume=False).close()
    with pytest.warns(UserWarning, match=f"{tmp_path} held the checkpoint of an interrupted run: starting afresh"):
        Store(checkpoint, "digest", resume=False).close()
    (tmp_path / "complete.json").write_text("{}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Store(checkpoint, "digest", resume=False).close()


def test_n_plus_1_counts_the_streams_its_lost_pod_served_apart_from_the_slo() -> None:
    """The confirming run's failed streams (started requests are not retried) are no replica count's to save:
    with N+1 they are counted, not judged, so the answer does not depend on confirm_s (a cold trial got 10 x L40S
    with confirm_s 60 and 2 x H100 with 300); requests failed otherwise, and every run without N+1, are judged."""
    from types import SimpleNamespace

    import numpy as np

    from ttftsim.metrics.slo import slo_figures
    from ttftsim.plan.explain import refused
    from ttftsim.simulate import load_scenario, simulate

    run = simulate(load_scenario(ROOT / "examples" / "llama31-8b-h100.yaml"), ROOT / "examples")
    requests = run.requests.copy()
    lost = requests.index[:5]
    requests.loc[lost, ["status", "reason"]] = ["failed", "replica 0 lost in a pod failure (attempt 1)"]
    requests.loc[lost, "ttft_s"] = np.nan
    requests.loc[requests.index[5], ["status", "reason"]] = ["failed", "no serving replica (attempt 2)"]
    result = SimpleNamespace(requests=requests, itl_values=run.itl_values, itl_weights=run.itl_weights)
    plan = load_plan(QUICKSTART)
    spare = plan.model_copy(update={"availability": plan.availability.model_copy(update={"redundancy": "n_plus_1"})})
    figures, failed = evaluate._judged(spare, result)
    assert failed == 5
    assert figures == slo_figures(requests.drop(index=lost), spare.slo, (run.itl_values, run.itl_weights))
    assert evaluate._judged(plan, result) == (slo_figures(requests, plan.slo, (run.itl_values, run.itl_weights)), 0)
    assert figures.ttft_p99_s != evaluate._judged(plan, result)[0].ttft_p99_s  # the five count without N+1
    # a missed N+1 confirmation's reason counts the requests judged, not the lost pod's streams
    judged = requests[~evaluate._lost_to_pod(requests)]
    said = f"1 failed of {len(requests) - 5:,} requests, never served: e.g. no serving replica (attempt 2)"
    assert refused(judged) == said


def _children(pid: int) -> list[int]:
    """The process's child processes (Linux /proc)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text() if (task / "children").exists() else ""
        found += [int(p) for p in text.split()]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _plan_with_workers(out: Path) -> tuple[subprocess.Popen[str], list[int]]:
    """A plan of two workers, once both run tasks."""
    command = [sys.executable, "-m", "ttftsim", "plan", str(QUICKSTART), "--out", str(out), "--workers", "2"]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline, workers = time.monotonic() + 120, []
    while time.monotonic() < deadline and child.poll() is None and len(workers) < 2:
        time.sleep(0.2)
        workers = [p for p in _children(child.pid) if _alive(p)]
    assert child.poll() is None and len(workers) == 2, "the plan's two workers never ran"
    time.sleep(1.0)  # tasks running
    return child, workers


def _gone(workers: list[int]) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in workers):
        time.sleep(0.1)
    return not any(_alive(p) for p in workers)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_or_a_kill_ends_a_plan_and_its_workers(tmp_path: Path) -> None:
    """SIGTERM to the plan alone (a pod deleted, a CI job cancelled: the workers get nothing) ends it in order (one
    line, exit 143) and its workers with it; a plan killed outright leaves no worker either. The workers must not
    keep the parent's SIGTERM handler: its KeyboardInterrupt, raised in a busy worker by the parent's death signal,
    was caught as the task's exception and the worker lived on (a cold review)."""
    child, workers = _plan_with_workers(tmp_path / "term")
    child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=20)
    assert child.returncode == 143, stderr
    assert stderr.strip().startswith("interrupted:") and len(stderr.strip().splitlines()) == 1, stderr
    assert _gone(workers)
    child, workers = _plan_with_workers(tmp_path / "kill")
    child.kill()
    child.communicate(timeout=20)
    assert _gone(workers)
