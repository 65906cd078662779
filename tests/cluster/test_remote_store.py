"""An LMCache remote store is one per URL for a cluster run: every replica built for the run reads and writes the
same one, and another run starts with its own (docs/engine-semantics.md 14)."""

from __future__ import annotations

from pathlib import Path

import simpy

from ttftsim.cluster.run import replica_builds
from ttftsim.config.loading import load_file
from ttftsim.config.scenario import Scenario
from ttftsim.engine.recorder import Recorder

EXAMPLE = Path(__file__).parents[2] / "examples" / "advice" / "pairs" / "22-6-after.yaml"


def test_the_replicas_of_one_run_share_the_remote_tier_and_keep_their_own_cpu_tier() -> None:
    scenario = load_file(Scenario, EXAMPLE)
    assert scenario.engine.lmcache is not None and scenario.engine.lmcache.remote_url is not None

    def tiers(builds: object, index: int) -> list[object]:
        make = builds(scenario.hardware).make  # type: ignore[operator]
        engine = make(simpy.Environment(), Recorder(0.0), index, None)
        assert engine.kv.lmcache is not None
        return list(engine.kv.lmcache.tiers)

    run = replica_builds(scenario, EXAMPLE.parent, "scenario")
    (cpu0, remote0), (cpu1, remote1) = tiers(run, 0), tiers(run, 1)
    assert remote0 is remote1 and cpu0 is not cpu1
    assert [tier.spec.name for tier in (cpu0, remote0)] == ["LocalCPUBackend", "RemoteBackend"]
    _, remote_next_run = tiers(replica_builds(scenario, EXAMPLE.parent, "scenario"), 0)
    assert remote_next_run is not remote0
