"""What `ttftsim validate` predicts on: the model, hardware, engine arguments and replicas of a deployment (run.py
reads them from its deployment file or its manifests), and the scenario that simulates them, on one replica for the
engine check or as the whole cluster behind a Service for the prediction. Nothing here checks anything."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ttftsim.cluster.run import fixed_cluster
from ttftsim.config.deploy import Deploy
from ttftsim.config.engine import EngineArgs
from ttftsim.config.scenario import Scenario
from ttftsim.validate.k8s_schema import SchemaFinding
from ttftsim.validate.manifests import ServingWorkload


@dataclass
class Target:
    """What will run: model, hardware, engine arguments, replicas, and the manifests' view if any."""

    model: str
    hardware: str | None
    engine: EngineArgs
    replicas: int
    serving: ServingWorkload | None
    schema_findings: list[SchemaFinding] = field(default_factory=list)  # k8s_schema: each object vs its schema


def scenario_for(deploy: Deploy, target: Target, replicas: int, cluster: bool = False) -> Any:
    data: dict[str, Any] = {
        "name": deploy.name,
        "model": target.model,
        "hardware": target.hardware,
        "engine": target.engine.model_dump(),
        "workload": deploy.traffic.model_dump(),
    }
    if cluster:  # a Kubernetes Service spreads connections evenly: round robin
        args = target.engine  # a replica's GPUs: TP x PP x DP (a pipeline over an LWS group spans its nodes)
        gpus = args.tensor_parallel_size * args.pipeline_parallel_size * args.data_parallel_size
        data["cluster"] = fixed_cluster(str(target.hardware), replicas, gpus, "round_robin", 0, deploy.gpus_per_node)
    return Scenario.model_validate(data)
