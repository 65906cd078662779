"""The vLLM container's CPU limit against the processes vLLM runs in its pod (validate/cpu_limit.py): a warning
naming the limit, the processes counted and the fix; none without a limit, and none for a request alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ttftsim.config.engine import EngineArgs
from ttftsim.validate.cpu_limit import check_cpu_limit
from ttftsim.validate.manifests import ServingWorkload
from ttftsim.validate.report import Report
from ttftsim.validate.run import validate

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "validate"


def _findings(resources: dict[str, Any], group_size: int = 1, **engine: int) -> list[tuple[str, str, str]]:
    container = {"name": "vllm", "resources": resources}
    serving = ServingWorkload("k8s.yaml#0", "Deployment", "chat", 1, group_size, container, {}, "m", {})
    report = Report("cpu")
    check_cpu_limit(report, serving, EngineArgs(**engine), "Deployment/chat")
    return [(f.severity, f.message, f.fix) for f in report.findings]


@pytest.mark.parametrize(
    ("cpu", "said"),
    [
        ("500m", "500m (0.5 CPU)"),
        ("0.5", "0.5"),
        ("1", "1"),
        (1, "1"),
        ("1500m", "1500m (1.5 CPU)"),
    ],
)
def test_a_limit_below_the_api_server_and_engine_core_is_a_warning(cpu: Any, said: str) -> None:
    """At one GPU the worker runs inside the engine core (vLLM's `uni` executor): two processes, two cores."""
    assert _findings({"limits": {"cpu": cpu, "nvidia.com/gpu": 1}}) == [
        (
            "warning",
            f"Deployment/chat: CPU limit {said} is below the 2 vLLM processes of the pod (1 API server, 1 engine "
            "core), each busy on a core: the kernel throttles them (CFS quota) and TTFT grows beyond the "
            "prediction, which gives each a core",
            "set resources.limits.cpu to at least 2 (a core a vLLM process; vLLM's docs advise more), or remove "
            "the CPU limit (a request alone throttles nothing)",
        )
    ]


@pytest.mark.parametrize(
    "resources",
    [
        {"limits": {"cpu": "2"}},  # a core for each of the two
        {"limits": {"cpu": 2000}},
        {"limits": {"cpu": "2000m"}},
        {"limits": {"nvidia.com/gpu": 1}},  # no CPU limit: no quota
        {"requests": {"cpu": "500m"}},  # a request alone: a share under contention, never a throttle
        {},
        {"limits": {"cpu": "lots"}},  # not a quantity: the schema check says so
        {"limits": {"cpu": "0"}},  # the kubelet writes no CFS quota for 0
    ],
)
def test_no_warning_without_a_limit_below_the_processes(resources: dict[str, Any]) -> None:
    assert _findings(resources) == []


@pytest.mark.parametrize(
    ("cpu", "group_size", "engine", "processes"),
    [
        (
            "2",
            1,
            {"tensor_parallel_size": 2},
            "4 vLLM processes of the pod (1 API server, 1 engine core, 2 GPU workers)",
        ),
        (
            "6",
            1,
            {"tensor_parallel_size": 2, "data_parallel_size": 2},
            "7 vLLM processes of the pod (1 API server, 2 engine cores, 4 GPU workers)",
        ),
        # a LeaderWorkerSet of 2 pods, TP 8 x PP 2: the leader runs the API server, the engine core and 8 workers
        (
            "8",
            2,
            {"tensor_parallel_size": 8, "pipeline_parallel_size": 2},
            "10 vLLM processes of the pod (1 API server, 1 engine core, 8 GPU workers)",
        ),
        # data parallelism over 2 pods, 4 ranks of one GPU each: 2 engine cores a pod, each rank's worker inside
        ("2", 2, {"data_parallel_size": 4}, "3 vLLM processes of the pod (1 API server, 2 engine cores)"),
    ],
)
def test_the_processes_counted_follow_the_pods_share_of_the_parallelism(
    cpu: str, group_size: int, engine: dict[str, int], processes: str
) -> None:
    ((severity, message, _),) = _findings({"limits": {"cpu": cpu}}, group_size, **engine)
    assert severity == "warning" and f"is below the {processes}" in message


def test_a_starving_cpu_limit_is_warned_and_the_gate_still_passes(tmp_path: Path) -> None:
    """The shipped example with a 500m CPU limit (and request): the warning, and the exit code (passed) unchanged."""
    k8s = (EXAMPLE / "k8s.yaml").read_text()
    for old, new in (
        ('cpu: "8"', "cpu: 500m"),
        ("limits: {nvidia.com/gpu: 1,", "limits: {nvidia.com/gpu: 1, cpu: 500m,"),
    ):
        assert old in k8s, old
        k8s = k8s.replace(old, new)
    (tmp_path / "k8s.yaml").write_text(k8s)
    (tmp_path / "deploy.yaml").write_text((EXAMPLE / "deploy.yaml").read_text())
    report = validate(tmp_path / "deploy.yaml", [])
    (finding,) = [f for f in report.findings if "CPU limit" in f.message]
    assert finding.severity == "warning" and finding.check == "requests-limits"
    assert finding.message.startswith("Deployment/chat-8b: CPU limit 500m (0.5 CPU) is below the 2 vLLM processes")
    assert report.passed
