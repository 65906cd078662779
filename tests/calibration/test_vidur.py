"""Vidur's operator profiles read as GEMMs: widths from the model, divided by TP, milliseconds to seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttftsim.calibration.tables import import_vidur
from ttftsim.errors import InputError

HEADER = (
    "n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,num_tensor_parallel_workers,"
    "time_stats.attn_pre_proj.median,time_stats.attn_post_proj.median,time_stats.mlp_up_proj.median,"
    "time_stats.mlp_down_proj.median\n"
)


def test_projections_become_gemms_with_tp_slices(tmp_path: Path) -> None:
    folder = tmp_path / "compute/h100/meta-llama/Meta-Llama-3-8B"
    folder.mkdir(parents=True)
    (folder / "mlp.csv").write_text(HEADER + "32,8,4096,14336,128256,True,128,2,0.2,0.1,0.5,0.3\n")
    table = import_vidur(tmp_path)["H100-SXM5-80GB"]
    shapes = {(r.m, r.n, r.k): r.seconds for r in table.itertuples()}
    assert shapes[(128, (32 + 16) * 128 // 2, 4096)] == pytest.approx(0.2e-3)  # QKV over TP 2
    assert shapes[(128, 4096, 32 * 128 // 2)] == pytest.approx(0.1e-3)  # O projection
    assert shapes[(128, 2 * 14336 // 2, 4096)] == pytest.approx(0.5e-3)  # gated MLP up: gate + up
    assert shapes[(128, 4096, 14336 // 2)] == pytest.approx(0.3e-3)
    with pytest.raises(InputError, match="not a Vidur profile folder"):
        import_vidur(tmp_path / "compute")


def test_the_shared_vidur_tables_import(shared: Path) -> None:
    tables = import_vidur(shared / "data/kernels/vidur")
    assert set(tables) == {"A100-SXM4-80GB", "H100-SXM5-80GB"}
    assert all(len(t) > 1000 and (t["seconds"] > 0).all() for t in tables.values())
