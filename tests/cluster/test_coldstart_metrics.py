"""One cold start's timeline; Prometheus' histogram_quantile; the routers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ttftsim.cluster.coldstart import NodeCaches, cold_start_phases
from ttftsim.cluster.metrics import histogram_quantile
from ttftsim.config.cluster_nodes import PodSpec


def test_cold_start_phases_on_a_bare_node_and_a_warm_one() -> None:
    pod = PodSpec(image_bytes=20e9, registry_bytes_per_s=0.2e9, weights_source="network_volume")
    bare = dict(cold_start_phases(pod, 140e9, 4, NodeCaches(False, False, False)))
    assert bare == {
        "image_pull": pytest.approx(100.0),  # 20 GB / 0.2 GB/s
        "container_start": 15.0,
        "weight_load": pytest.approx(100 / 3),  # four 35 GB shards in parallel at 1.05 GB/s each: 33.3 s
        "distributed_init": 5.0,
        "compile": 20.0,
        "graph_capture": 10.0,
        "warmup": 2.0,
    }
    warm = dict(cold_start_phases(pod, 16e9, 1, NodeCaches(True, True, True), graphs=False))
    assert warm["image_pull"] == 0.0 and warm["distributed_init"] == 0.0 and warm["graph_capture"] == 0.0
    assert warm["weight_load"] == pytest.approx(2.2857, abs=1e-4)  # 16 GB from the node's page cache at 7 GB/s
    assert warm["compile"] == 6.0
    eager = dict(cold_start_phases(pod, 16e9, 1, NodeCaches(False, False, False), compiled=False, graphs=False))
    assert eager["compile"] == eager["graph_capture"] == 0.0  # --enforce-eager, -O0: nothing compiled or captured


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    bounds = (0.1, 0.5, 1.0)
    # 10 observations: 5 in (0, 0.1], 4 in (0.1, 0.5], 1 in (0.5, 1.0]
    counts = np.array([5, 4, 1, 0])
    assert histogram_quantile(0.5, bounds, counts) == pytest.approx(0.1)  # rank 5: top of the first bucket
    assert histogram_quantile(0.7, bounds, counts) == pytest.approx(0.1 + 0.4 * 2 / 4)  # rank 7
    assert histogram_quantile(0.99, bounds, counts) == pytest.approx(0.5 + 0.5 * 0.9)  # rank 9.9
    assert histogram_quantile(0.99, bounds, np.array([0, 0, 0, 3])) == 1.0  # +Inf: highest finite bound
    # rank 5 ends the first bucket exactly: the first bucket whose cumulative count reaches the rank (Prometheus'
    # sort.Search on count >= rank), not the next non-empty one (which would give 0.5)
    assert histogram_quantile(0.5, bounds, np.array([5, 0, 5, 0])) == pytest.approx(0.1)
    assert math.isnan(histogram_quantile(0.99, bounds, np.zeros(4, dtype=np.int64)))
