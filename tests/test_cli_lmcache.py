"""LMCache settings a user gets wrong are one line naming the file and field, exit 2 (config/kv_transfer.py,
replica.py's capacity check)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import _assert_one_line_error, run

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama31-8b-h100.yaml"
CONNECTOR = "engine:\n  kv_transfer_config: {kv_connector: LMCacheConnectorV1}\n"


@pytest.mark.parametrize(
    ("engine", "field", "message"),
    [
        (CONNECTOR + "  lmcache: {local_disk: /nvme}", "engine.lmcache", "max_local_disk_size is 0 with local_disk"),
        (
            CONNECTOR + "  lmcache: {max_local_cpu_size: 0.01}",  # 10.7 MB: one chunk of 256 tokens is 32 MiB
            "engine.lmcache.max_local_cpu_size",
            "0.01 GB holds no chunk: one chunk of 256 tokens is 33,554,432 bytes per GPU",
        ),
        (CONNECTOR + "  kv_offloading_size: 8", "engine", "kv_offloading_size and kv_transfer_config together"),
    ],
)
def test_bad_lmcache_settings_are_one_line_errors(tmp_path: Path, engine: str, field: str, message: str) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(EXAMPLE.read_text().replace("engine:\n", engine + "\n", 1))
    _assert_one_line_error(run("simulate", str(scenario)), str(scenario), field, message)


def test_a_run_with_lmcache_writes_its_settings_in_the_summary(tmp_path: Path) -> None:
    scenario = tmp_path / "lmcache.yaml"
    engine = CONNECTOR + "  lmcache: {max_local_cpu_size: 40, local_disk: /nvme, max_local_disk_size: 200}\n"
    scenario.write_text(EXAMPLE.read_text().replace("engine:\n", engine, 1).replace("duration_s: 120", "duration_s: 5"))
    result = run("simulate", str(scenario), "--json", "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    settings = summary["config"]["engine"]["lmcache"]
    assert (settings["max_local_cpu_size"], settings["local_disk"], settings["chunk_size"]) == (40.0, "/nvme", 256)
    hits = summary["external_prefix_cache"]  # LMCache's hits past the GPU's, as vLLM counts them
    assert hits["query_tokens"] > 0 and hits["hit_rate"] == hits["hit_tokens"] / hits["query_tokens"]
    prom = (tmp_path / "out" / "metrics.prom").read_text()
    labels = '{model_name="Llama-3.1-8B",engine="0"}'
    assert f"vllm:external_prefix_cache_queries_total{labels} {hits['query_tokens']}" in prom
    assert f"vllm:external_prefix_cache_hits_total{labels} {hits['hit_tokens']}" in prom
