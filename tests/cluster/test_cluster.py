"""The cluster end to end with a known step cost: conservation under faults (hypothesis), a scale-out's
cold-start timeline, the warm pool, the gateway holding requests while no replica is ready."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cluster.factories import FAST_POD, NUM_BLOCKS, builds
from tests.factories import request
from ttftsim.cluster.cluster import ClusterSim
from ttftsim.cluster.run import run_until_done
from ttftsim.config.cluster import Cluster, Fault
from ttftsim.engine.recorder import Recorder
from ttftsim.workload.request import Request
from ttftsim.workload.sources import open_loop_source


def run(spec: dict[str, Any], requests: list[Request], horizon: float | None, seed: int = 0) -> tuple[ClusterSim, Any]:
    env = simpy.Environment()
    recorder = Recorder(0.0)
    cluster = ClusterSim(env, Cluster.model_validate(spec), builds, recorder, np.random.default_rng(seed), 10.0, 1)
    feeder = env.process(open_loop_source(env, requests, cluster.route))
    run_until_done(env, cluster, feeder, horizon)
    cluster.close()
    return cluster, recorder.requests_frame()


@st.composite
def cluster_cases(draw: Any) -> dict[str, Any]:
    count = draw(st.integers(1, 50))
    times = sorted(draw(st.lists(st.floats(0, 60), min_size=count, max_size=count)))
    requests = [
        request(i, t + 1e-7 * np.pi, draw(st.integers(1, 300)), draw(st.integers(1, 40))) for i, t in enumerate(times)
    ]
    faults = draw(
        st.lists(
            st.fixed_dictionaries(
                {"at_s": st.floats(0, 70), "kind": st.sampled_from(["node", "pod"]), "index": st.integers(0, 3)}
            ),
            max_size=3,
        )
    )
    spec: dict[str, Any] = {
        "node_pools": [
            {
                "name": "gpu",
                "hardware": "H100-SXM5-80GB",
                "gpus_per_node": draw(st.integers(1, 4)),
                "initial_nodes": draw(st.integers(0, 2)),
                "max_nodes": 3,
                "provision_s": draw(st.sampled_from([0.0, 5.0, 30.0])),
            }
        ],
        "pod": FAST_POD,
        "replicas": draw(st.integers(1, 4)),
        "router": {
            "type": draw(
                st.sampled_from(["round_robin", "least_outstanding", "power_of_two", "prefix_aware", "kv_aware"])
            )
        },
        "faults": faults,
        "retry": {"max_attempts": draw(st.integers(1, 3)), "retry_started": draw(st.booleans())},
        "start_warm": draw(st.booleans()),
    }
    if draw(st.booleans()):
        spec["autoscaling"] = {"max_replicas": 4, "metrics": [{"name": "num_requests_waiting", "target": 2}]}
    if draw(st.booleans()):
        spec["disaggregation"] = {"prefill_replicas": draw(st.integers(1, 2))}
    if draw(st.booleans()):
        spec["interference"] = {"pods_per_gpu": 2, "node_penalty": 0.1}
    return {"spec": spec, "requests": requests, "horizon": draw(st.one_of(st.none(), st.floats(5, 80)))}


@settings(
    max_examples=int(os.environ.get("CLUSTER_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(cluster_cases())
def test_every_request_is_accounted_for_under_faults(case: dict[str, Any]) -> None:
    cluster, frame = run(case["spec"], case["requests"], case["horizon"])
    horizon = case["horizon"] if case["horizon"] is not None else float("inf")
    arrived = [r.request_id for r in case["requests"] if r.arrival_s < horizon]
    assert sorted(frame["request_id"]) == arrived  # each exactly once
    assert set(frame["status"]) <= {"finished", "rejected", "failed", "in_flight"}
    failed = frame[frame["status"] == "failed"]
    assert (failed["reason"].str.contains("failure|scaled down")).all()
    assert all(n <= case["spec"]["retry"]["max_attempts"] for n in cluster.attempts.values())
    served = frame[frame["ttft_s"].notna()]
    parts = served[["gateway_s", "queue_s", "recompute_s", "prefill_s", "waiting_s", "stream_s"]].sum(axis=1)
    assert np.allclose(parts, served["ttft_s"], atol=1e-9)  # the TTFT split adds up, gateway waits included
    assert (served["gateway_s"] >= -1e-12).all() and (served["queue_s"] >= -1e-12).all()
    if case["horizon"] is None and not cluster.stuck():  # stuck: e.g. no node left for the prefill pod
        assert (frame["status"] != "in_flight").all()
        for pod in cluster.pods:
            if pod.engine is not None and pod.state == "ready":
                assert pod.engine.kv.pool.num_free == NUM_BLOCKS
    for pod in cluster.pods:  # a lost pod's requests were retried or failed: none left on its books (the time
        if pod.state == "failed":  # series' outstanding counted them until the run ended: cold trial E11)
            assert pod.outstanding == 0
    for node in cluster.nodes:  # GPUs held = live pods bound there
        assert node.used_gpus == sum(
            1 for p in cluster.pods if p.node is node and p.state in ("starting", "ready", "crashloop", "draining")
        )
        assert node.used_gpus <= node.gpus * node.slots_per_gpu  # GPU slots (time-slicing replicas)


def test_a_run_without_a_horizon_does_not_stop_while_a_kv_cache_is_in_transfer() -> None:
    """Found by the property above: the last request's prefill ended just before a 30 s check of whether the
    run is over, its KV on the way to the decode pod (on no pod, held by nobody): the cluster counted as idle
    and the request stayed in flight. It is served."""
    spec = {
        "node_pools": [{"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": 1, "initial_nodes": 2}],
        "pod": FAST_POD,
        "replicas": 1,
        "router": {"type": "round_robin"},
        "start_warm": True,
        "disaggregation": {"prefill_replicas": 1},
    }
    requests = [request(i, 1e-7 * np.pi, 1, 1) for i in range(4)] + [request(4, 29.941406564159266, 247, 1)]
    cluster, frame = run(spec, requests, None)
    assert frame["status"].tolist() == ["finished"] * 5 and not cluster.stuck()


def test_a_request_aborted_after_its_kv_transfer_leaves_the_run_free_to_end() -> None:
    """Disaggregated, the decode pod's node lost at 0.5 s: the request is prefilled, its KV arrives at no decode
    pod and it waits at the gateway, where its client gives up 300 s after sending it (301 s; the new pod is ready
    only at ~721 s): aborted then. The run ends at the next 30 s check (330 s), not at the drain limit an hour
    after the arrival."""
    spec = Cluster.model_validate(
        {
            "node_pools": [
                {"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": 1, "initial_nodes": 2}
                | {"max_nodes": 3, "provision_s": 600}
            ],
            "pod": FAST_POD,
            "replicas": 1,
            "router": {"type": "round_robin"},
            "start_warm": True,
            "faults": [{"at_s": 0.5, "kind": "node", "index": 1}],
            "disaggregation": {"prefill_replicas": 1},
        }
    )
    env, recorder = simpy.Environment(), Recorder(0.0)
    cluster = ClusterSim(env, spec, builds, recorder, np.random.default_rng(0), 10.0, 1, 300.0)
    feeder = env.process(open_loop_source(env, [request(0, 1.0, 100, 5)], cluster.route))
    run_until_done(env, cluster, feeder, None)
    cluster.close()
    frame = recorder.requests_frame()
    assert frame["status"].tolist() == ["aborted"] and "at the gateway" in frame["reason"][0]
    assert env.now == 330.0 and cluster.idle()


def test_scale_out_on_a_new_node_follows_the_cold_start_pipeline() -> None:
    spec = {
        "node_pools": [
            {
                "name": "gpu",
                "hardware": "H100-SXM5-80GB",
                "gpus_per_node": 1,
                "initial_nodes": 1,
                "max_nodes": 2,
                "provision_s": 100,
            }
        ],
        "pod": {"image_bytes": 10e9, "registry_bytes_per_s": 1e9, "weights_source": "local_nvme"},
        "replicas": 2,
    }
    cluster, _ = run(spec, [request(0, 1.0, 100, 5)], horizon=400.0)
    pods = {p.index: p for p in cluster.pods}
    assert pods[0].ready_s == 0.0  # the running deployment
    second = pods[1]
    # pending until the node is ready: Karpenter batch 1 s + 100 s provisioning
    assert second.bound_s == pytest.approx(101.0)
    assert [name for name, _, _ in second.phases] == [
        "pending",
        "image_pull",
        "container_start",
        "weight_load",
        "distributed_init",
        "compile",
        "graph_capture",
        "warmup",
    ]
    durations = {name: stop - start for name, start, stop in second.phases}
    assert durations["image_pull"] == pytest.approx(10.0)
    assert durations["weight_load"] == pytest.approx(16e9 / 2e9)
    assert second.ready_s == pytest.approx(101 + 10 + 15 + 8 + 0 + 20 + 10 + 2)


def test_gateway_holds_requests_until_a_replica_is_ready_and_they_pay_for_it() -> None:
    spec = {
        "node_pools": [{"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": 1, "initial_nodes": 1}],
        "pod": {**FAST_POD, "image_bytes": 1e9, "registry_bytes_per_s": 1e9},
        "start_warm": False,
    }
    cluster, frame = run(spec, [request(0, 0.5, 100, 5)], horizon=None)
    ready = cluster.pods[0].ready_s
    assert ready == pytest.approx(1 + 1 + 16e9 / 1.05e9 + 1 + 1 + 0)
    row = frame.iloc[0]
    assert row["status"] == "finished"
    assert row["gateway_s"] == pytest.approx(ready - 0.5)  # waited at the gateway for the cold start
    assert row["queue_s"] == pytest.approx(0.0)  # then scheduled at once


def test_warm_pool_pod_takes_traffic_at_once_and_is_replaced() -> None:
    spec = {
        "node_pools": [{"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": 4, "initial_nodes": 1}],
        "pod": FAST_POD,
        "warm_pool": 1,
    }
    env = simpy.Environment()
    cluster = ClusterSim(env, Cluster.model_validate(spec), builds, Recorder(0.0), np.random.default_rng(0), 10.0, 1)
    env.run(until=5.0)
    cluster.scale_to(2)
    assert [p.index for p in cluster.gateway.routable] == [0, 1]  # the warm pod (1) serves immediately
    env.run(until=60.0)
    warm = [p for p in cluster.pods if p.role == "warm" and p.state == "ready"]
    assert len(warm) == 1 and warm[0].created_s == 5.0  # a new warm pod refilled the pool


def test_a_lost_serving_pod_is_replaced_by_a_ready_warm_pod_at_once() -> None:
    """A warm pool that sat idle while every request waited at the gateway for a cold replacement (cold trial E10):
    the ReplicaSet's replacement of a failed serving pod is a scale-up back to the desired count, which promotes."""
    spec = {
        "node_pools": [{"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": 1, "initial_nodes": 3}],
        "pod": FAST_POD,
        "replicas": 2,
        "warm_pool": 1,
        "router": {"type": "round_robin"},
        "faults": [{"at_s": 5.0, "kind": "pod", "index": 0}],
    }
    env = simpy.Environment()
    cluster = ClusterSim(env, Cluster.model_validate(spec), builds, Recorder(0.0), np.random.default_rng(0), 10.0, 1)
    assert [p.role for p in cluster.pods] == ["serving", "serving", "warm"]
    env.run(until=5.0 + 1e-9)
    assert cluster.pods[0].state == "failed"
    assert (cluster.pods[2].role, cluster.pods[2].state) == ("serving", "ready")  # promoted at the fault
    assert [p.index for p in cluster.gateway.routable] == [1, 2]
    assert (cluster.pods[3].role, cluster.pods[3].created_s) == ("warm", 5.0)  # the pool refills, cold


def test_node_failure_retries_unstarted_requests_and_fails_started_ones() -> None:
    gpu = {"hardware": "H100-SXM5-80GB", "gpus_per_node": 1, "initial_nodes": 1, "max_nodes": 1}
    spec = {
        "node_pools": [{"name": "a", **gpu}, {"name": "b", **gpu}],
        "pod": {**FAST_POD, "node_affinity": {"preferred": [{"weight": 10, "labels": {"pool": "a"}}]}},
        "replicas": 2,
        "router": {"type": "round_robin"},
        "faults": [{"at_s": 1.0, "kind": "node", "index": 0}],
    }
    # round robin: request 0 -> pod 0 (node a, first token at 0.526 s), request 1 -> pod 1 (node b),
    # request 2 -> pod 0 again at 0.99 s (300-token prefill: no token before the node dies at 1.0 s)
    requests = [request(0, 0.5, 100, 200), request(1, 0.6, 100, 5), request(2, 0.99, 300, 5)]
    cluster, frame = run(spec, requests, horizon=None)
    assert cluster.pods[0].node is not None and cluster.pods[0].node.pool.name == "a"
    assert cluster.log.faults[0]["pods"] == [0]
    rows = frame.set_index("request_id")
    assert rows.loc[0, "status"] == "failed"  # it had streamed tokens: not retried by default
    assert "node failure" in rows.loc[0, "reason"]
    assert rows.loc[2, "status"] == "finished" and cluster.attempts[2] == 2
    assert rows.loc[2, "replica"] == 1 and rows.loc[2, "first_scheduled_s"] == 1.0  # pod 1 idle since 0.651 s
    # the lost 10 ms count, then 300 tokens in chunks of 256 (0.005 + 256 x 0.0002 + 256 x 0.00001 = 0.05876)
    # and 44 over 256 computed (0.005 + 44 x 0.0002 + 300 x 0.00001 = 0.0168)
    assert rows.loc[2, "ttft_s"] == pytest.approx(0.01 + 0.05876 + 0.0168)
    assert 1 not in cluster.attempts and rows.loc[1, "status"] == "finished"
    assert cluster.pods[0].state == "failed" and cluster.pods[2].role == "serving"  # the replacement
    assert cluster.pods[0].outstanding == 0  # requests 0 and 2 are off the lost pod's books (cold trial E11)


@pytest.mark.parametrize(
    ("sharing", "gpus", "penalty", "factor"),
    [
        ("time_slicing", 1, 0.0, 2.0),  # two busy pods time-slice one GPU: each iteration takes twice as long
        ("mps", 1, 0.0, 1.5),  # MPS overlap 0.5
        ("time_slicing", 2, 0.25, 1.25),  # separate GPUs, node contention only
        ("time_slicing", 2, 0.0, 1.0),  # alone on its GPU
    ],
)
def test_co_located_busy_pods_slow_each_other_by_the_configured_model(
    sharing: str, gpus: int, penalty: float, factor: float
) -> None:
    spec = {
        "node_pools": [{"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": gpus, "initial_nodes": 1}],
        "pod": FAST_POD,
        "replicas": 2,
        "router": {"type": "round_robin"},
        "interference": {"pods_per_gpu": 3 - gpus, "sharing": sharing, "node_penalty": penalty},
    }
    busy, probe = request(0, 0.1, 50, 400), request(1, 1.0, 100, 1)
    _, frame = run(spec, [busy, probe], horizon=None)
    solo = 0.005 + 100 * 0.0002 + 100 * 0.00001  # COST: fixed + 100 prefill tokens + 100 KV tokens = 0.026 s
    assert frame.set_index("request_id").loc[1, "ttft_s"] == pytest.approx(solo * factor)


def test_disaggregated_ttft_is_prefill_then_transfer_then_one_decode_step() -> None:
    spec = {
        "node_pools": [{"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": 2, "initial_nodes": 1}],
        "pod": FAST_POD,
        "disaggregation": {"prefill_replicas": 1, "transfer": "tcp"},
    }
    cluster, frame = run(spec, [request(0, 1.0, 200, 3)], horizon=None)
    prefill = 0.005 + 200 * 0.0002 + 200 * 0.00001  # 200 prompt tokens on the prefill pod: 0.047 s
    transfer = 0.005 + 26_214_400 / 10e9  # TCP: 5 ms setup, 200 tokens x 131072 B at 10 GB/s: 0.00762144 s
    decode_first = 0.005 + 0.0002 + 200 * 0.00001  # the last prompt token again, as a decode over 200: 0.0072 s
    row = frame.iloc[0]
    assert row["status"] == "finished" and row["generated_tokens"] == 3
    assert row["ttft_s"] == pytest.approx(0.06182144)  # 0.047 + 0.00762144 + 0.0072
    assert row["ttft_s"] == pytest.approx(prefill + transfer + decode_first)
    assert cluster.kv_transfer_s[0] == pytest.approx(transfer)
    assert [(p.index, p.role) for p in cluster.pods] == [(0, "serving"), (1, "prefill")]
    assert row["replica"] == 0  # the client's request is recorded by the decode pod


def test_disaggregated_requests_survive_a_prefill_pod_failure() -> None:
    spec = {
        "node_pools": [{"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": 4, "initial_nodes": 1}],
        "pod": FAST_POD,
        "disaggregation": {"prefill_replicas": 1},
        "faults": [{"at_s": 1.0, "kind": "pod", "index": 1}],  # pods: 0 decode, 1 prefill
    }
    requests = [request(i, 0.99 + 0.001 * i, 300, 4) for i in range(5)]
    cluster, frame = run(spec, requests, horizon=None)
    assert cluster.log.faults[0]["pods"] == [1]
    assert (frame["status"] == "finished").all() and len(frame) == 5
    assert max(cluster.attempts.values()) == 2  # prefilled again on the replacement prefill pod
    replacement = cluster.pods[2]
    assert replacement.role == "prefill" and replacement.created_s == 1.0
    assert (frame["first_token_s"] > replacement.ready_s).all()  # waited for the replacement's cold start


def test_a_tp_group_larger_than_a_node_is_gang_scheduled_on_whole_nodes() -> None:
    spec = {
        "node_pools": [
            {"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": 8, "initial_nodes": 3, "max_nodes": 5}
        ],
        "pod": {**FAST_POD, "gpus": 16},
        "replicas": 1,
    }
    env = simpy.Environment()
    cluster = ClusterSim(env, Cluster.model_validate(spec), builds, Recorder(0.0), np.random.default_rng(0), 10.0, 16)
    first = cluster.pods[0]
    assert first.node is not None and len(first.workers) == 1  # leader + one worker, 8 GPUs each
    assert sorted(n.used_gpus for n in cluster.nodes) == [0, 8, 8]
    cluster.scale_to(2)  # one node free: not enough for a group of two; the provisioner adds two nodes
    second = cluster.pods[1]
    assert second.state == "pending"
    assert [n.state for n in cluster.nodes[3:]] == ["provisioning", "provisioning"]
    env.run(until=300.0)
    assert second.state == "ready" and second.bound_s == 181.0  # Karpenter batch 1 s + 180 s provisioning
    # the group is the one initial node left free (it has the image: ImageLocality makes it the leader) and node
    # 3, the first new node to become Ready (node 4, ready at the same instant but after it, stays empty)
    free = ({0, 1, 2} - {first.node.index, first.workers[0].index}).pop()
    assert second.node is not None and second.node.index == free
    assert [w.index for w in second.workers] == [3]
    assert [n.used_gpus for n in cluster.nodes[3:]] == [8, 0]
    worker = first.workers[0]
    ready_nodes = [n for n in cluster.nodes if n.state == "ready"]
    env.process(cluster.faults.inject(Fault(at_s=0.0, kind="node", index=ready_nodes.index(worker))))  # from now
    env.run(until=env.now + 1)
    assert first.state == "failed"  # losing any node of the group loses the pod


def test_scale_to_zero_and_back_on_the_next_request() -> None:
    spec = {
        "node_pools": [{"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": 2, "initial_nodes": 1}],
        "pod": FAST_POD,
        "autoscaling": {
            "min_replicas": 0,
            "max_replicas": 2,
            "metrics": [{"name": "num_requests_running", "target": 1}],
            "scale_down": {"stabilization_window_s": 60, "policies": [{"type": "Percent", "value": 100}]},
        },
    }
    requests = [request(0, 1.0, 100, 5), request(1, 400.0, 100, 5)]
    cluster, frame = run(spec, requests, horizon=None)
    rows = frame.set_index("request_id")
    assert (frame["status"] == "finished").all()
    assert rows.loc[0, "ttft_s"] == pytest.approx(0.026)  # the first replica was up: one 100-token prefill
    first = cluster.pods[0]
    # idle: scaled to zero, at the latest when the first sync's recommendation (t = 15 s) leaves the 60 s window
    assert first.state == "terminated" and first.ended_s <= 15.0 + 60.0
    second = cluster.pods[1]
    assert second.created_s == 400.0  # the activator started one for request 1 on the node still there ...
    # ... which waited for its cold start: image cached, container 1 s, 16 GB from the page cache at 7 GB/s,
    # compile from the cache 1 s, graph capture 1 s, then its 0.026 s prefill
    assert second.ready_s == pytest.approx(400.0 + 1 + 16 / 7 + 1 + 1)
    assert rows.loc[1, "first_token_s"] == pytest.approx(second.ready_s + 0.026)
