"""A value of the wrong kind is an error naming the field, never converted: pydantic's lax mode would read
`true` as 1, "64" as 64 and "off" as False."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttftsim.config.base import COMMAND_LINE
from ttftsim.config.engine import EngineArgs
from ttftsim.config.loading import load_file
from ttftsim.config.scenario import Scenario
from ttftsim.errors import InputError

SCENARIO = """\
model: Llama-3.1-8B
hardware: H100-SXM5-80GB
engine: {{{engine}}}
workload:
  type: synthetic
  arrivals: {{type: poisson, rate: {rate}}}
  prompt_tokens: {{type: fixed, value: 64}}
  output_tokens: {{type: fixed, value: 8}}
  num_requests: 10
"""


def _load(tmp_path: Path, engine: str = "", rate: str = "5") -> Scenario:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(engine=engine, rate=rate))
    return load_file(Scenario, path)


@pytest.mark.parametrize(
    ("engine", "rate", "field", "message"),
    [
        ("tensor_parallel_size: true", "5", "engine.tensor_parallel_size", "expected a number, got a boolean (true)"),
        ('max_num_seqs: "64"', "5", "engine.max_num_seqs", "expected a number, got the string '64'"),
        ('enable_prefix_caching: "off"', "5", "engine.enable_prefix_caching", "expected true or false, got the string"),
        ("", "true", "workload.arrivals.rate", "expected a number, got a boolean (true)"),
        ("block_size: '16'", "5", "engine.block_size", "expected a number, got the string '16'"),
    ],
)
def test_a_value_of_the_wrong_kind_is_an_error_naming_the_field(
    tmp_path: Path, engine: str, rate: str, field: str, message: str
) -> None:
    with pytest.raises(InputError) as caught:
        _load(tmp_path, engine, rate)
    assert caught.value.field == field
    assert message in str(caught.value)


def test_values_of_the_right_kind_still_load(tmp_path: Path) -> None:
    scenario = _load(tmp_path, "max_num_seqs: 64, enable_prefix_caching: false, scheduling_policy: priority", "2.5")
    assert (scenario.engine.max_num_seqs, scenario.engine.enable_prefix_caching) == (64, False)
    assert scenario.engine.scheduling_policy == "priority"  # a string where the field takes strings


def test_an_exponent_without_sign_or_dot_is_a_number(tmp_path: Path) -> None:
    """YAML 1.1 (PyYAML) would load `2e1` as a string; YAML 1.2 and JSON read it as a number."""
    assert _load(tmp_path, rate="2e1").workload.arrivals.rate == 20.0  # type: ignore[union-attr]


def test_command_line_strings_are_converted_as_argparse_does() -> None:
    """vLLM arguments read from a manifest are strings; vLLM's argparse converts them, so validate does too."""
    engine = EngineArgs.model_validate(
        {"max_num_seqs": "64", "max_num_batched_tokens": "4096"}, context={COMMAND_LINE: True}
    )
    assert (engine.max_num_seqs, engine.max_num_batched_tokens) == (64, 4096)
