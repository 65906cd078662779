"""The plan on an existing Ray cluster (two local worker processes started here with `ray start`, stopped
after): the same plan.json as the local process pool. RAY_ADDRESS points ttftsim at any Ray cluster."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "plans" / "quickstart.yaml"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _plan(tmp_path: Path, name: str, env: dict[str, str], *options: str) -> dict[str, object]:
    command = [sys.executable, "-m", "ttftsim", "plan", str(tmp_path / "plan.yaml"), "--out", str(tmp_path / name)]
    result = subprocess.run([*command, "--json", *options], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stderr
    data: dict[str, object] = json.loads(result.stdout)
    return data


def test_a_plan_on_an_existing_ray_cluster_equals_the_local_one(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="the Ray backend needs ray (pip install 'ttftsim[dist]')")
    ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    if ray is None:
        pytest.skip("the ray command is not installed")
    plan = yaml.safe_load(QUICKSTART.read_text())
    plan["search"] = {"hardware": ["H100-SXM5-80GB"], "tensor_parallel_size": [1], "max_num_seqs": [None, 64]}
    plan |= {"probe_requests": 300, "confirm_s": 60, "confirm_top": 1}
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {"RAY_AUTH_MODE": "disabled"}  # no token
    local = _plan(tmp_path, "local", env, "--workers", "2")
    port = _free_port()
    start = [ray, "start", "--head", "--num-cpus", "2", "--port", str(port), "--node-ip-address", "127.0.0.1"]
    started = subprocess.run(
        [*start, "--include-dashboard", "false", "--disable-usage-stats"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert started.returncode == 0, started.stderr
    try:
        on_ray = _plan(tmp_path, "ray", env | {"RAY_ADDRESS": f"127.0.0.1:{port}"}, "--backend", "ray")
    finally:
        subprocess.run([ray, "stop", "--force"], capture_output=True, env=env, check=False, timeout=120)
    assert on_ray == local


def test_ray_failing_is_one_line_naming_the_backend_and_resume(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray not starting, or a worker dying under a task, is an InputError naming --backend ray (and RAY_ADDRESS
    when set) and the remedy; an error of the plan raised in a task reaches the CLI as itself."""
    ray = pytest.importorskip("ray", reason="the Ray backend needs ray (pip install 'ttftsim[dist]')")
    from ray.exceptions import RayTaskError, WorkerCrashedError

    from ttftsim.config.plan import Plan
    from ttftsim.errors import InputError
    from ttftsim.plan.evaluate import Candidate
    from ttftsim.plan.runner import Runner

    plan = Plan.model_validate(yaml.safe_load(QUICKSTART.read_text()))
    runner = Runner(plan=plan, base=".", store=None)  # type: ignore[arg-type]  # _execute_ray stores nothing
    cand = Candidate("H100-SXM5-80GB", 1, None, None, True, True, None, "auto", "round_robin", 0)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)

    def refuse(**_: object) -> None:
        raise ConnectionError("Could not find any running Ray instance.\nmore lines")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.9:6379")
    with pytest.raises(InputError) as caught:
        list(runner._execute_ray("{}", [(0, ("bound", cand, 0.0))]))
    assert caught.value.one_line() == (
        "--backend ray (RAY_ADDRESS=10.0.0.9:6379): Ray did not start (ConnectionError: Could not find any running "
        "Ray instance.); check the Ray cluster or use --backend local (finished tasks are kept)"
    )

    class Remote:
        def remote(self, *args: object) -> str:
            return f"ref{args[4]}"  # one object ref per task (its arg)

    def crashed(_: object) -> None:
        raise WorkerCrashedError()

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "remote", lambda _: Remote())
    monkeypatch.setattr(ray, "wait", lambda refs, num_returns: (refs[:num_returns], refs[num_returns:]))
    monkeypatch.setattr(ray, "get", crashed)
    monkeypatch.delenv("RAY_ADDRESS")
    cancelled: list[object] = []
    monkeypatch.setattr(ray, "cancel", cancelled.append)
    failed = r"^--backend ray: Ray failed \(WorkerCrashedError: .*rerun with --resume \(finished tasks are kept\)$"
    with pytest.raises(InputError, match=failed):
        list(runner._execute_ray("{}", [(0, ("bound", cand, 0.0)), (1, ("bound", cand, 1.0))]))
    assert cancelled == ["ref1.0"]  # the task not yet returned when the first one's worker crashed

    def lost(*_: object, **__: object) -> None:
        raise ConnectionError("Ray Client lost its connection")

    monkeypatch.setattr(ray, "wait", lost)
    with pytest.raises(InputError, match=r"Ray failed \(ConnectionError: Ray Client lost its connection\)"):
        list(runner._execute_ray("{}", [(0, ("bound", cand, 0.0))]))

    def plan_error(_: object) -> None:  # what ray.get raises for a task's InputError: RayTaskError(InputError)
        from ray.exceptions import RayTaskError

        raise RayTaskError("run_task", "Traceback ...", InputError("plan.yaml", "slo", "no such percentile"))

    monkeypatch.setattr(ray, "wait", lambda refs, num_returns: (refs[:num_returns], refs[num_returns:]))
    monkeypatch.setattr(ray, "get", plan_error)
    with pytest.raises(RayTaskError) as task:  # not made a Ray failure: the task's own error, passed on
        list(runner._execute_ray("{}", [(0, ("bound", cand, 0.0))]))
    assert isinstance(task.value.cause, InputError)
