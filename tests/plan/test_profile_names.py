"""A plan's hardware names and gpu_prices keys become the profiles' full names before anything else reads them,
so a prefix (h100-sxm) is priced, shown and written as H100-SXM5-80GB, and a price for no profile is an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttftsim.errors import InputError
from ttftsim.plan.evaluate import price_per_gpu_hour
from ttftsim.plan.run import load_plan, profile_names

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "plans" / "quickstart.yaml"


def _plan(tmp_path: Path, hardware: str, prices: str) -> Path:
    text = QUICKSTART.read_text().replace(
        "hardware: [H100-SXM5-80GB, A100-SXM4-80GB, L40S-48GB]", f"hardware: [{hardware}]"
    )
    path = tmp_path / "plan.yaml"
    path.write_text(text + f"gpu_prices: {{{prices}}}\n")
    return path


def test_prefixes_become_profile_names_and_their_prices_apply(tmp_path: Path) -> None:
    path = _plan(tmp_path, "h100-sxm, L40S-48G", "H100-SXM5-80GB: 10.0, l40s: 0.1")
    plan = profile_names(load_plan(path), path)
    assert plan.search.hardware == ["H100-SXM5-80GB", "L40S-48GB"]
    assert plan.gpu_prices == {"H100-SXM5-80GB": 10.0, "L40S-48GB": 0.1}
    assert price_per_gpu_hour(plan, "H100-SXM5-80GB") == 10.0  # was the profile's $3.00 with "h100-sxm" searched


def test_a_price_for_no_profile_is_an_error_naming_the_key(tmp_path: Path) -> None:
    path = _plan(tmp_path, "H100-SXM5-80GB", "Z900: 1.0")
    with pytest.raises(InputError) as caught:
        profile_names(load_plan(path), path)
    assert caught.value.field == "gpu_prices.Z900" and "unknown hardware 'Z900'" in str(caught.value)


def test_a_profile_file_is_found_from_the_plans_folder_and_priced_by_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan in plans/ naming ../hw/mine.yaml, run from elsewhere: the file was looked for from the working directory
    (file not found, naming no field), and a price keyed by the profile's name was refused (cold trial F5)."""
    profile = (Path(__file__).resolve().parents[2] / "hwprofiles" / "h100-sxm5-80gb.yaml").read_text()
    (tmp_path / "hw").mkdir()
    (tmp_path / "hw" / "mine.yaml").write_text(profile.replace("name: H100-SXM5-80GB", "name: H100-MINE"))
    (tmp_path / "plans").mkdir()
    path = _plan(tmp_path / "plans", "../hw/mine.yaml", "H100-MINE: 2.0")
    monkeypatch.chdir(tmp_path / "hw")  # anywhere but the plan's folder
    plan = profile_names(load_plan(path), path)
    found = str((tmp_path / "hw" / "mine.yaml").resolve())
    assert plan.search.hardware == [found] and plan.gpu_prices == {found: 2.0}
    missing = _plan(tmp_path / "plans", "../hw/missing.yaml", "")
    with pytest.raises(InputError) as caught:
        profile_names(load_plan(missing), missing)
    assert (caught.value.source, caught.value.field) == (str(missing), "search.hardware.0")
