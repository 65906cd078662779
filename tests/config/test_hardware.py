"""Hardware profiles load, carry their sources, and bad ones fail with file and field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ttftsim.errors import InputError
from ttftsim.hardware.catalog import all_profiles, load_hardware, profiles_dir

EXPECTED = {
    "A100-SXM4-40GB",
    "A100-SXM4-80GB",
    "A100-PCIe-80GB",
    "H100-SXM5-80GB",
    "H100-PCIe-80GB",
    "H200-SXM-141GB",
    "L40S-48GB",
    "CPU-host",
}


def test_all_required_profiles_exist() -> None:
    assert {p.name for p in all_profiles()} >= EXPECTED


def test_dense_not_sparse_peaks() -> None:
    h100 = load_hardware("H100-SXM5-80GB")
    assert h100.peak_flops.bf16 == 989e12  # 1,979 is the 2:4-sparse figure
    assert load_hardware("a100-sxm4-80gb").peak_flops.fp8 is None
    assert load_hardware("L40S").intra_node_link.kind == "pcie"


def test_prefix_lookup_and_ambiguity() -> None:
    assert load_hardware("h200").name == "H200-SXM-141GB"
    with pytest.raises(InputError, match="ambiguous"):
        load_hardware("a100")


def _broken_profile(tmp_path: Path, edit: dict[str, object]) -> Path:
    data = yaml.safe_load((profiles_dir() / "h100-sxm5-80gb.yaml").read_text())
    data.update(edit)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_negative_bandwidth_names_file_and_field(tmp_path: Path) -> None:
    path = _broken_profile(tmp_path, {"mem_bw_bytes_per_s": -1})
    with pytest.raises(InputError) as info:
        load_hardware(str(path))
    assert info.value.source == str(path.resolve())
    assert info.value.field == "mem_bw_bytes_per_s"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"mem_bw_bytes_per_s": 1e-300}, "mem_bw_bytes_per_s"),  # steps of infinite length
        ({"mem_bw_bytes_per_s": 1e300}, "mem_bw_bytes_per_s"),  # steps of no length
        ({"peak_flops": {"bf16": 1, "fp16": 1e15, "fp32": 1e14, "int8": 2e15, "fp8": 2e15}}, "peak_flops.bf16"),
    ],
)
def test_implausible_figures_are_refused(tmp_path: Path, change: dict[str, object], field: str) -> None:
    path = _broken_profile(tmp_path, change)
    with pytest.raises(InputError) as info:
        load_hardware(str(path))
    assert info.value.field == field


def test_unknown_field_is_refused(tmp_path: Path) -> None:
    path = _broken_profile(tmp_path, {"hbm_size": 3})
    with pytest.raises(InputError, match="hbm_size: unknown field"):
        load_hardware(str(path))


def _without_source(tmp_path: Path, field: str) -> Path:
    """The H100 profile with one entry of `sources` taken out, written to a file."""
    data = yaml.safe_load((profiles_dir() / "h100-sxm5-80gb.yaml").read_text())
    del data["sources"][field]
    path = tmp_path / "nosrc.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_missing_source_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="sources has no entry for peak_flops"):
        load_hardware(str(_without_source(tmp_path, "peak_flops")))


def test_invalid_yaml_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(InputError) as info:
        load_hardware(str(path))
    assert "\n" not in info.value.one_line()
    assert "not valid YAML" in info.value.one_line()


def test_every_nvidia_profile_states_its_compute_capability_with_a_source(tmp_path: Path) -> None:
    capabilities = {p.name: p.cuda_compute_capability for p in all_profiles()}
    assert capabilities["H100-SXM5-80GB"] == capabilities["H200-SXM-141GB"] == "9.0"
    assert capabilities["B200-SXM-180GB"] == "10.0" and capabilities["A100-SXM4-80GB"] == "8.0"
    assert capabilities["L40S-48GB"] == "8.9" and capabilities["RTX-PRO-6000-Blackwell-Server-96GB"] == "12.0"
    assert capabilities["MI300X-192GB"] is None and capabilities["CPU-host"] is None
    nvidia = [p.name for p in all_profiles() if p.device_name.startswith("NVIDIA")]
    assert capabilities["B300-SXM-288GB"] == capabilities["GB300-NVL72-288GB"] == "10.3"  # Blackwell Ultra, sm_103
    assert len(nvidia) == 15 and all(capabilities[name] is not None for name in nvidia)
    with pytest.raises(InputError, match="sources has no entry for cuda_compute_capability"):
        load_hardware(str(_without_source(tmp_path, "cuda_compute_capability")))
