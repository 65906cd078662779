"""The gateway on hand-built ready pods: holding and draining in arrival order, the client timeout at the
gateway, the activator, exact retry timelines after a lost pod, and the prefill -> transfer -> decode path
of a disaggregated request (COST: 5 ms + 0.2 ms per computed token + 0.01 ms per KV token read)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import simpy

from tests.cluster.factories import builds, cluster_spec
from tests.factories import request
from ttftsim.cluster.gateway import Gateway
from ttftsim.cluster.pod import Pod
from ttftsim.engine.recorder import Recorder

PREFILL_200 = 0.005 + 200 * 0.0002 + 200 * 0.00001  # one iteration: 0.047 s


class Setup:
    """A gateway on a fresh environment, its recorders, and what it called back."""

    def __init__(self, client_timeout_s: float | None = None, **fields: Any) -> None:
        self.env = simpy.Environment()
        self.recorder, self.prefill_recorder = Recorder(0.0), Recorder(0.0)
        self.activations: list[float] = []
        self.drained: list[int] = []
        spec = cluster_spec(**fields)
        self.gateway = Gateway(
            self.env,
            spec,
            self.recorder,
            np.random.default_rng(0),
            client_timeout_s,
            lambda pod: self.drained.append(pod.index),
            lambda: self.activations.append(self.env.now),
        )
        self.pods: list[Pod] = []

    def ready_pod(self, role: str = "serving") -> Pod:
        """A ready pod whose engine reports to the gateway, as the lifecycle wires it."""
        build, index = builds("H100-SXM5-80GB"), len(self.pods)
        pod = Pod(index, role, 0.0, state="ready", kv_bytes_per_token=build.kv_bytes_per_token)
        assert build.make is not None
        prefill = role == "prefill"
        pod.engine = build.make(self.env, self.prefill_recorder if prefill else self.recorder, index, None)
        pod.engine.on_end = self.gateway.on_prefill_end if prefill else self.gateway.on_end
        self.pods.append(pod)
        self.gateway.refresh(self.pods)
        return pod

    def rows(self) -> Any:
        return self.recorder.requests_frame().set_index("request_id")


def test_held_requests_go_in_arrival_order_once_a_pod_is_ready_and_stale_ones_are_aborted() -> None:
    run = Setup(client_timeout_s=2.0)
    run.gateway.route(request(0, 0.0, 100, 5))
    run.env.run(until=1.0)
    run.gateway.route(request(1, 1.0, 100, 5))
    assert run.gateway.num_held == 2 and run.activations == [0.0, 1.0]  # each found no serving pod
    run.env.run(until=2.5)
    run.ready_pod()
    run.gateway.drain()  # request 0 waited 2.5 s > 2 s: aborted; request 1 (1.5 s) is routed
    assert run.gateway.num_held == 0
    run.env.run(until=5.0)
    rows = run.rows()
    assert (rows.loc[0, "status"], rows.loc[0, "replica"]) == ("aborted", -1)
    assert rows.loc[0, "reason"] == "client timeout after 2 s at the gateway"
    assert (rows.loc[1, "status"], rows.loc[1, "replica"], rows.loc[1, "first_scheduled_s"]) == ("finished", 0, 2.5)
    assert rows.loc[1, "gateway_s"] == pytest.approx(1.5)
    assert rows.loc[1, "ttft_s"] == pytest.approx(1.5 + 0.005 + 100 * 0.0002 + 100 * 0.00001)  # + 0.026 s prefill
    assert run.gateway.idle()


@pytest.mark.parametrize(
    ("retry", "prompt", "lost_at_s", "status", "ttft_s"),
    [
        # not started (its 0.047 s prefill runs until 0.047 s): retried at once on pod 1, from its arrival
        ({}, 200, 0.01, "finished", 0.01 + PREFILL_200),
        # one attempt only: failed, the reason naming the replica and the attempt
        ({"max_attempts": 1}, 200, 0.01, "failed", None),
        # started (first token at 0.047 s): failed by default ...
        ({}, 200, 0.1, "failed", None),
        # ... retried from scratch when the policy retries started requests
        ({"retry_started": True}, 200, 0.1, "finished", 0.1 + PREFILL_200),
    ],
)
def test_a_lost_pods_requests_are_retried_from_their_arrival_or_failed(
    retry: dict[str, Any], prompt: int, lost_at_s: float, status: str, ttft_s: float | None
) -> None:
    run = Setup(retry=retry, router={"type": "round_robin"})
    lost, _ = run.ready_pod(), run.ready_pod()
    run.gateway.route(request(0, 0.0, prompt, 50))  # round robin: pod 0
    run.env.run(until=lost_at_s)
    lost.state = "failed"
    assert lost.engine is not None
    run.gateway.pod_gone(lost, run.pods, lost.engine.fail_all(), "lost in a pod failure")
    run.env.run(until=5.0)
    row = run.rows().loc[0]
    assert row["status"] == status
    if ttft_s is None:
        assert (row["replica"], row["reason"]) == (0, "replica 0 lost in a pod failure (attempt 1)")
        assert run.gateway.attempts == {}
    else:
        assert (row["replica"], row["first_scheduled_s"], row["ttft_s"]) == (1, lost_at_s, pytest.approx(ttft_s))
        assert run.gateway.attempts == {0: 2}
    assert [p.index for p in run.gateway.routable] == [1]


def test_a_disaggregated_request_is_prefilled_then_its_kv_sent_then_decoded() -> None:
    run = Setup(disaggregation={"prefill_replicas": 1, "transfer": "tcp"})
    run.gateway.route(request(0, 0.0, 200, 3))  # no prefill pod yet: held, and no activation (not serving)
    assert run.activations == [] and run.gateway.num_held == 1
    decode, prefill = run.ready_pod(), run.ready_pod("prefill")
    run.gateway.drain()
    run.env.run(until=1.0)
    transfer = 0.005 + 200 * 131072 / 10e9  # TCP: 5 ms setup, 26,214,400 B at 10 GB/s = 0.00762144 s
    assert run.gateway.prefill_done_s == {0: pytest.approx(PREFILL_200)}
    assert run.gateway.kv_transfer_s == {0: pytest.approx(transfer)}
    row = run.rows().loc[0]
    # the decode pod computes the last prompt token again over 200 KV tokens: 0.005 + 0.0002 + 0.002 s
    assert row["ttft_s"] == pytest.approx(PREFILL_200 + transfer + 0.0072)
    assert (row["replica"], row["status"], row["generated_tokens"]) == (decode.index, "finished", 3)
    assert len(run.rows()) == 1  # one row for the client: the decode pod's (the prefill pod has its own recorder)
    assert prefill.outstanding == 0 and decode.outstanding == 0 and run.gateway.idle()


def test_the_last_request_of_a_draining_pod_tells_the_lifecycle() -> None:
    run = Setup()
    pod = run.ready_pod()
    run.gateway.route(request(0, 0.0, 100, 5))
    run.gateway.route(request(1, 0.0, 100, 5))
    pod.state = "draining"
    run.gateway.refresh(run.pods)
    assert run.gateway.routable == []
    run.env.run(until=5.0)
    assert run.drained == [0]  # once, after both requests ended
