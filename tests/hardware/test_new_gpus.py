"""The GPUs added for issue #18 (B200, GB200, H20, L4, A10G, RTX PRO 6000 Blackwell Server, MI300X, MI325X):
each is listed with where its kernel times come from, is found from the node labels its operators write,
gets vLLM's default batch tier from its memory, and its figures reach the iteration model unchanged (one
L4 step worked by hand from the datasheet's 300 GB/s)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.test_cli import run
from ttftsim.calibration.costs import has_calibration
from ttftsim.config.engine import EngineArgs
from ttftsim.config.resolved_engine import resolve_engine
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import hardware_for_label, hardware_for_system, load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.iteration import Deployment, IterationModel
from ttftsim.validate.run import validate

NEW = [
    "B200-SXM-180GB",
    "GB200-NVL72-186GB",
    "H20-96GB",
    "L4-24GB",
    "A10G-24GB",
    "RTX-PRO-6000-Blackwell-Server-96GB",
    "MI300X-192GB",
    "MI325X-256GB",
]


def test_hardware_lists_each_new_gpu_with_its_kernel_time_source() -> None:
    shown = run("hardware")
    assert shown.returncode == 0, shown.stderr
    rows = {line.split("│")[1].strip(): line for line in shown.stdout.splitlines() if line.startswith("│")}
    for name in NEW:
        source = "calibrated" if has_calibration(name) else "roofline"
        assert rows[name].rstrip("│ ").endswith(source), rows[name]


@pytest.mark.parametrize(
    ("label", "profile"),
    [
        ("NVIDIA-B200", "B200-SXM-180GB"),
        ("nvidia-gb200", "GB200-NVL72-186GB"),
        ("NVIDIA-H20", "H20-96GB"),
        ("nvidia-l4", "L4-24GB"),
        ("a10g", "A10G-24GB"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "RTX-PRO-6000-Blackwell-Server-96GB"),
        ("AMD_Instinct_MI300X_OAM", "MI300X-192GB"),
        ("AMD_Instinct_MI325_OAM", "MI325X-256GB"),
    ],
)
def test_node_label_values_name_the_profile(label: str, profile: str) -> None:
    assert hardware_for_label(label) == profile


def test_aiconfigurator_system_names() -> None:
    assert [hardware_for_system(s) for s in ("b200_sxm", "gb200", "l4", "rtx_pro_6000_server")] == [
        "B200-SXM-180GB",
        "GB200-NVL72-186GB",
        "L4-24GB",
        "RTX-PRO-6000-Blackwell-Server-96GB",
    ]


def test_vllms_default_batch_tier_follows_device_memory() -> None:
    """vLLM: >= 70 GiB and not an A100 -> 8192 tokens / 1024 sequences; otherwise 2048 / 256."""
    tiers = {}
    for name in ("MI300X-192GB", "H20-96GB", "L4-24GB", "A10G-24GB"):
        engine = resolve_engine(EngineArgs(), load_hardware(name), 8192, "bf16")
        tiers[name] = (engine.max_num_batched_tokens, engine.max_num_seqs)
    assert tiers == {
        "MI300X-192GB": (8192, 1024),
        "H20-96GB": (8192, 1024),
        "L4-24GB": (2048, 256),
        "A10G-24GB": (2048, 256),
    }


def test_a10g_has_no_fp8_and_l4_has() -> None:
    assert load_hardware("A10G-24GB").peak_flops.fp8 is None
    assert load_hardware("L4-24GB").peak_flops.fp8 == 242.5e12  # Ada: 485 TFLOPS with sparsity


def test_one_l4_decode_step_by_hand() -> None:
    """Llama-3.1-8B, one sequence decoding its 1,001st token on one L4, bf16: every GEMM streams its weights.
    Each kernel moving b bytes takes mem_half/bw + b/bw at bw = 300 GB/s x 0.8 (the profile's efficiency);
    a GEMM also moves its input and output rows (2 x (n + k) bytes at m = 1). Host time: a FULL CUDA graph."""
    bw = 300e9 * 0.8
    latency = 1e6 / bw

    def moved(b: float) -> float:
        return latency + b / bw

    h, inter, layers, vocab = 4096, 14336, 32, 128256
    qkv = moved(6144 * h * 2 + 2 * (6144 + h))  # (32 + 2 x 8) heads x 128
    o_proj = moved(h * h * 2 + 2 * (h + h))
    mlp = moved(2 * inter * h * 2 + 2 * (2 * inter + h)) + moved(h * inter * 2 + 2 * (h + inter))
    norms = 2 * moved(8 * h) + moved(4 * 40 * 128 + 2 * 8 * 128 * 2) + moved(6 * inter)
    attention = moved(2 * 1001 * 8 * 128 * 2 + 4 * 32 * 128)  # K and V of 1,001 tokens, the query in and out
    lm_head = moved(vocab * h * 2 + 2 * (vocab + h)) + moved(8 * vocab)
    device = layers * (qkv + o_proj + mlp + norms + attention) + moved(6 * h) + lm_head
    by_hand = device + 0.0012

    model = IterationModel(Deployment(load_model("Llama-3.1-8B"), load_hardware("L4-24GB"), 1))
    timing = model.timing(BatchShape.from_sequences([1], [1000]))
    assert timing.breakdown["mlp"] == pytest.approx(layers * mlp, rel=1e-12)
    assert timing.total_s == pytest.approx(by_hand, rel=1e-12)
    assert timing.total_s == pytest.approx(0.0655477, abs=1e-7)  # 65.5 ms: 15.0 GB of weights at 240 GB/s


def test_a_prefill_mlp_on_l4_is_compute_bound_by_hand() -> None:
    """512 prompt tokens: GEMM efficiency 0.6 x 512 / (512 + 64) of the dense 121 TFLOPS."""
    peak = 121e12 * 0.6 * 512 / (512 + 64)
    gate_up, down = 2 * 512 * 28672 * 4096 / peak, 2 * 512 * 4096 * 14336 / peak
    model = IterationModel(Deployment(load_model("Llama-3.1-8B"), load_hardware("L4-24GB"), 1))
    mlp = model.timing(BatchShape.from_sequences([512], [0])).breakdown["mlp"]
    assert mlp == pytest.approx(32 * (gate_up + down), rel=1e-12)


AMD_MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata: {name: chat}
spec:
  replicas: 1
  selector: {matchLabels: {app: chat}}
  template:
    metadata: {labels: {app: chat}}
    spec:
      nodeSelector: {amd.com/gpu.product-name: AMD_Instinct_MI300X_OAM}
      containers:
        - name: vllm
          image: rocm/vllm:latest
          command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct, --max_model_len, "8192"]
          env: [{name: VLLM_ROCM_USE_AITER, value: "1"}]
          resources: {limits: {amd.com/gpu: 1, memory: 64Gi}, requests: {cpu: "8", memory: 64Gi}}
"""


def test_validate_reads_an_amd_deployment(tmp_path: Path) -> None:
    (tmp_path / "k8s.yaml").write_text(AMD_MANIFEST)
    traffic = {
        "type": "synthetic",
        "arrivals": {"type": "poisson", "rate": 2},
        "prompt_tokens": {"type": "fixed", "value": 512},
        "output_tokens": {"type": "fixed", "value": 16},
        "num_requests": 20,
    }
    deploy = {"name": "chat", "manifests": ["k8s.yaml"], "traffic": traffic, "slo": {"ttft_p99_s": 5.0}}
    (tmp_path / "deploy.yaml").write_text(yaml.safe_dump(deploy))
    report = validate(tmp_path / "deploy.yaml", [])
    assert report.deployment["hardware"] == "MI300X-192GB"
    errors = [f for f in report.findings if f.severity == "error"]
    assert errors == [] and report.prediction is not None
    assert report.prediction.kernel_costs.startswith("roofline")
    (kv,) = [f.message for f in report.findings if f.check == "kv-capacity" and f.message.startswith("KV cache")]
    assert kv.startswith("KV cache 1,270,480 tokens on 1 x MI300X-192GB")
    # at most 0.9 x 196,592 MiB less 16.06 GB of bf16 weights, over 131,072 KV bytes per token: 1,292,950;
    # activations, graphs and the non-torch reserve take the rest
    assert 1_270_480 < (0.9 * 196_592 * 2**20 - 16.06e9) / 131_072 < 1_270_480 * 1.02
    env = [f.message for f in report.findings if f.check == "vllm-args"]
    assert env == [
        "Deployment/chat: environment variable VLLM_ROCM_USE_AITER is read by vLLM 0.15.1 but not modelled: "
        "its effect is not predicted"
    ]


def test_short_names_pick_the_gpu_they_name_whole() -> None:
    assert [load_hardware(ref).name for ref in ("l4", "L40S", "h20", "h200", "b200", "gb200", "mi300x", "A10G")] == [
        "L4-24GB",
        "L40S-48GB",
        "H20-96GB",
        "H200-SXM-141GB",
        "B200-SXM-180GB",
        "GB200-NVL72-186GB",
        "MI300X-192GB",
        "A10G-24GB",
    ]
    with pytest.raises(InputError, match="ambiguous hardware 'a100'"):
        load_hardware("a100")


def test_blackwell_ultra_gpus_are_found_by_their_aiconfigurator_systems() -> None:
    # AIConfigurator's silicon_sample.csv measures vLLM on b300_sxm and gb300: such rows were skipped before
    assert [hardware_for_system(s) for s in ("b300_sxm", "gb300")] == ["B300-SXM-288GB", "GB300-NVL72-288GB"]
    assert [load_hardware(ref).name for ref in ("b300", "gb300")] == ["B300-SXM-288GB", "GB300-NVL72-288GB"]
    b300, gb300 = load_hardware("B300-SXM-288GB"), load_hardware("GB300-NVL72-288GB")
    assert b300.memory_bytes == 275_040 * 2**20 and gb300.memory_bytes == 284_208 * 2**20  # nvidia-smi's MiB
    # Blackwell Ultra trades INT8 tensor throughput for FP4: INT8 far below FP8 (B200: INT8 = FP8)
    assert b300.peak_flops.int8 == 153.5e12 < b300.peak_flops.fp8 == 4.5e15
    assert gb300.cuda_compute_capability == b300.cuda_compute_capability == "10.3"
    assert has_calibration("B300-SXM-288GB") and has_calibration("GB300-NVL72-288GB")  # aiconfigurator-core's tables
    # vLLM 0.28+ gives a device of 160 GiB or more 16,384 batched tokens (arg_utils _set_default_args); 0.15.1 8,192
    tiers = [resolve_engine(EngineArgs(vllm_version=v), b300, 8192, "bf16") for v in ("0.15.1", "0.32")]
    assert [(e.max_num_batched_tokens, e.max_num_seqs) for e in tiers] == [(8192, 1024), (16384, 1024)]
