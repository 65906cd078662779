"""Write docs/calibration.md: held-out error of the fitted kernel curves vs the uncalibrated roofline.

ttftsim calibrate --from ../shared/data/kernels/aiconfigurator    # fits -> calibration/fits/
python benchmarks/calibration_report.py                             # this table
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ttftsim.calibration.costs import FITS_DIR

OUT = Path(__file__).resolve().parents[1] / "docs" / "calibration.md"


def vidur_check() -> list[str]:
    """GEMM time predicted (roofline, and calibrated where a fit exists) against Vidur's own measurements of
    the same projections (an independent table, never fitted to)."""
    import numpy as np

    from ttftsim.calibration.costs import CalibratedCosts
    from ttftsim.calibration.tables import import_vidur
    from ttftsim.hardware.catalog import load_hardware
    from ttftsim.perf.kernels import RooflineCosts
    from ttftsim.shared_data import shared_dir

    shared = shared_dir()
    if shared is None:
        return ["(Vidur cross-check skipped: ../shared absent.)", ""]
    lines = [
        "## Cross-check on Vidur's GEMM measurements (not fitted to)",
        "",
        "`ttftsim.calibration.tables.import_vidur` reads Vidur's per-layer projection timings (QKV, O, MLP up",
        "and down; Llama-2/3, CodeLlama, Qwen, InternLM, Phi-2 shapes per TP degree and token count) as GEMMs.",
        "Median / P90 absolute percentage error of the predicted GEMM time, by token count (the calibrated",
        "curves extrapolate above the 8,192 tokens they were fitted on):",
        "",
        "| GPU | tokens | points | roofline median / P90 | calibrated median / P90 |",
        "|---|---|---|---|---|",
    ]
    import warnings

    warnings.simplefilter("ignore", UserWarning)  # calibrated curves extrapolating past 8,192 tokens: counted
    for gpu, table in import_vidur(shared / "data/kernels/vidur").items():
        hardware = load_hardware(gpu)
        roof, cal = RooflineCosts(hardware), CalibratedCosts.load(hardware)
        for label, low, high in (("1-16", 1, 16), ("17-512", 17, 512), ("513+", 513, 1 << 30)):
            part = table[(table["m"] >= low) & (table["m"] <= high)]
            if not len(part):
                continue
            measured = part["seconds"].to_numpy()
            shapes = list(zip(part["m"], part["n"], part["k"], strict=True))
            roof_ape = np.abs(
                np.array([roof.gemm_s(m, n, k, "bf16", 2.0 * n * k) for m, n, k in shapes]) / measured - 1
            )
            cal_text = "-"
            if cal is not None:
                cal_ape = np.abs(
                    np.array([cal.gemm_s(m, n, k, "bf16", 2.0 * n * k) for m, n, k in shapes]) / measured - 1
                )
                cal_text = f"{np.median(cal_ape):.1%} / {np.quantile(cal_ape, 0.9):.1%}"
            lines.append(
                f"| {gpu} | {label} | {len(part)} | {np.median(roof_ape):.1%} / {np.quantile(roof_ape, 0.9):.1%} "
                f"| {cal_text} |"
            )
    lines += ["", *_source_agreement()]
    return [*lines, ""]


def _source_agreement() -> list[str]:
    """The two measured sources on the shapes both timed: how far apart the measurements themselves are."""
    import numpy as np

    from ttftsim.calibration.tables import import_aiconfigurator, import_vidur
    from ttftsim.shared_data import shared_dir

    shared = shared_dir()
    assert shared is not None
    aic = import_aiconfigurator(shared / "data/kernels/aiconfigurator")
    lines = [
        "On the (m, n, k) both sources timed, Vidur's time / AIConfigurator's time (median, and median",
        "absolute difference): the sources themselves disagree about as much as the calibrated curves",
        "(fitted to AIConfigurator) miss Vidur by, so this check bounds what any fit to one source can show.",
        "",
        "| GPU | tokens | shared shapes | Vidur / AIConfigurator median | median absolute difference |",
        "|---|---|---|---|---|",
    ]
    for gpu, vidur in import_vidur(shared / "data/kernels/vidur").items():
        gemm = aic[gpu][(aic[gpu]["op"] == "gemm") & (aic[gpu]["dtype"] == "bf16")]
        both = vidur.merge(gemm[["m", "n", "k", "seconds"]], on=["m", "n", "k"], suffixes=("_vidur", "_aic"))
        for label, low, high in (("1-16", 1, 16), ("17-512", 17, 512), ("513+", 513, 1 << 30)):
            part = both[(both["m"] >= low) & (both["m"] <= high)]
            ratio = (part["seconds_vidur"] / part["seconds_aic"]).to_numpy()
            lines.append(
                f"| {gpu} | {label} | {len(part)} | {np.median(ratio):.3f} | {np.median(np.abs(ratio - 1)):.1%} |"
            )
    return lines


def splitwise_check() -> list[str]:
    """Whole iterations of Llama-2-70B (Splitwise's measured prefill and decode steps, TP 2/4/8, batch 1-64)
    predicted with the roofline and with the calibrated kernels: how much calibration buys end to end."""
    import warnings

    import numpy as np

    from ttftsim.calibration.costs import CalibratedCosts
    from ttftsim.calibration.tables import import_splitwise
    from ttftsim.hardware.catalog import load_hardware
    from ttftsim.model.catalog import load_model
    from ttftsim.perf.batch import BatchShape
    from ttftsim.perf.iteration import Deployment, IterationModel
    from ttftsim.shared_data import shared_dir

    shared = shared_dir()
    if shared is None:
        return ["(Splitwise cross-check skipped: ../shared absent.)", ""]
    lines = [
        "## Cross-check on Splitwise's whole iterations (not fitted to)",
        "",
        "`ttftsim.calibration.tables.import_splitwise` reads `perf_model.csv` (Llama-2-70B in fp16, TP 2/4/8,",
        "batch 1-64, prompts 128-8,192 tokens; median of the repeats). Predicted: one iteration of the model",
        "(prefill of `batch` prompts, or the mean decode step over the run's output tokens). Median / P90",
        "absolute percentage error:",
        "",
        "| GPU | step | points | roofline median / P90 | calibrated median / P90 |",
        "|---|---|---|---|---|",
    ]
    warnings.simplefilter("ignore", UserWarning)
    spec = load_model("Llama-2-70b-hf")
    for gpu, table in import_splitwise(shared / "data/kernels/splitwise/perf_model.csv").items():
        hardware = load_hardware(gpu)
        table = table[table["model"] == "Llama-2-70b-hf"]
        calibrated = CalibratedCosts.load(hardware)
        for op, part in table.groupby("op", sort=False):
            errors: dict[str, list[float]] = {"roofline": [], "calibrated": []}
            for name, costs in (("roofline", None), ("calibrated", calibrated)):
                models = {tp: IterationModel(Deployment(spec, hardware, tp, "fp16", "fp16"), costs) for tp in (2, 4, 8)}
                for row in part.itertuples(index=False):
                    model = models[int(row.tp)]
                    if op == "prefill_step":
                        shape = BatchShape.from_sequences([int(row.isl)] * int(row.batch), [0] * int(row.batch))
                        predicted = model.time_s(shape)
                    else:
                        predicted = float(np.mean(model.decode_run_s(row.batch, row.batch * (row.isl + 1), row.osl)))
                    errors[name].append(abs(predicted / row.seconds - 1))
            roof, cal = (np.asarray(errors[n]) for n in ("roofline", "calibrated"))
            lines.append(
                f"| {gpu} | {op} | {len(part)} | {np.median(roof):.1%} / {np.quantile(roof, 0.9):.1%} "
                f"| {np.median(cal):.1%} / {np.quantile(cal, 0.9):.1%} |"
            )
    lines += [
        "",
        "Calibration barely moves these: Splitwise's stack (2023, engine not named) has a per-iteration floor",
        "that kernels do not explain. Its Llama-2-70B decode step is about 45 ms on A100 at TP 4 and at TP 8",
        "(30 ms on H100 at both), where the kernels' time halves from TP 4 to TP 8; that looks like an engine",
        "without CUDA graphs. One row is an outlier in the table itself (TP 2, batch 64 prefill: 794 ms after",
        "6,633 ms at batch 32). The vLLM runs above, not Splitwise, are the end-to-end reference.",
    ]
    return [*lines, ""]


def fit_tables() -> list[str]:
    lines = [
        "# Kernel calibration: held-out error",
        "",
        "Generated by `python benchmarks/calibration_report.py` from `calibration/fits/*.json`, which",
        "`ttftsim calibrate --from ../shared/data/kernels/aiconfigurator` fits to AIConfigurator's measured",
        "kernel tables (GEMM, FlashAttention prefill and decode, vLLM custom all-reduce with CUDA graphs).",
        "Each curve is the roofline form with fitted efficiencies (`ttftsim/calibration/curves.py`) times a",
        "smooth correction: sums of tensor-product cubic B-splines over log2 shape features, damped toward",
        "zero where the table is sparse (`splines.py`). Each table's every fifth shape is held out of both",
        "fits; the errors below are on those points only, side by side with the uncalibrated roofline",
        "(datasheet peaks, default efficiencies of the profile).",
        "",
        "## Per operator class (all-reduce pooled over 2, 4 and 8 GPUs)",
        "",
        "| GPU | operator class | held out | calibrated median / P90 APE | roofline median / P90 APE | "
        "median <= 10% and better |",
        "|---|---|---|---|---|---|",
    ]
    details = [
        "## Per curve",
        "",
        "| GPU | curve | points | held out | calibrated median / P90 APE | roofline median / P90 APE |",
        "|---|---|---|---|---|---|",
    ]
    for path in sorted(FITS_DIR.glob("*.json")):
        data = json.loads(path.read_text())
        for key, summary in data["classes"].items():
            cal, roof = summary["calibrated"], summary["roofline"]
            meets = cal["median"] <= 0.10 and cal["median"] < roof["median"]
            lines.append(
                f"| {data['gpu']} | {key} | {summary['held_out']} | {cal['median']:.1%} / {cal['p90']:.1%} | "
                f"{roof['median']:.1%} / {roof['p90']:.1%} | {'yes' if meets else 'NO'} |"
            )
        for key, fit in sorted(data["fits"].items()):
            cal, roof = fit["held_out_ape"], fit["roofline_ape"]
            details.append(
                f"| {data['gpu']} | {key} | {fit['points']} | {fit['held_out']} | "
                f"{cal['median']:.1%} / {cal['p90']:.1%} | {roof['median']:.1%} / {roof['p90']:.1%} |"
            )
    return [*lines, "", *details, ""]


def end_to_end() -> list[str]:
    """The measured H100 vLLM runs (shared-prefix workload, rate stages) simulated with either cost model."""
    import warnings

    from ttftsim.accuracy.ground_truth import read_ground_truth
    from ttftsim.accuracy.harness import metrics_by_kernel_costs
    from ttftsim.shared_data import shared_dir

    shared = shared_dir()
    if shared is None:
        return ["(End-to-end check skipped: ../shared absent.)", ""]
    warnings.simplefilter("ignore", UserWarning)
    cases = read_ground_truth(shared / "validation/h100_vllm_runs.json")
    lines = [
        "## End to end: the measured H100 vLLM runs",
        "",
        "`ttftsim accuracy ../shared/validation/h100_vllm_runs.json --kernel-costs roofline|calibrated`:",
        "median / P90 absolute percentage error over the stages that were not overloaded.",
        "",
        "| metric | roofline | calibrated |",
        "|---|---|---|",
    ]
    summaries = metrics_by_kernel_costs(cases)
    for metric in summaries["roofline"]:
        cells = [f"{m[metric]['median_ape']:.1%} / {m[metric]['p90_ape']:.1%}" for m in summaries.values()]
        lines.append(f"| {metric} | {cells[0]} | {cells[1]} |")
    return [*lines, ""]


def main() -> int:
    lines = fit_tables() + end_to_end()
    lines += [
        "Status: every operator class on every GPU meets the 10% held-out median and beats the roofline.",
        "Held-out shapes lie inside the measured grid; away from it (other models' widths, larger token",
        "counts) the cross-checks below are the better guide. End to end (docs/accuracy.md) the calibrated",
        "curves predict the closed-loop Llama-3.1-70B FP8 points' TPOT to 2.9% median (roofline 10.3%) and",
        "the open-loop TTFT a little better, the open-loop TPOT a little worse (9.3% vs 8.4%). Simulations",
        "therefore use them by default where the GPU has a calibration (`kernel_costs: auto`; the summary",
        "says which kernel times were used), the roofline elsewhere. The all-reduce message size is read as",
        "bf16 elements (2 bytes each): the jump in every table between 4 and 8 MiB matches vLLM's 8 MiB",
        "custom all-reduce limit under that reading.",
        "",
    ]
    lines += vidur_check()
    lines += splitwise_check()
    lines += [
        "## Our Triton kernels (calibration/kernels/)",
        "",
        "GEMM (tiled, fp32 accumulation), causal prefill attention with GQA (tiled over query and key blocks,",
        "online softmax, queries after S - T cached tokens as in chunked prefill), paged decode attention over a",
        "block table (vLLM's cache layout), RMSNorm. Each has a torch reference; `tests/calibration/test_kernels.py`",
        "runs them on the CPU under `TRITON_INTERPRET=1` (torch 2.13.0 + triton 3.9) on odd shapes with fresh",
        "random inputs, fp32 and fp16 bounds, and outputs poisoned with NaN so an unwritten element fails the",
        "test. bf16 is left to the device run (the interpreter computes on numpy, which has no bfloat16).",
        "",
        "`ttftsim calibrate --device` (calibration/sweep.py) times them and the vendor path (torch.matmul,",
        "scaled_dot_product_attention) over the presets' shapes per TP slice, plus copy bandwidth and matmul peak,",
        "with `triton.testing.do_bench` and rotating buffers, within an 8-minute budget, and writes",
        "`calibration/results/<gpu>.json`. It has not run yet: no GPU has been lent to a session so far.",
        "",
    ]
    OUT.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
