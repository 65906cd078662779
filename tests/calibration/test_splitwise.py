"""Splitwise's whole-iteration times: medians of repeats, prefill and decode steps, power-capped GPUs left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttftsim.calibration.tables import import_splitwise
from ttftsim.errors import InputError

HEADER = (
    "model,hardware,prompt_size,batch_size,token_size,peak_power,average_power,prompt_time,token_time,"
    "e2e_time,tensor_parallel\n"
)


def test_repeats_become_one_median_row_per_step(tmp_path: Path) -> None:
    csv = tmp_path / "perf_model.csv"
    csv.write_text(
        HEADER
        + "llama2-70b,a100-80gb,512,1,128,1,0.7,196.0,54.0,7000,2\n"
        + "llama2-70b,a100-80gb,512,1,128,1,0.7,198.0,56.0,7000,2\n"
        + "llama2-70b,a100-80gb,512,1,128,1,0.7,500.0,58.0,7000,2\n"
        + "llama2-70b,h100-80gb-pcap,512,1,128,1,0.7,90.0,30.0,4000,2\n"
    )
    tables = import_splitwise(csv)
    assert set(tables) == {"A100-SXM4-80GB"}
    rows = {r.op: r for r in tables["A100-SXM4-80GB"].itertuples()}
    assert rows["prefill_step"].seconds == pytest.approx(0.198)
    assert rows["decode_step"].seconds == pytest.approx(0.056)
    assert (rows["decode_step"].model, rows["decode_step"].tp, rows["decode_step"].batch) == ("Llama-2-70b-hf", 2, 1)
    assert (rows["decode_step"].isl, rows["decode_step"].osl) == (512, 128)


def test_a_missing_column_or_file_is_a_one_line_error(tmp_path: Path) -> None:
    csv = tmp_path / "perf_model.csv"
    csv.write_text("model,hardware\nllama2-70b,a100-80gb\n")
    with pytest.raises(InputError, match="column missing"):
        import_splitwise(csv)
    with pytest.raises(InputError, match="not found"):
        import_splitwise(tmp_path / "absent.csv")


def test_the_shared_splitwise_table_imports(shared: Path) -> None:
    tables = import_splitwise(shared / "data/kernels/splitwise/perf_model.csv")
    assert set(tables) == {"A100-SXM4-80GB", "H100-SXM5-80GB"}
    llama = tables["H100-SXM5-80GB"].query("model == 'Llama-2-70b-hf'")
    assert set(llama["tp"]) == {2, 4, 8} and set(llama["op"]) == {"prefill_step", "decode_step"}
