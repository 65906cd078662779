"""Cluster runs at their edges (a bug hunt's cases, each checked against what Kubernetes and a client do): a client
that gives up while no pod is ready, pods that start cold at time 0, a node failure that takes a pod being scaled
down, a controller whose added replica is a promoted warm pod, an HPA rule without policies, a node pool of other
hardware than the scenario's."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ttftsim.config.scenario import Scenario
from ttftsim.simulate import simulate
from ttftsim.simulation_result import SimulationResult

WORKLOAD = {"type": "synthetic", "prompt_tokens": {"type": "fixed", "value": 200}}
COMPLETE = WORKLOAD | {
    "arrivals": {"type": "poisson", "rate": 1},
    "duration_s": 10,
    "output_tokens": {"type": "fixed", "value": 5},
}


def run(cluster: dict[str, Any], workload: dict[str, Any], **top: Any) -> SimulationResult:
    scenario = {"model": "Llama-3.1-8B", "hardware": "H100-SXM5-80GB", "seed": 1, **top}
    return simulate(Scenario.model_validate(scenario | {"workload": WORKLOAD | workload, "cluster": cluster}))


def test_a_client_gives_up_at_its_deadline_while_no_pod_is_ready() -> None:
    """No node can be had: every request is held at the gateway; each is aborted 5 s after its send (they stayed in
    flight to the end before), those sent in the last 5 s are still held."""
    pools = [{"name": "h100", "hardware": "H100-SXM5-80GB", "gpus_per_node": 4, "initial_nodes": 0, "max_nodes": 0}]
    poisson = {
        "arrivals": {"type": "poisson", "rate": 2},
        "duration_s": 30,
        "output_tokens": {"type": "fixed", "value": 20},
    }
    result = run({"node_pools": pools, "replicas": 1}, poisson, client_timeout_s=5)
    rows = result.requests
    expired = rows["arrival_s"] + 5 <= result.sim_end_s
    assert expired.sum() > 40 and (~expired).sum() > 5
    assert (rows.loc[expired, "status"] == "aborted").all() and (rows.loc[~expired, "status"] == "in_flight").all()
    assert (rows.loc[expired, "reason"] == "client timeout after 5 s at the gateway").all()


def test_pods_started_cold_at_time_zero_count_as_cold_starts() -> None:
    pools = [{"name": "h100", "hardware": "H100-SXM5-80GB", "gpus_per_node": 4}]
    poisson = {
        "arrivals": {"type": "poisson", "rate": 2},
        "duration_s": 20,
        "output_tokens": {"type": "fixed", "value": 20},
    }
    result = run({"node_pools": pools, "replicas": 2, "start_warm": False}, poisson)
    pods = result.cluster.pods if result.cluster is not None else None
    assert pods is not None and (pods["created_s"] == 0).all()
    cold = result.summary().cluster.cold_start_s  # type: ignore[union-attr]
    assert cold.count == 2 and cold.max == pytest.approx(float((pods["ready_s"] - pods["created_s"]).max()))


def test_a_pod_lost_while_it_drains_after_a_scale_down_is_not_replaced() -> None:
    """The HPA (1-2 replicas) scales down to 1 at 20 s, and pod 1 drains its long requests; at 22 s its node and
    the others fail. The ReplicaSet replaces the serving pod, not the one it was deleting: never more than 2 ready
    (3 before, until the next sync) and one pod fewer created."""
    pools = [
        {
            "name": "h100",
            "hardware": "H100-SXM5-80GB",
            "gpus_per_node": 1,
            "initial_nodes": 2,
            "max_nodes": 6,
            "provision_s": 0,
            "images_cached": True,
        }
    ]
    pod = {"container_start_s": 0, "compile_s": 0, "compile_cached_s": 0, "graph_capture_s": 0, "warmup_s": 0}
    hpa = {
        "min_replicas": 1,
        "max_replicas": 2,
        "sync_period_s": 10,
        "scrape_interval_s": 1,
        "metrics": [{"name": "num_requests_running", "target": 20}],
        "scale_down": {"stabilization_window_s": 0, "policies": [{"type": "Percent", "value": 100}]},
    }
    faults = [{"at_s": 22, "kind": "node", "index": 0}] * 3
    cluster = {"node_pools": pools, "replicas": 2, "pod": pod | {"weights_source": "tmpfs", "termination_grace_s": 300}}
    stages = {"type": "stages", "stages": [{"rate": 1, "duration_s": 12}, {"rate": 40, "duration_s": 20}]}
    result = run(
        cluster | {"autoscaling": hpa, "faults": faults},
        {"arrivals": stages, "output_tokens": {"type": "fixed", "value": 20000}},
        model="Llama-3.2-1B",
        metrics_window_s=1,
    )
    figures = result.summary().cluster
    assert figures is not None and figures.max_ready_replicas == 2 and figures.pods_created == 5


def test_the_controller_waits_for_the_pod_it_promoted_not_for_the_warm_pools_refill() -> None:
    """A TTFT controller above its threshold adds a replica every period: at 15 s the warm pod is promoted (ready at
    once; its refill cold-starts), so at 30 s the controller adds again instead of waiting for the refill."""
    pools = [{"name": "h100", "hardware": "H100-SXM5-80GB", "gpus_per_node": 8, "max_nodes": 1}]
    controller = {"type": "ttft_p99", "period_s": 15, "ttft_p99_s": 0.5, "max_replicas": 4, "cooldown_s": 0}
    poisson = {
        "arrivals": {"type": "poisson", "rate": 25},
        "duration_s": 40,
        "output_tokens": {"type": "fixed", "value": 200},
    }
    result = run(
        {"node_pools": pools, "replicas": 1, "warm_pool": 1, "controller": controller | {"rate_window_s": 30}},
        poisson | {"prompt_tokens": {"type": "fixed", "value": 4000}},
        horizon_s=40,
    )
    assert result.cluster is not None
    actions = {row["time_s"]: row["action"] for row in result.cluster.log.controller}
    assert actions[15.0] == "add" and actions[30.0] == "add"


@pytest.mark.parametrize("direction", ["scale_up", "scale_down"])
def test_an_hpa_rule_without_policies_is_refused(direction: str) -> None:
    pools = [{"name": "h100", "hardware": "H100-SXM5-80GB", "gpus_per_node": 4}]
    hpa = {"max_replicas": 2, "metrics": [{"name": "num_requests_running", "target": 20}]}
    scenario = {"model": "Llama-3.1-8B", "hardware": "H100-SXM5-80GB", "workload": COMPLETE}
    cluster = {"node_pools": pools, "autoscaling": hpa | {direction: {"stabilization_window_s": 0, "policies": []}}}
    with pytest.raises(ValidationError, match="policies"):
        Scenario.model_validate(scenario | {"cluster": cluster})


def test_a_cluster_with_conversations_and_no_horizon_says_what_to_set() -> None:
    from ttftsim.errors import InputError

    pools = [{"name": "h100", "hardware": "H100-SXM5-80GB", "gpus_per_node": 4}]
    workload = {
        "type": "conversation",
        "arrivals": {"type": "poisson", "rate": 1},
        "duration_s": 10,
        "turns": {"type": "fixed", "value": 2},
        "user_tokens": {"type": "fixed", "value": 100},
        "output_tokens": {"type": "fixed", "value": 10},
    }
    scenario = {"model": "Llama-3.1-8B", "hardware": "H100-SXM5-80GB", "workload": workload}
    with pytest.raises(InputError, match=r"horizon_s: a cluster scenario whose requests are sent as the run goes"):
        simulate(Scenario.model_validate(scenario | {"cluster": {"node_pools": pools}}))


def test_a_ttft_hpa_whose_rate_window_holds_fewer_than_two_scrapes_is_refused() -> None:
    pools = [{"name": "h100", "hardware": "H100-SXM5-80GB", "gpus_per_node": 4}]
    hpa = {"max_replicas": 3, "scrape_interval_s": 15, "metrics": [{"name": "ttft_p99_s", "target": 0.5}]}
    scenario = {"model": "Llama-3.1-8B", "hardware": "H100-SXM5-80GB", "workload": COMPLETE}
    with pytest.raises(ValidationError, match="rate_window_s 29 holds fewer than two scrapes every 15 s"):
        Scenario.model_validate(
            scenario | {"cluster": {"node_pools": pools, "autoscaling": hpa | {"rate_window_s": 29}}}
        )
    Scenario.model_validate(scenario | {"cluster": {"node_pools": pools, "autoscaling": hpa | {"rate_window_s": 30}}})


def test_a_gpu_pool_of_other_hardware_than_the_scenarios_is_said_in_the_warnings() -> None:
    """Its pods run as that GPU's replicas; the summary's header describes the scenario's hardware (a new user read
    it as the hardware that ran)."""
    pools = [{"name": "a100", "hardware": "A100-SXM4-80GB", "gpus_per_node": 1, "initial_nodes": 1}]
    result = run({"node_pools": pools, "replicas": 1}, COMPLETE | {"duration_s": 2})
    assert (result.requests["status"] == "finished").all()
    warning = result.summary().warnings[-1]
    assert warning.startswith(
        "cluster.node_pools.0.hardware is A100-SXM4-80GB, not the scenario's H100-SXM5-80GB: the replicas on its "
        "nodes run as A100-SXM4-80GB replicas"
    )
    same = [{"name": "h100", "hardware": "H100-SXM5-80GB", "gpus_per_node": 1, "initial_nodes": 1}]
    assert not run({"node_pools": same, "replicas": 1}, COMPLETE | {"duration_s": 2}).summary().warnings
