"""The command line as a user meets it: help works, bad input is one line on stderr with exit code 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ttftsim", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["models"],
        ["hardware"],
        ["step"],
        ["memory"],
        ["simulate"],
        ["plan"],
        ["validate"],
        ["compare"],
        ["schema"],
        ["accuracy"],
        ["calibrate"],
    ],
)
def test_help_works(command: list[str]) -> None:
    result = run(*command, "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout


def test_models_and_hardware_list() -> None:
    assert "Llama-3.1-70B" in run("models").stdout
    assert "H100-SXM5-80GB" in run("hardware").stdout


@pytest.mark.parametrize(
    "args", [["models"], ["simulate", str(Path(__file__).parents[1] / "examples" / "llama31-8b-h100.yaml"), "--json"]]
)
def test_a_reader_gone_before_the_output_ends_it_quietly_with_141(args: list[str]) -> None:
    """`ttftsim ... | head`: the pipe's reader is gone (here before the first write, so every write fails): exit 141,
    as a shell reports SIGPIPE, never 1 (an SLO missed) or 2 (bad input), and nothing on stderr."""
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "wb") as closed:
        result = subprocess.run(
            [sys.executable, "-m", "ttftsim", *args], stdout=closed, stderr=subprocess.PIPE, text=True, timeout=120
        )
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""


def _assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0]


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize(
    ("command", "file", "says"),
    [
        ("simulate", "plans/quickstart.yaml", "search: unknown field: this looks like a plan file, which ttftsim plan"),
        ("validate", "llama31-8b-h100.yaml", ": unknown field: this looks like a scenario, which ttftsim simulate"),
        ("plan", "validate/deploy.yaml", ": unknown field: this looks like a deploy file, which ttftsim validate"),
    ],
)
def test_a_file_given_to_the_wrong_command_is_named_with_the_right_one(command: str, file: str, says: str) -> None:
    _assert_one_line_error(run(command, str(EXAMPLES / file)), str(EXAMPLES / file), says)


def test_a_misspelt_field_gets_no_other_kinds_hint(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text((EXAMPLES / "llama31-8b-h100.yaml").read_text().replace("workload:", "wrkload:"))
    result = run("simulate", str(scenario))
    _assert_one_line_error(result, "wrkload: unknown field (did you mean workload?)")
    assert "looks like" not in result.stderr


def test_invalid_profile_file_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "gpu.yaml"
    src = Path(__file__).resolve().parents[1] / "hwprofiles" / "h100-sxm5-80gb.yaml"
    bad.write_text(src.read_text().replace("memory_bytes: 85520809984", "memory_bytes: lots"))
    result = run("step", "--model", "Llama-3.1-8B", "--hardware", str(bad), "--prompt-tokens", "10")
    _assert_one_line_error(result, str(bad), "memory_bytes")


def test_invalid_model_file_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text(
        '{"model_type": "llama", "hidden_size": "wide", "intermediate_size": 10, '
        '"num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 10}'
    )
    result = run("step", "--model", str(bad), "--hardware", "H100-SXM5-80GB", "--prompt-tokens", "10")
    _assert_one_line_error(result, str(bad), "hidden_size")


def test_model_that_does_not_fit_is_refused() -> None:
    result = run("memory", "--model", "Llama-3.1-70B", "--hardware", "H100-SXM5-80GB")
    _assert_one_line_error(result, "needs 141.1 GB of weights")


def test_memory_of_a_sliding_window_model_gives_vllms_block_count() -> None:
    """Gemma-3-12b on one H100 at its full 131,072 tokens (vLLM starts it: its start-up check counts the window):
    vLLM's 47,568 blocks over 6 groups are the 7,928 blocks of 16 tokens ("GPU KV cache size: 126,848 tokens")."""
    result = run("memory", "--model", "google/gemma-3-12b-pt", "--hardware", "H100-SXM5-80GB")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "7,928 blocks of 16 tokens = 126,848 tokens" in text
    assert "vLLM's num_gpu_blocks: 47,568, shared by 1 full-attention and 5 sliding-window KV-cache groups of 8" in text
    assert "keeps only its last 1,024 tokens in the sliding-window groups" in text


def test_memory_refuses_a_max_model_len_beyond_the_models_context_as_simulate_does() -> None:
    """`memory --max-model-len 16384` on gemma-2-9b (8,192 positions) printed a plan; simulate refuses it, as vLLM
    does (cold trial F9). The plan says the max_model_len it used."""
    result = run("memory", "--model", "gemma-2-9b", "--hardware", "H100-SXM5-80GB", "--max-model-len", "16384")
    _assert_one_line_error(result, "--max-model-len: 16,384 exceeds gemma-2-9b's context (8,192)")
    result = run("memory", "--model", "gemma-2-9b", "--hardware", "H100-SXM5-80GB")
    assert "(max_model_len 8,192)" in " ".join(result.stdout.split())


def test_usage_error_exits_2() -> None:
    result = run("step", "--model")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["simulate", "examples/llama31-8b-h100.yaml", "--no-such-flag"], "ttftsim simulate: No such option"),
        (["simulate"], "ttftsim simulate: Missing argument"),
        (["no-such-command"], "ttftsim: No such command"),
        (["step", "--tp", "abc"], "ttftsim step: Invalid value for '--tp'"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], said: str) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    entry = str(Path(sys.executable).with_name("ttftsim"))  # the installed command, as users type it
    done = subprocess.run([entry, *args], capture_output=True, text=True, cwd=root)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"error: {said}"), done.stderr
    assert "--help" in done.stderr and "Traceback" not in done.stderr


def test_memory_takes_vllms_defaults_for_the_gpu() -> None:
    """Left out, max_num_batched_tokens / max_num_seqs are what vLLM 0.15.1's API server takes on an H100 (8192,
    1024: >= 70 GiB and not an A100) and max_model_len the model's context: the same plan as given explicitly."""
    common = ("memory", "--model", "Llama-3.1-8B", "--hardware", "H100-SXM5-80GB")
    default = run(*common)
    explicit = run(*common, "--max-num-batched-tokens", "8192", "--max-num-seqs", "1024", "--max-model-len", "131072")
    older = run(*common, "--max-num-batched-tokens", "2048", "--max-num-seqs", "256", "--max-model-len", "4096")
    assert default.returncode == 0 and default.stdout == explicit.stdout != older.stdout


def test_step_and_explain_keep_the_token_limit() -> None:
    """The inputs' 10,000,000-token limit holds for the one-shot commands too (a 40-day step, a 20-digit count)."""
    step = ("step", "--model", "Llama-3.1-8B", "--hardware", "H100-SXM5-80GB", "--prompt-tokens", "100000000")
    _assert_one_line_error(run(*step), "--prompt-tokens", "10000000")
    flops = ("explain", "flops", "--model", "Llama-3.1-8B", "--tokens", "99999999999999999999")
    _assert_one_line_error(run(*flops), "--tokens", "10000000")


def test_schema_check_without_a_docs_folder_says_so(tmp_path: Path) -> None:
    result = run("schema", "--check", "--docs", str(tmp_path / "nowhere"))
    _assert_one_line_error(result, "--docs", "no docs folder here to check")


def test_an_input_error_with_json_is_also_a_json_document_on_stdout(tmp_path: Path) -> None:
    # a CI step parsing `validate --json` gets a document saying why, not an empty stdout
    bad = tmp_path / "deploy.yaml"
    bad.write_text("slo: [\n")
    result = run("validate", str(bad), "--json")
    _assert_one_line_error(result, str(bad), "not valid YAML")
    document = json.loads(result.stdout)
    assert document["exit_code"] == 2 and document["error"] == result.stderr.strip().removeprefix("error: ")
    assert run("validate", str(bad)).stdout == ""  # without --json, stdout stays empty


def test_piped_output_keeps_each_sentence_on_one_line_and_tables_at_least_160_wide(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A CI log is grepped: a finding longer than 160 characters stays one line (soft wrap), and COLUMNS widens
    the tables but never narrows them below 160 (pytest itself exports COLUMNS=80 to its subprocesses)."""
    import importlib

    app = importlib.import_module("ttftsim.cli.app")
    finding = "no nodeSelector or required node affinity on a GPU type label; in a cluster with several GPU types"
    out = run(
        "validate", str(Path(__file__).resolve().parents[1] / "examples" / "validate" / "deploy-kserve.yaml")
    ).stdout
    assert any(finding in line and len(line) > 160 for line in out.splitlines())
    assert out.startswith("kserve-8b: meta-llama/Llama-3.1-8B-Instruct on a GPU type not known (see the findings), ")
    for columns, width in (("", 160), ("80", 160), ("400", 400), ("wide", 160)):
        monkeypatch.setenv("COLUMNS", columns)
        assert app._piped_width() == width


def test_the_version_and_one_sentence_a_command_in_the_help() -> None:
    """`ttftsim --help` listed each command's whole docstring with its line breaks (the rest is the command's own
    --help); --version did not exist."""
    result = run("--version")
    assert result.returncode == 0 and re.fullmatch(r"ttftsim \S+\n", result.stdout), result.stdout
    listing = run("--help").stdout
    assert "Simulate one replica under a workload." in listing
    assert "summary.json" not in listing  # the second sentence of simulate's docstring
    assert "summary.json" in run("simulate", "--help").stdout
