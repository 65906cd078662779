"""Adding a GPU means adding one file: a profile dropped into a profile folder (TTFTSIM_HWPROFILES) loads,
simulates, sets its own NCCL reserve and vLLM's default batch limits, and `validate` recognises pods pinned
to it by a node label the profile declares (a label key no shipped profile uses), all without Python."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ttftsim.calibration.tables import import_aiconfigurator
from ttftsim.config.scenario import Scenario
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import hardware_for_label, load_hardware, profiles_dir
from ttftsim.perf.memory import CUDA_CONTEXT_BYTES, nccl_reserve_bytes
from ttftsim.plan.manifests import gpu_node_selector
from ttftsim.simulate import simulate
from ttftsim.validate.run import validate

NCCL_TP2 = 500_000_000
PROFILE = {
    "name": "X200-SXM-96GB",
    "device_name": "NVIDIA X200",
    "node_labels": {"example.com/accelerator": ["x200-96gb"], "nvidia.com/gpu.product": ["NVIDIA-X200"]},
    "nccl_reserve_bytes_by_tp": {1: 0, 2: NCCL_TP2, 8: 600_000_000},
}
TRAFFIC = {
    "type": "synthetic",
    "arrivals": {"type": "poisson", "rate": 4},
    "prompt_tokens": {"type": "fixed", "value": 256},
    "output_tokens": {"type": "fixed", "value": 16},
    "num_requests": 20,
}
MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata: {name: chat}
spec:
  replicas: 1
  selector: {matchLabels: {app: chat}}
  template:
    metadata: {labels: {app: chat}}
    spec:
      nodeSelector: {example.com/accelerator: X200-96GB}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.15.1
          command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct, --tensor-parallel-size, "2"]
          resources: {limits: {nvidia.com/gpu: 2, memory: 64Gi}, requests: {cpu: "8"}}
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shipped profiles plus the new one: an H100-like 96 GB part under a name nothing in Python knows."""
    profiles = tmp_path / "profiles"
    shutil.copytree(profiles_dir(), profiles)
    data = yaml.safe_load((profiles / "h100-sxm5-80gb.yaml").read_text()) | PROFILE
    data["memory_bytes"] = 96 * 2**30
    del data["aiconfigurator_system"]
    (profiles / "x200-sxm-96gb.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    monkeypatch.setenv("TTFTSIM_HWPROFILES", str(profiles))
    return tmp_path


def test_a_new_profile_loads_and_names_its_labels(folder: Path) -> None:
    x200 = load_hardware("x200")
    assert x200.name == "X200-SXM-96GB"
    assert hardware_for_label("x200-96gb") == hardware_for_label("NVIDIA-X200") == "X200-SXM-96GB"
    assert gpu_node_selector(x200) == {"key": "example.com/accelerator", "operator": "In", "values": ["x200-96gb"]}


def test_a_new_profile_simulates_with_its_own_nccl_reserve_and_defaults(folder: Path) -> None:
    scenario = Scenario.model_validate(
        {
            "model": "Llama-3.1-8B",
            "hardware": "X200-SXM-96GB",
            "engine": {"tensor_parallel_size": 2},
            "workload": TRAFFIC,
            "slo": {"ttft_p99_s": 5.0},
        }
    )
    summary = simulate(scenario, folder).summary()
    assert summary.config is not None and summary.config.hardware == "X200-SXM-96GB"
    assert summary.config.memory_plan_bytes is not None
    assert summary.config.memory_plan_bytes["non_torch_bytes"] == CUDA_CONTEXT_BYTES + NCCL_TP2
    assert summary.config.engine["max_num_batched_tokens"] == 8192  # >= 70 GiB and not an A100: vLLM's big tier
    assert summary.config.kernel_costs.startswith("roofline")  # no calibration for it: said, not an error
    assert summary.requests.finished == 20 and summary.slo is not None and summary.slo.met


def test_validate_reads_the_new_gpu_from_its_node_label(folder: Path) -> None:
    (folder / "k8s.yaml").write_text(MANIFEST)
    deploy = {"name": "chat", "manifests": ["k8s.yaml"], "traffic": TRAFFIC, "slo": {"ttft_p99_s": 5.0}}
    (folder / "deploy.yaml").write_text(yaml.safe_dump(deploy))
    report = validate(folder / "deploy.yaml", [])
    assert report.deployment["hardware"] == "X200-SXM-96GB"
    assert not [f for f in report.findings if f.check == "gpu-affinity"], report.findings
    assert report.prediction is not None and report.passed, report.findings


def test_nccl_reserve_of_an_unlisted_tp_is_the_next_listed_one(folder: Path) -> None:
    x200 = load_hardware("x200")
    reserves = [nccl_reserve_bytes(x200, tp) for tp in (1, 2, 3, 4, 8, 16)]
    assert reserves == [0, NCCL_TP2, 600_000_000, 600_000_000, 600_000_000, 600_000_000]


def test_two_profiles_claiming_one_label_value_is_an_error(folder: Path) -> None:
    profiles = folder / "profiles"
    data = yaml.safe_load((profiles / "x200-sxm-96gb.yaml").read_text()) | {"name": "X200-copy"}
    (profiles / "x200-copy.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(InputError, match="'x200-96gb' names two hardware profiles: X200-copy and X200-SXM-96GB"):
        hardware_for_label("x200-96gb")


def test_kernel_tables_of_the_new_gpu_are_found_by_its_aiconfigurator_system(folder: Path) -> None:
    """A folder of AIConfigurator tables (aiconfigurator-core's layout: <system>/gemm/vllm/<version>/) belongs to
    the profile that names the system: no table of GPU names in Python."""
    profiles = folder / "profiles"
    data = yaml.safe_load((profiles / "x200-sxm-96gb.yaml").read_text()) | {"aiconfigurator_system": "x200_sxm"}
    (profiles / "x200-sxm-96gb.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    tables = folder / "tables" / "x200_sxm" / "gemm" / "vllm" / "0.24.0"
    tables.mkdir(parents=True)
    gemm = {"gemm_dtype": ["bfloat16", "bfloat16", "fp8"], "m": [8] * 3, "n": [4096] * 3, "k": [4096] * 3}
    gemm |= {"latency": [0.02, 0.03, 0.01], "kernel_source": ["torch.nn.functional.linear", "OtherKernel", "Cutlass"]}
    pd.DataFrame(gemm).to_parquet(tables / "gemm_perf.parquet")  # bf16 by two kernels: torch's is kept
    (folder / "tables" / "unknown_sys" / "gemm").mkdir(parents=True)  # a system no profile names: left out
    imported = import_aiconfigurator(folder / "tables")
    assert list(imported) == ["X200-SXM-96GB"]
    assert imported["X200-SXM-96GB"][["op", "dtype", "m", "seconds"]].to_dict("records") == [
        {"op": "gemm", "dtype": "bf16", "m": 8, "seconds": 2e-5},
        {"op": "gemm", "dtype": "fp8", "m": 8, "seconds": 1e-5},
    ]


@pytest.mark.parametrize(
    ("ref", "meant"),
    [
        ("A100-40GB", "(did you mean A100-SXM4-40GB? profiles: "),
        ("H100-80GB", "(did you mean H100-PCIe-80GB or H100-SXM5-80GB? profiles: "),
        ("h100_sxm", "(did you mean H100-SXM5-80GB? profiles: "),  # AIConfigurator's system name
        ("TPU-v9", "(profiles: "),
    ],
)
def test_an_unknown_hardware_name_says_which_profile_it_likely_meant(ref: str, meant: str) -> None:
    with pytest.raises(InputError) as caught:
        load_hardware(ref)
    assert caught.value.message.startswith(f"unknown hardware {ref!r} {meant}")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("memory_bytes", 94),  # GB written as a number of bytes
        ("memory_bytes", 94e15),
        ("intra_node_link.bw_bytes_per_s", 300),  # GB/s written as bytes/s: a 3-billion-ms all-reduce before
        ("host_to_device_bw_bytes_per_s", 55),
        ("overhead.iteration_s", 3),  # ms written as s
        ("peak_flops.bf16", 835e15),
    ],
)
def test_an_implausible_figure_in_a_profile_is_refused_naming_it(tmp_path: Path, field: str, value: float) -> None:
    """A unit slip in a user's own profile ran to an absurd prediction, exit 0 (cold trial F4): each figure has
    bounds no accelerator leaves (1 GB to 10 TB of memory, 0.1 GB/s to 1 PB/s links, at most 0.5 s of host time a
    step, at most 10x the fastest dense format listed), and a slip is one line naming the file and the field."""
    data = yaml.safe_load((profiles_dir() / "h100-sxm5-80gb.yaml").read_text())
    node = data
    *parents, leaf = field.split(".")
    for key in parents:
        node = node[key]
    node[leaf] = value
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(InputError) as caught:
        load_hardware(str(path))
    assert caught.value.source == str(path) and caught.value.field == field
